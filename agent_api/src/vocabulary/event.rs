//! [`AgentWrapperEvent`]: the minimal, bounded event facet every backend produces.
//!
//! Wrapper events are never built from raw backend lines: they are projected from the universal
//! transcript (see [`crate::kit::projection`]) and pass through [`crate::run::enforce`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::vocabulary::kind::AgentKind;
use crate::vocabulary::tools_facet::ToolCategory;
use crate::vocabulary::tools_facet::{ToolsFacet, TOOLS_FACET_SCHEMA};
use crate::vocabulary::universal::{
    DecidedBy, PermissionDetails, PermissionStatus, QuestionStatus,
};

mod bounded;
mod channel;
mod data;

pub use bounded::{enforce, enforce_into, within_bounds};
pub use channel::Channel;
pub use data::EventData;

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

/// A streamed answer message taken back ([`AgentWrapperEvent::retraction`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retraction {
    /// The message (the `data.item_id` of its streamed `text_output` events).
    pub item_id: String,
    /// How many bytes of text it had streamed, all taken back.
    pub bytes: usize,
}

/// One event of the wrapper view. Absent options are omitted from its JSON form.
///
/// ```
/// use agent_api::{AgentKind, AgentWrapperEvent, AgentWrapperEventKind};
/// let ev = AgentWrapperEvent::new(AgentKind::from_static("my_agent"), AgentWrapperEventKind::TextOutput)
///     .with_channel("assistant")
///     .with_text("hi");
/// assert_eq!(
///     serde_json::to_string(&ev).unwrap(),
///     r#"{"agent_kind":"my_agent","kind":"text_output","channel":"assistant","text":"hi"}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AgentWrapperEvent {
    /// The backend that produced the event.
    pub agent_kind: AgentKind,
    /// What the event reports.
    pub kind: AgentWrapperEventKind,
    /// Which stream the event belongs to; a name over 128 bytes is dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<Channel>,
    /// Text for `TextOutput`, at most 65,536 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Message for `Status` and `Error`, at most 4,096 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Structured, safe payload, at most 65,536 serialized bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<EventData>,
}

impl AgentWrapperEvent {
    /// An event with every optional field empty.
    pub fn new(agent_kind: AgentKind, kind: AgentWrapperEventKind) -> Self {
        Self {
            agent_kind,
            kind,
            channel: None,
            text: None,
            message: None,
            data: None,
        }
    }

    /// Sets `channel`.
    pub fn with_channel(mut self, channel: impl Into<Channel>) -> Self {
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
        self.data = Some(data.into());
        self
    }

    /// Sets `data` to a tools facet, kept typed until it is read as JSON.
    pub fn with_tools_facet(mut self, facet: ToolsFacet) -> Self {
        self.data = Some(facet.into());
        self
    }

    /// Whether the event is on `channel`.
    pub fn is_on(&self, channel: &Channel) -> bool {
        self.channel.as_ref() == Some(channel)
    }

    /// The text of a `TextOutput` event on `channel`.
    pub fn text_on(&self, channel: &Channel) -> Option<&str> {
        (self.kind == AgentWrapperEventKind::TextOutput && self.is_on(channel))
            .then_some(self.text.as_deref())
            .flatten()
    }

    /// The agent's answer text carried by this event, if it carries some.
    ///
    /// ```
    /// use agent_api::{AgentKind, AgentWrapperEvent, AgentWrapperEventKind};
    /// use agent_api::run::Channel;
    /// let ev = AgentWrapperEvent::new(AgentKind::from_static("my_agent"), AgentWrapperEventKind::TextOutput)
    ///     .with_channel(Channel::Assistant)
    ///     .with_text("hi");
    /// assert_eq!(ev.assistant_text(), Some("hi"));
    /// ```
    pub fn assistant_text(&self) -> Option<&str> {
        self.text_on(&Channel::Assistant)
    }

