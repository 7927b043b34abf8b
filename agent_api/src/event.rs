//! [`AgentWrapperEvent`]: the minimal, bounded event facet every backend produces.
//!
//! Wrapper events are never built from raw backend lines: they are projected from the universal
//! transcript (see [`crate::projection`]) and pass through [`crate::bounds::enforce`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::kind::AgentKind;

/// What an [`AgentWrapperEvent`] reports. Serialized in snake_case (`text_output`, `tool_call`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentWrapperEventKind {
    /// Streamed text; `text` holds it and `channel` says whose (`assistant`, `reasoning`, `user`).
    TextOutput,
    /// A tool invocation; `data` holds the tools facet when the backend advertises it.
    ToolCall,
    /// A tool outcome; `data` holds the tools facet when the backend advertises it.
    ToolResult,
    /// Lifecycle and progress; `message` says what happened.
    Status,
    /// The one terminal error of a failing run; `message` matches the completion error.
    Error,
    /// Something the backend could not classify.
    Unknown,
}

/// One event of the wrapper view. Absent options are omitted from its JSON form.
///
/// ```
/// use agent_api::{AgentKind, AgentWrapperEvent, AgentWrapperEventKind};
/// let ev = AgentWrapperEvent::new(AgentKind::from_static("scripted"), AgentWrapperEventKind::TextOutput)
///     .with_channel("assistant")
///     .with_text("hi");
/// assert_eq!(
///     serde_json::to_string(&ev).unwrap(),
///     r#"{"agent_kind":"scripted","kind":"text_output","channel":"assistant","text":"hi"}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AgentWrapperEvent {
    /// The backend that produced the event.
    pub agent_kind: AgentKind,
    /// What the event reports.
    pub kind: AgentWrapperEventKind,
    /// Best-effort grouping, at most 128 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Text for `TextOutput`, at most 65,536 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Message for `Status` and `Error`, at most 4,096 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Structured, safe payload, at most 65,536 serialized bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl AgentWrapperEvent {
    /// An event with every optional field empty.
    pub fn new(agent_kind: AgentKind, kind: AgentWrapperEventKind) -> Self {
        Self { agent_kind, kind, channel: None, text: None, message: None, data: None }
    }

    /// Sets `channel`.
    pub fn with_channel(mut self, channel: impl Into<String>) -> Self {
        self.channel = Some(channel.into());
        self
    }

    /// Sets `text`.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Sets `message`.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }

    /// Sets `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}
