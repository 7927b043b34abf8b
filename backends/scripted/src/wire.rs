//! The scripted agent's native protocol: one JSON object a line, `type` first.
//!
//! Agent → client: [`AgentLine`]. Client → agent: [`ClientLine`].

use agent_api::kit::LineStr;
use serde::{Deserialize, Serialize};

/// The `status` of a [`AgentLine::Done`] ending a turn that could not load the session it was
/// asked to continue (`AgentError::SessionNotFound`).
pub const SESSION_NOT_FOUND: &str = "session_not_found";

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
        /// `success`, `error`, `interrupted`, or [`SESSION_NOT_FOUND`] (the session it was
        /// asked to continue cannot be loaded).
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
    /// Work in this mode from the next turn on (`default` or `plan`), between turns.
    SetMode {
        /// The mode.
        mode: String,
    },
}

/// Every field any [`AgentLine`] may carry, flat: serde reads it in one pass, where the
/// internally tagged [`AgentLine`] first buffers the whole line to find its `type`. Strings
/// borrow from the line where they have no escapes.
#[derive(Deserialize)]
pub(crate) struct FlatAgentLine<'a> {
    #[serde(rename = "type")]
    kind: AgentLineType,
    #[serde(borrow)]
    id: Option<LineStr<'a>>,
    #[serde(borrow)]
    model: Option<LineStr<'a>>,
    #[serde(borrow)]
    message_id: Option<LineStr<'a>>,
    #[serde(borrow)]
    text: Option<LineStr<'a>>,
    #[serde(borrow)]
    call_id: Option<LineStr<'a>>,
    #[serde(borrow)]
    name: Option<LineStr<'a>>,
    input: Option<serde_json::Value>,
    #[serde(borrow)]
    request_id: Option<LineStr<'a>>,
    #[serde(borrow)]
    summary: Option<LineStr<'a>>,
    exit_code: Option<i64>,
    #[serde(borrow)]
    stdout: Option<LineStr<'a>>,
    denied: Option<bool>,
    #[serde(borrow)]
    question_id: Option<LineStr<'a>>,
    #[serde(borrow)]
    prompt: Option<LineStr<'a>>,
    options: Option<Vec<String>>,
    #[serde(borrow)]
    message: Option<LineStr<'a>>,
    #[serde(borrow)]
    code: Option<LineStr<'a>>,
    #[serde(borrow)]
    status: Option<LineStr<'a>>,
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

/// A line of the kinds a turn is made of, read by its own small struct when the line begins with
/// its `type` (as the scripted agent writes it): reading the few fields a kind has costs half of
/// reading [`FlatAgentLine`]'s twenty-two. Any other line is for [`FlatAgentLine`].
pub(crate) enum LeadingLine<'a> {
    /// A text delta, left borrowed: its message id is only looked up and its text copied once.
    TextDelta {
        /// The message the fragment belongs to.
        message_id: LineStr<'a>,
        /// The fragment.
        text: LineStr<'a>,
    },
    /// Another frequent line.
    Line(AgentLine),
}

/// `text_delta` and `message_done`. Each struct reads `type` as [`FlatAgentLine`] does, so that a
/// line is taken or refused alike (a repeated `type` is refused).
#[derive(Deserialize)]
struct MessageLine<'a> {
    #[serde(rename = "type")]
    _kind: AgentLineType,
    #[serde(borrow)]
    message_id: LineStr<'a>,
    #[serde(borrow)]
    text: LineStr<'a>,
}

#[derive(Deserialize)]
struct ToolCallLine<'a> {
    #[serde(rename = "type")]
    _kind: AgentLineType,
    #[serde(borrow)]
    call_id: LineStr<'a>,
    #[serde(borrow)]
    name: LineStr<'a>,
    #[serde(borrow)]
    message_id: LineStr<'a>,
    input: serde_json::Value,
}

