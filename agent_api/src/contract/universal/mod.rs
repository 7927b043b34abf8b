//! The universal session transcript (`spec/universal-schema.md`): gap-free [`UniversalEvent`]s
//! about [`UniversalItem`]s, the same shape for every agent.
//!
//! Backends never number or stamp events themselves: they describe what happened to a
//! [`Transcript`], which assigns ids, sequence numbers and times and applies the synthetic-event
//! rules (session start/end, stub item starts, the single synthetic delta, open items closed at
//! the end).

mod inline;
mod item;
mod shell;
mod transcript;
mod types;

pub use inline::{DeltaText, EventId};
pub use item::{
    ContentPart, FileAction, ItemKind, ItemRole, ItemStatus, ReasoningVisibility, ToolCallRef,
    ToolMeta, UniversalItem,
};
pub(crate) use shell::bounded_command;
pub use shell::{shell_fields, COMMAND_BOUND, SHELL_FIELD_BOUND};
pub(crate) use transcript::STREAM_START;
pub use transcript::{NewItem, SessionEnd, Transcript, TranscriptLimits, RETRY_STATUS};
pub use types::{
    replacement_diff, AgentUnparsedData, DecidedBy, ErrorData, EventSource, ItemDeltaData,
    ItemEventData, PermissionDetails, PermissionEventData, PermissionStatus, QuestionEventData,
    QuestionStatus, SessionEndReason, SessionEndedData, SessionStartedData, StderrOutput,
    TerminatedBy, UniversalEvent, UniversalEventBody, PERMISSION_DIFF_BOUND,
};
