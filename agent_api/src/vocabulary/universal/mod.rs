//! The universal session transcript's types (`spec/universal-schema.md`): gap-free
//! [`UniversalEvent`]s about [`UniversalItem`]s, the same shape for every agent.
//!
//! Backends never number or stamp events themselves: they describe what happened to the
//! pipeline's [`Transcript`](crate::pipeline::transcript::Transcript), which assigns ids,
//! sequence numbers and times and applies the synthetic-event rules.

mod inline;
mod item;
mod shell;
mod types;

pub use inline::{DeltaText, EventId};
pub use item::{
    ContentPart, FileAction, ItemKind, ItemRole, ItemStatus, ReasoningVisibility, ToolCallRef,
    ToolMeta, UniversalItem,
};
pub(crate) use shell::bounded_command;
pub use shell::{shell_fields, COMMAND_BOUND, SHELL_FIELD_BOUND};
pub use types::{
    replacement_diff, AgentUnparsedData, DecidedBy, ErrorData, EventSource, ItemDeltaData,
    ItemEventData, PermissionDetails, PermissionEventData, PermissionStatus, QuestionEventData,
    QuestionStatus, SessionEndReason, SessionEndedData, SessionStartedData, StderrOutput,
    TerminatedBy, UniversalEvent, UniversalEventBody, PERMISSION_DIFF_BOUND,
};