#[derive(Deserialize)]
struct ToolResultLine<'a> {
    #[serde(rename = "type")]
    _kind: AgentLineType,
    #[serde(borrow)]
    call_id: LineStr<'a>,
    exit_code: i64,
    #[serde(borrow)]
    stdout: LineStr<'a>,
    denied: bool,
}

impl<'a> LeadingLine<'a> {
    /// The line, when it begins with the type of a kind read here and has that kind's fields.
    pub(crate) fn parse(line: &'a [u8]) -> Option<Self> {
        use agent_api::kit::parse_typed;
        let rest = line.strip_prefix(br#"{"type":""#)?;
        let kind = &rest[..rest.iter().position(|&b| b == b'"')?];
        Some(match kind {
            b"text_delta" => parse_typed(line).map(|l: MessageLine<'a>| Self::TextDelta {
                message_id: l.message_id,
                text: l.text,
            })?,
            b"message_done" => parse_typed(line).map(|l: MessageLine<'_>| {
                Self::Line(AgentLine::MessageDone {
                    message_id: l.message_id.into_owned(),
                    text: l.text.into_owned(),
                })
            })?,
            b"tool_call" => parse_typed(line).map(|l: ToolCallLine<'_>| {
                Self::Line(AgentLine::ToolCall {
                    call_id: l.call_id.into_owned(),
                    name: l.name.into_owned(),
                    message_id: l.message_id.into_owned(),
                    input: l.input,
                })
            })?,
            b"tool_result" => parse_typed(line).map(|l: ToolResultLine<'_>| {
                Self::Line(AgentLine::ToolResult {
                    call_id: l.call_id.into_owned(),
                    exit_code: l.exit_code,
                    stdout: l.stdout.into_owned(),
                    denied: l.denied,
                })
            })?,
            _ => return None,
        })
    }
}

impl FlatAgentLine<'_> {
    /// The line, when it has every field its type needs (`None`: parse it as an [`AgentLine`],
    /// whose error says what is missing).
    pub(crate) fn into_line(self) -> Option<AgentLine> {
        Some(match self.kind {
            AgentLineType::Session => AgentLine::Session {
                id: self.id?.into_owned(),
                model: self.model?.into_owned(),
            },
            AgentLineType::TextDelta => AgentLine::TextDelta {
                message_id: self.message_id?.into_owned(),
                text: self.text?.into_owned(),
            },
            AgentLineType::MessageDone => AgentLine::MessageDone {
                message_id: self.message_id?.into_owned(),
                text: self.text?.into_owned(),
            },
            AgentLineType::ReasoningDelta => AgentLine::ReasoningDelta {
                id: self.id?.into_owned(),
                text: self.text?.into_owned(),
            },
            AgentLineType::ReasoningDone => AgentLine::ReasoningDone {
                id: self.id?.into_owned(),
            },
            AgentLineType::ToolCall => AgentLine::ToolCall {
                call_id: self.call_id?.into_owned(),
                name: self.name?.into_owned(),
                message_id: self.message_id?.into_owned(),
                input: self.input?,
            },
            AgentLineType::PermissionRequest => AgentLine::PermissionRequest {
                request_id: self.request_id?.into_owned(),
                call_id: self.call_id?.into_owned(),
                summary: self.summary?.into_owned(),
            },
            AgentLineType::ToolResult => AgentLine::ToolResult {
                call_id: self.call_id?.into_owned(),
                exit_code: self.exit_code?,
                stdout: self.stdout?.into_owned(),
                denied: self.denied?,
            },
            AgentLineType::Question => AgentLine::Question {
                question_id: self.question_id?.into_owned(),
                prompt: self.prompt?.into_owned(),
                options: self.options?,
            },
            AgentLineType::Error => AgentLine::Error {
                message: self.message?.into_owned(),
                code: self.code?.into_owned(),
            },
            AgentLineType::Done => AgentLine::Done {
                status: self.status?.into_owned(),
                input_tokens: self.input_tokens?,
                output_tokens: self.output_tokens?,
            },
        })
    }
}
