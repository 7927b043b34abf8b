//! [`UniversalItem`] and its content parts.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::vocabulary::tools_facet::{FacetKind, ToolBytes};

/// A discrete unit of a session: a message, a tool call, a tool result, a status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UniversalItem {
    /// Daemon-generated id (`itm_…`).
    pub item_id: String,
    /// The provider's id for the item, when it has one.
    pub native_item_id: Option<String>,
    /// The item this one belongs to (a tool call's message, a tool result's call).
    pub parent_id: Option<String>,
    /// What the item is.
    pub kind: ItemKind,
    /// Who speaks, for messages.
    pub role: Option<ItemRole>,
    /// Ordered content parts.
    pub content: Vec<ContentPart>,
    /// Lifecycle status.
    pub status: ItemStatus,
    /// Tool metadata for tool items: what the tools facet is built from (project extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolMeta>,
}

impl UniversalItem {
    /// The concatenated text of the item's `text` parts.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The concatenated text of the item's `reasoning` parts.
    pub fn reasoning_text(&self) -> String {
        self.content
            .iter()
            .filter_map(|p| match p {
                ContentPart::Reasoning { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool invocation of a `tool_call` item.
    ///
    /// ```
    /// use agent_api::kit::transcript::NewItem;
    /// # use agent_api::kit::transcript::Transcript;
    /// let mut t = Transcript::new("sess_1".into(), false);
    /// let id = t.start_item(NewItem::tool_call("Bash", r#"{"command":"ls"}"#, "call_1"));
    /// let call = t.open_item(&id).unwrap().tool_call().unwrap();
    /// assert_eq!((call.name, call.call_id), ("Bash", "call_1"));
    /// assert_eq!(call.arguments_json().unwrap()["command"], "ls");
    /// ```
    pub fn tool_call(&self) -> Option<ToolCallRef<'_>> {
        self.content.iter().find_map(|p| match p {
            ContentPart::ToolCall {
                name,
                arguments,
                call_id,
            } => Some(ToolCallRef {
                name,
                arguments,
                call_id,
            }),
            _ => None,
        })
    }

    /// The output of a `tool_result` item.
    pub fn tool_output(&self) -> Option<&str> {
        self.content.iter().find_map(|p| match p {
            ContentPart::ToolResult { output, .. } => Some(output.as_str()),
            _ => None,
        })
    }

    /// The files the item touched, with what was done to each.
    pub fn file_refs(&self) -> impl Iterator<Item = (&str, FileAction)> + '_ {
        self.content.iter().filter_map(|p| match p {
            ContentPart::FileRef { path, action, .. } => Some((path.as_str(), *action)),
            _ => None,
        })
    }

    /// Whether the item carries reasoning rather than answer text.
    pub fn is_reasoning(&self) -> bool {
        self.content
            .iter()
            .any(|p| matches!(p, ContentPart::Reasoning { .. }))
    }

    /// Whether the item is an answer: a message neither from the user or the system nor
    /// reasoning (the wrapper view shows its text once, when it completes).
    pub fn is_answer(&self) -> bool {
        self.kind == ItemKind::Message
            && !matches!(self.role, Some(ItemRole::User | ItemRole::System))
            && !self.is_reasoning()
    }
}

/// A borrowed view of a `tool_call` content part (see [`UniversalItem::tool_call`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCallRef<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// The arguments as the agent sent them: JSON text whose shape is the tool's own.
    pub arguments: &'a str,
    /// The id linking the call to its result.
    pub call_id: &'a str,
}

impl ToolCallRef<'_> {
    /// The arguments parsed as JSON, when they are JSON.
    pub fn arguments_json(&self) -> Option<Value> {
        serde_json::from_str(self.arguments).ok()
    }
}

/// Tool metadata of a tool item (an extension of the seed schema; see `spec/universal-schema.md`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolMeta {
    /// Tools-facet kind: `command_execution`, `file_change`, `mcp_tool_call`, `tool_use`, …
    pub kind: String,
    /// The tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The native turn id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// A command's exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// The shell command of a command tool, as one line of text (an argv is joined by spaces),
    /// cut to [`COMMAND_BOUND`](super::COMMAND_BOUND); see [`ToolMeta::with_shell_fields`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The directory the command runs in, when the agent names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Payload sizes.
    #[serde(default)]
    pub bytes: ToolBytes,
}

impl ToolMeta {
    /// Metadata of a tool of `kind`, everything else empty.
    pub fn of(kind: FacetKind) -> Self {
        Self {
            kind: kind.into(),
            ..Self::default()
        }
    }

    /// The kind, typed, when it is one [`FacetKind`] names (the wire's set is open).
    pub fn facet_kind(&self) -> Option<FacetKind> {
        FacetKind::parse(&self.kind)
    }

    /// Whether the tool runs a shell command.
    pub fn is_command(&self) -> bool {
        self.facet_kind() == Some(FacetKind::CommandExecution)
    }
}

/// Item category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ItemKind {
    /// A user or assistant message (reasoning is an assistant message with reasoning parts).
    Message,
    /// A tool invocation.
    ToolCall,
    /// A tool's outcome.
    ToolResult,
    /// A system message.
    System,
    /// A status update.
    Status,
    /// An item the backend could not classify.
    Unknown,
}

/// Who speaks in a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemRole {
    /// The user (or the caller on their behalf).
    User,
    /// The agent.
    Assistant,
    /// The system prompt or the harness.
    System,
    /// A tool.
    Tool,
}

/// Item lifecycle status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    /// Streaming or pending.
    InProgress,
    /// Finalized.
    Completed,
    /// Failed or interrupted.
    Failed,
}

/// What a `file_ref` part did to its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileAction {
    /// Read it.
    Read,
    /// Wrote it whole.
    Write,
    /// Changed part of it.
    Patch,
}

/// Whether reasoning text is shown to users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningVisibility {
    /// Shown.
    Public,
    /// Hidden (for example only a signature or a redacted block).
    Private,
}

/// One typed content part of an item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Structured JSON.
    Json {
        /// The value.
        json: Value,
    },
    /// A tool invocation.
    ToolCall {
        /// Tool name.
        name: String,
        /// JSON-encoded arguments.
        arguments: String,
        /// Call id.
        call_id: String,
    },
    /// A tool's output.
    ToolResult {
        /// The call it answers.
        call_id: String,
        /// The output.
        output: String,
    },
    /// A file the agent touched.
    FileRef {
        /// File path.
        path: String,
        /// What was done.
        action: FileAction,
        /// Unified diff, when known.
        diff: Option<String>,
    },
    /// Reasoning or thinking.
    Reasoning {
        /// The reasoning text.
        text: String,
        /// Who may see it.
        visibility: ReasoningVisibility,
    },
    /// An image.
    Image {
        /// Image path.
        path: String,
        /// MIME type.
        mime: Option<String>,
    },
    /// A status indicator.
    Status {
        /// Short label.
        label: String,
        /// More detail.
        detail: Option<String>,
    },
}
