//! What a backend hands the [`Transcript`](super::Transcript): new items, how a session ended,
//! memory limits.

use crate::vocabulary::universal::{
    ContentPart, ItemKind, ItemRole, ReasoningVisibility, ToolMeta,
};
use crate::vocabulary::universal::{SessionEndReason, StderrOutput, TerminatedBy};

/// Memory limits of a transcript.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct TranscriptLimits {
    /// Most bytes of streamed text assembled per item; beyond it the final content is cut
    /// (the deltas themselves are all forwarded).
    pub max_item_text: usize,
}

impl Default for TranscriptLimits {
    fn default() -> Self {
        Self {
            max_item_text: 8 * 1024 * 1024,
        }
    }
}

/// How a session ended, for [`Transcript::end`](super::Transcript::end).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SessionEnd {
    /// Why it ended.
    pub reason: SessionEndReason,
    /// Who ended it.
    pub terminated_by: TerminatedBy,
    /// The error message, for `reason = error`.
    pub message: Option<String>,
    /// Exit code of the process, when there was one.
    pub exit_code: Option<i32>,
    /// Head and tail of stderr, for `reason = error`.
    pub stderr: Option<StderrOutput>,
}

impl SessionEnd {
    /// A normal end by the agent.
    pub fn completed() -> Self {
        Self {
            reason: SessionEndReason::Completed,
            terminated_by: TerminatedBy::Agent,
            message: None,
            exit_code: None,
            stderr: None,
        }
    }
}

/// A new item, for [`Transcript::start_item`](super::Transcript::start_item).
///
/// ```
/// use agent_api::universal::ItemRole;
/// use agent_api::kit::transcript::NewItem;
/// let item = NewItem::message(ItemRole::Assistant).native("msg_1");
/// assert_eq!(item.native_item_id.as_deref(), Some("msg_1"));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NewItem {
    /// Item category.
    pub kind: ItemKind,
    /// Role, for messages.
    pub role: Option<ItemRole>,
    /// The provider's item id.
    pub native_item_id: Option<String>,
    /// The parent item (daemon id).
    pub parent_id: Option<String>,
    /// Initial content.
    pub content: Vec<ContentPart>,
    /// Tool metadata, for tool items.
    pub tool: Option<ToolMeta>,
    /// Whether the daemon made the item up (stub or synthesized message).
    pub synthetic: bool,
}

impl NewItem {
    fn new(kind: ItemKind, role: Option<ItemRole>, content: Vec<ContentPart>) -> Self {
        Self {
            kind,
            role,
            native_item_id: None,
            parent_id: None,
            content,
            tool: None,
            synthetic: false,
        }
    }

    /// A message whose text will stream in as deltas.
    pub fn message(role: ItemRole) -> Self {
        Self::new(ItemKind::Message, Some(role), Vec::new())
    }

    /// An assistant message carrying reasoning; deltas are reasoning text.
    pub fn reasoning(visibility: ReasoningVisibility) -> Self {
        Self::new(
            ItemKind::Message,
            Some(ItemRole::Assistant),
            vec![ContentPart::Reasoning {
                text: String::new(),
                visibility,
            }],
        )
    }

    /// A tool call; when argument deltas stream, `arguments` becomes exactly their text.
    pub fn tool_call(
        name: impl Into<String>,
        arguments: impl Into<String>,
        call_id: impl Into<String>,
    ) -> Self {
        let part = ContentPart::ToolCall {
            name: name.into(),
            arguments: arguments.into(),
            call_id: call_id.into(),
        };
        Self::new(ItemKind::ToolCall, Some(ItemRole::Assistant), vec![part])
    }

    /// A tool result; when output deltas stream, `output` becomes exactly their text.
    pub fn tool_result(call_id: impl Into<String>) -> Self {
        let part = ContentPart::ToolResult {
            call_id: call_id.into(),
            output: String::new(),
        };
        Self::new(ItemKind::ToolResult, Some(ItemRole::Tool), vec![part])
    }

    /// A status item.
    pub fn status(label: impl Into<String>, detail: Option<String>) -> Self {
        Self::new(
            ItemKind::Status,
            None,
            vec![ContentPart::Status {
                label: label.into(),
                detail,
            }],
        )
    }

    /// An item of another kind with the given content.
    pub fn other(kind: ItemKind, role: Option<ItemRole>, content: Vec<ContentPart>) -> Self {
        Self::new(kind, role, content)
    }

    /// Sets the provider's item id.
    pub fn native(mut self, id: impl Into<String>) -> Self {
        self.native_item_id = Some(id.into());
        self
    }

    /// Sets the parent item.
    pub fn parent(mut self, parent: Option<String>) -> Self {
        self.parent_id = parent;
        self
    }

    /// Sets the tool metadata.
    pub fn tool(mut self, meta: ToolMeta) -> Self {
        self.tool = Some(meta);
        self
    }

    /// Adds a content part.
    pub fn with_part(mut self, part: ContentPart) -> Self {
        self.content.push(part);
        self
    }

    /// Marks the item as made up by the daemon.
    pub fn synthetic(mut self) -> Self {
        self.synthetic = true;
        self
    }
}
