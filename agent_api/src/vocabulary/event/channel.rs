//! [`Channel`]: whose output a wrapper event carries, as a typed name.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The `channel` of an [`AgentWrapperEvent`](crate::AgentWrapperEvent): which stream an event
/// belongs to. The names the shared projection produces are variants; any other name a caller or
/// backend uses survives as [`Channel::Other`], so nothing is lost when new channels appear.
///
/// Serialized as its plain name (`"assistant"`).
///
/// ```
/// use agent_api::run::Channel;
/// assert_eq!(Channel::from("reasoning"), Channel::Reasoning);
/// assert_eq!(Channel::from("telemetry"), Channel::Other("telemetry".into()));
/// assert_eq!(Channel::Assistant.as_str(), "assistant");
/// assert_eq!(serde_json::to_string(&Channel::Tool).unwrap(), r#""tool""#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
#[non_exhaustive]
pub enum Channel {
    /// The agent's answer text.
    Assistant,
    /// The agent's reasoning (thinking) text.
    Reasoning,
    /// The user's message (as sent, or echoed by the agent).
    User,
    /// A system message.
    System,
    /// Tool calls and results.
    Tool,
    /// Lifecycle and progress.
    Status,
    /// Errors: the terminal error, and non-terminal errors reported as status.
    Error,
    /// Permission requests and their decisions.
    Permission,
    /// Questions to the caller and their answers.
    Question,
    /// Any other name.
    Other(String),
}

impl Channel {
    /// The channel's name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Assistant => "assistant",
            Self::Reasoning => "reasoning",
            Self::User => "user",
            Self::System => "system",
            Self::Tool => "tool",
            Self::Status => "status",
            Self::Error => "error",
            Self::Permission => "permission",
            Self::Question => "question",
            Self::Other(name) => name,
        }
    }

    /// Whether the channel carries text written by the agent or the user (not by the SDK).
    pub fn is_conversation(&self) -> bool {
        matches!(
            self,
            Self::Assistant | Self::Reasoning | Self::User | Self::System
        )
    }
}

impl From<&str> for Channel {
    fn from(name: &str) -> Self {
        match name {
            "assistant" => Self::Assistant,
            "reasoning" => Self::Reasoning,
            "user" => Self::User,
            "system" => Self::System,
            "tool" => Self::Tool,
            "status" => Self::Status,
            "error" => Self::Error,
            "permission" => Self::Permission,
            "question" => Self::Question,
            other => Self::Other(other.to_string()),
        }
    }
}

impl From<String> for Channel {
    fn from(name: String) -> Self {
        match Channel::from(name.as_str()) {
            Self::Other(_) => Self::Other(name),
            known => known,
        }
    }
}

impl From<Channel> for String {
    fn from(channel: Channel) -> Self {
        match channel {
            Channel::Other(name) => name,
            known => known.as_str().to_string(),
        }
    }
}

impl PartialEq<str> for Channel {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Channel {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
