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

/// Every field any [`AgentLine`] may carry, flat: serde reads it in one pass, where the
/// internally tagged [`AgentLine`] first buffers the whole line to find its `type`.
#[derive(Deserialize)]
pub(crate) struct FlatAgentLine {
    #[serde(rename = "type")]
    kind: AgentLineType,
    id: Option<String>,
    model: Option<String>,
    message_id: Option<String>,
    text: Option<String>,
    call_id: Option<String>,
    name: Option<String>,
    input: Option<serde_json::Value>,
    request_id: Option<String>,
    summary: Option<String>,
    exit_code: Option<i64>,
    stdout: Option<String>,
    denied: Option<bool>,
    question_id: Option<String>,
    prompt: Option<String>,
    options: Option<Vec<String>>,
    message: Option<String>,
    code: Option<String>,
    status: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum AgentLineType {
    Session,
    TextDelta,
    MessageDone,
    ReasoningDelta,
    ReasoningDone,
    ToolCall,
    PermissionRequest,
    ToolResult,
    Question,
    Error,
    Done,
}

impl FlatAgentLine {
    /// The line, when it has every field its type needs (`None`: parse it as an [`AgentLine`],
    /// whose error says what is missing).
    pub(crate) fn into_line(self) -> Option<AgentLine> {
        Some(match self.kind {
            AgentLineType::Session => AgentLine::Session { id: self.id?, model: self.model? },
            AgentLineType::TextDelta => AgentLine::TextDelta { message_id: self.message_id?, text: self.text? },
            AgentLineType::MessageDone => AgentLine::MessageDone { message_id: self.message_id?, text: self.text? },
            AgentLineType::ReasoningDelta => AgentLine::ReasoningDelta { id: self.id?, text: self.text? },
            AgentLineType::ReasoningDone => AgentLine::ReasoningDone { id: self.id? },
            AgentLineType::ToolCall => {
                AgentLine::ToolCall { call_id: self.call_id?, name: self.name?, message_id: self.message_id?, input: self.input? }
            }
            AgentLineType::PermissionRequest => {
                AgentLine::PermissionRequest { request_id: self.request_id?, call_id: self.call_id?, summary: self.summary? }
            }
            AgentLineType::ToolResult => {
                AgentLine::ToolResult { call_id: self.call_id?, exit_code: self.exit_code?, stdout: self.stdout?, denied: self.denied? }
            }
            AgentLineType::Question => AgentLine::Question { question_id: self.question_id?, prompt: self.prompt?, options: self.options? },
            AgentLineType::Error => AgentLine::Error { message: self.message?, code: self.code? },
            AgentLineType::Done => {
                AgentLine::Done { status: self.status?, input_tokens: self.input_tokens?, output_tokens: self.output_tokens? }
            }
        })
    }
}