    /// The answer message whose streamed text this event takes back (a `status` event of the
    /// streaming wrapper view, [`crate::RunHandle::into_wrapper_streaming`]): that message was cut
    /// and is not an answer.
    ///
    /// ```
    /// use agent_api::{AgentKind, AgentWrapperEvent, AgentWrapperEventKind};
    /// let ev = AgentWrapperEvent::new(AgentKind::from_static("my_agent"), AgentWrapperEventKind::Status)
    ///     .with_data(serde_json::json!({ "retracted": { "item_id": "itm_1", "bytes": 3 } }));
    /// assert_eq!(ev.retraction().map(|r| r.bytes), Some(3));
    /// ```
    pub fn retraction(&self) -> Option<Retraction> {
        if self.kind != AgentWrapperEventKind::Status {
            return None;
        }
        let retracted = self.data.as_ref()?.get("retracted")?;
        Some(Retraction {
            item_id: retracted.get("item_id")?.as_str()?.to_string(),
            bytes: retracted.get("bytes")?.as_u64()? as usize,
        })
    }

    /// The tools facet of a `ToolCall` or `ToolResult` event, when the backend attaches it
    /// (`agent_api.tools.structured.v1`).
    pub fn tools_facet(&self) -> Option<ToolsFacet> {
        if !matches!(
            self.kind,
            AgentWrapperEventKind::ToolCall | AgentWrapperEventKind::ToolResult
        ) {
            return None;
        }
        let data = self.data.as_ref()?;
        if let Some(facet) = data.tools_facet() {
            return Some(facet.clone());
        }
        if data.get("schema")?.as_str()? != TOOLS_FACET_SCHEMA {
            return None;
        }
        serde_json::from_value(data.get("tool")?.clone()).ok()
    }

    /// The permission request behind an event on the `permission` channel.
    pub fn permission(&self) -> Option<PermissionFacet> {
        self.data_field(&Channel::Permission, "permission")
    }

    /// The question behind an event on the `question` channel.
    pub fn question(&self) -> Option<QuestionFacet> {
        self.data_field(&Channel::Question, "question")
    }

    /// The typed error code of an `Error` event (an [`AgentError::code`](crate::AgentError::code)),
    /// or of a non-terminal error reported as status.
    pub fn error_code(&self) -> Option<&str> {
        if !self.is_on(&Channel::Error) {
            return None;
        }
        self.data.as_ref()?.get("code")?.as_str()
    }

    fn data_field<T: serde::de::DeserializeOwned>(
        &self,
        channel: &Channel,
        key: &str,
    ) -> Option<T> {
        if !self.is_on(channel) {
            return None;
        }
        serde_json::from_value(self.data.as_ref()?.get(key)?.clone()).ok()
    }
}

/// What a wrapper event on the `permission` channel says about its request (`data.permission`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PermissionFacet {
    /// The id to answer with [`RunControl::respond_permission`](crate::RunControl::respond_permission).
    pub id: String,
    /// What the agent wants to do: the tool and a safe summary.
    pub action: String,
    /// Where the request stands.
    pub status: PermissionStatus,
    /// The category a permission policy decides it by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<ToolCategory>,
    /// The agent's name for the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The tool call (its `call_id`, as on the `tool` channel), command, directory and file it concerns.
    #[serde(flatten)]
    pub details: PermissionDetails,
    /// Who decided it, once it is resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
}

/// What a wrapper event on the `question` channel says about its question (`data.question`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QuestionFacet {
    /// The id to answer with [`RunControl::answer_question`](crate::RunControl::answer_question).
    pub id: String,
    /// The question.
    pub prompt: String,
    /// The offered answers (empty for a free-form question).
    pub options: Vec<String>,
    /// Where the question stands.
    pub status: QuestionStatus,
    /// The answer, once there is one.
    pub response: Option<String>,
    /// The id of the tool call that asks it, where the agent asks through a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Who resolved it, once it is resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
}
