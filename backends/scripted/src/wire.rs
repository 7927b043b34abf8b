//! The scripted agent's native protocol: one JSON object a line, `type` first.
//!
//! Agent → client: [`AgentLine`]. Client → agent: [`ClientLine`].

use serde::{Deserialize, Serialize};

/// A line the scripted agent writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentLine {
    /// The session began.
    Session {
        /// The agent's session id.
        id: String,
        /// The model playing the script.
        model: String,
    },
    /// A fragment of an assistant message.
    TextDelta {
        /// Message id.
        message_id: String,
        /// The fragment.
        text: String,
    },
    /// The message is complete.
    MessageDone {
        /// Message id.
        message_id: String,
        /// Its full text.
        text: String,
    },
    /// A fragment of reasoning.
    ReasoningDelta {
        /// Reasoning block id.
        id: String,
        /// The fragment.
        text: String,
    },
    /// The reasoning block is complete.
    ReasoningDone {
        /// Reasoning block id.
        id: String,
    },
    /// The agent calls a tool.
    ToolCall {
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// The message the call belongs to.
        message_id: String,
        /// Tool input.
        input: serde_json::Value,
    },
    /// The agent asks to run a tool.
    PermissionRequest {
        /// Request id.
        request_id: String,
        /// The call that waits.
        call_id: String,
        /// What it wants to do.
        summary: String,
    },
    /// A tool finished.
    ToolResult {
        /// Call id.
        call_id: String,
        /// Exit code of the (pretend) command.
        exit_code: i64,
        /// Its standard output.
        stdout: String,
        /// Whether the call was refused.
        denied: bool,
    },
    /// The agent asks the user a question.
    Question {
        /// Question id.
        question_id: String,
        /// The question.
        prompt: String,
        /// The choices.
        options: Vec<String>,
    },
    /// The agent hit an error.
    Error {
        /// What went wrong.
        message: String,
        /// A code.
        code: String,
    },
    /// The turn is over.
    Done {
        /// `success`, `error` or `interrupted`.
        status: String,
        /// Input tokens the script pretends to have used.
        input_tokens: u64,
        /// Output tokens the script pretends to have used.
        output_tokens: u64,
    },
}

/// A line the client writes to the scripted agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientLine {
    /// The decision on a permission request.
    PermissionResponse {
        /// Request id.
        request_id: String,
        /// Whether the tool may run.
        allow: bool,
    },
    /// The answer to a question (`None`: rejected).
    Answer {
        /// Question id.
        question_id: String,
        /// The answer.
        answer: Option<String>,
    },
    /// Stop the turn now.
    Interrupt,
    /// The next turn of a live session: the user's message.
    UserMessage {
        /// The message text.
        text: String,
    },
}
