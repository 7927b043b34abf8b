//! [`UniversalEvent`] and the data of each event type.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::inline::{DeltaText, EventId};
use super::item::UniversalItem;
use crate::vocabulary::tools_facet::ToolCategory;

/// One event of the universal transcript.
///
/// Its JSON form is the seed envelope: `type` and `data` come from [`UniversalEventBody`], and
/// `raw` is always present (`null` unless the run opted in to raw payloads).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UniversalEvent {
    /// Unique id (`evt_…`).
    pub event_id: EventId,
    /// Position in the session, from 1, with no gaps.
    pub sequence: u64,
    /// RFC 3339 UTC time, shared by the events emitted together.
    pub time: Arc<str>,
    /// Daemon-generated session id, shared by every event of the session.
    pub session_id: Arc<str>,
    /// The provider's session or thread id, once known, shared like `session_id`.
    pub native_session_id: Option<Arc<str>>,
    /// Whether the daemon made this event up to fill a gap (mirrors `source`).
    pub synthetic: bool,
    /// Who produced it.
    pub source: EventSource,
    /// The event type and its data.
    #[serde(flatten)]
    pub body: UniversalEventBody,
    /// The native payload, when the run opted in (`include_raw`). Every event made from one
    /// native line shares that line's payload.
    #[serde(default)]
    pub raw: Option<Arc<Value>>,
}

impl UniversalEvent {
    /// The event type as its dotted name (`item.delta`, …).
    pub fn type_name(&self) -> &'static str {
        self.body.type_name()
    }

    /// The item of an `item.started` or `item.completed` event.
    pub fn item(&self) -> Option<&UniversalItem> {
        match &self.body {
            UniversalEventBody::ItemStarted(d) | UniversalEventBody::ItemCompleted(d) => {
                Some(&d.item)
            }
            _ => None,
        }
    }

    /// The item of an `item.completed` event: the item in its final state.
    pub fn completed_item(&self) -> Option<&UniversalItem> {
        match &self.body {
            UniversalEventBody::ItemCompleted(d) => Some(&d.item),
            _ => None,
        }
    }

    /// The fragment of an `item.delta` event.
    pub fn delta(&self) -> Option<&ItemDeltaData> {
        match &self.body {
            UniversalEventBody::ItemDelta(d) => Some(d),
            _ => None,
        }
    }

    /// The request of a `permission.requested` or `permission.resolved` event.
    ///
    /// ```
    /// # use agent_api::kit::transcript::Transcript;
    /// # use agent_api::UniversalEvent;
    /// let mut t = Transcript::new("sess_1".into(), false);
    /// t.permission_requested("perm_1", "Bash: ls", None);
    /// let events: Vec<UniversalEvent> = t.drain().collect();
    /// let asked = events.iter().find_map(UniversalEvent::permission_request).unwrap();
    /// assert_eq!(asked.permission_id, "perm_1");
    /// ```
    pub fn permission(&self) -> Option<&PermissionEventData> {
        match &self.body {
            UniversalEventBody::PermissionRequested(p)
            | UniversalEventBody::PermissionResolved(p) => Some(p),
            _ => None,
        }
    }

    /// The request of a `permission.requested` event: one waiting for a decision.
    pub fn permission_request(&self) -> Option<&PermissionEventData> {
        match &self.body {
            UniversalEventBody::PermissionRequested(p) => Some(p),
            _ => None,
        }
    }

    /// The question of a `question.requested` or `question.resolved` event.
    pub fn question(&self) -> Option<&QuestionEventData> {
        match &self.body {
            UniversalEventBody::QuestionRequested(q) | UniversalEventBody::QuestionResolved(q) => {
                Some(q)
            }
            _ => None,
        }
    }

    /// The question of a `question.requested` event: one waiting for an answer.
    pub fn question_request(&self) -> Option<&QuestionEventData> {
        match &self.body {
            UniversalEventBody::QuestionRequested(q) => Some(q),
            _ => None,
        }
    }

    /// The data of an `error` event.
    pub fn error(&self) -> Option<&ErrorData> {
        match &self.body {
            UniversalEventBody::Error(e) => Some(e),
            _ => None,
        }
    }

    /// Whether this is the run's one terminal error.
    pub fn is_terminal_error(&self) -> bool {
        self.error().is_some_and(ErrorData::is_terminal)
    }

    /// The data of `session.ended`.
    pub fn session_ended(&self) -> Option<&SessionEndedData> {
        match &self.body {
            UniversalEventBody::SessionEnded(d) => Some(d),
            _ => None,
        }
    }

    /// Who resolved the permission request or question, for `permission.resolved` and
    /// `question.resolved`; `None` for every other event.
    pub fn decided_by(&self) -> Option<DecidedBy> {
        match &self.body {
            UniversalEventBody::PermissionResolved(p) => p.decided_by,
            UniversalEventBody::QuestionResolved(q) => q.decided_by,
            _ => None,
        }
    }
}

/// Who produced an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventSource {
    /// The agent (a native event).
    Agent,
    /// The daemon (a synthetic event).
    Daemon,
}

/// An event's type with its data.
///
/// The data of the rarer events is boxed, so that an event stays small to build, move and batch
/// (most events of a run are item deltas and item lifecycles); it serializes the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
#[non_exhaustive]
pub enum UniversalEventBody {
    /// The session started.
    #[serde(rename = "session.started")]
    SessionStarted(SessionStartedData),
    /// The session ended.
    #[serde(rename = "session.ended")]
    SessionEnded(Box<SessionEndedData>),
    /// An item was created.
    #[serde(rename = "item.started")]
    ItemStarted(ItemEventData),
    /// Streamed content for an item.
    #[serde(rename = "item.delta")]
    ItemDelta(ItemDeltaData),
    /// An item was finalized.
    #[serde(rename = "item.completed")]
    ItemCompleted(ItemEventData),
    /// A runtime error.
    #[serde(rename = "error")]
    Error(Box<ErrorData>),
    /// The agent asks for permission.
    #[serde(rename = "permission.requested")]
    PermissionRequested(Box<PermissionEventData>),
    /// A permission request was decided.
    #[serde(rename = "permission.resolved")]
    PermissionResolved(Box<PermissionEventData>),
    /// The agent asks a question.
    #[serde(rename = "question.requested")]
    QuestionRequested(Box<QuestionEventData>),
    /// A question was answered or rejected.
    #[serde(rename = "question.resolved")]
    QuestionResolved(Box<QuestionEventData>),
    /// A native payload could not be parsed.
    #[serde(rename = "agent.unparsed")]
    AgentUnparsed(Box<AgentUnparsedData>),
}

impl UniversalEventBody {
    /// The dotted type name.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::SessionStarted(_) => "session.started",
            Self::SessionEnded(_) => "session.ended",
            Self::ItemStarted(_) => "item.started",
            Self::ItemDelta(_) => "item.delta",
            Self::ItemCompleted(_) => "item.completed",
            Self::Error(_) => "error",
            Self::PermissionRequested(_) => "permission.requested",
            Self::PermissionResolved(_) => "permission.resolved",
            Self::QuestionRequested(_) => "question.requested",
            Self::QuestionResolved(_) => "question.resolved",
            Self::AgentUnparsed(_) => "agent.unparsed",
        }
    }
}

/// Data of `session.started`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionStartedData {
    /// What the agent said about the session (model, tools, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionEndReason {
    /// It finished normally.
    Completed,
    /// It failed.
    Error,
    /// It was stopped (cancel, timeout).
    Terminated,
}

/// Who ended a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminatedBy {
    /// The agent ended it.
    Agent,
    /// The daemon ended it (cancel, timeout, drop).
    Daemon,
}

/// Data of `session.ended`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEndedData {
    /// Why it ended.
    pub reason: SessionEndReason,
    /// Who ended it.
    pub terminated_by: TerminatedBy,
    /// The error message, when `reason` is `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The process exit code, when `reason` is `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The head and tail of stderr, when `reason` is `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<StderrOutput>,
}

/// The bounded head and tail of a process's stderr.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StderrOutput {
    /// The first 20 lines, or all of them when not truncated.
    pub head: Option<String>,
    /// The last 50 lines, only when truncated.
    pub tail: Option<String>,
    /// Whether lines were left out between head and tail.
    pub truncated: bool,
    /// Total number of lines.
    pub total_lines: Option<u64>,
}

/// Data of `item.started` and `item.completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemEventData {
    /// The item as it is now. Shared: the transcript hands `item.started` the open item itself
    /// (no copy), and the wrapper view keeps a tool item without copying it either.
    pub item: Arc<UniversalItem>,
}

/// Data of `item.delta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemDeltaData {
    /// The item the delta belongs to (shared by every delta of the item).
    pub item_id: Arc<str>,
    /// The provider's id of that item (shared by every delta of the item).
    pub native_item_id: Option<Arc<str>>,
    /// The text fragment.
    pub delta: DeltaText,
}

/// Data of `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorData {
    /// Bounded, safe message.
    pub message: String,
    /// Typed code (an [`crate::AgentError::code`] for terminal errors).
    #[serde(default)]
    pub code: Option<String>,
    /// Structured details; `{"terminal": true}` marks the run's one terminal error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ErrorData {
    /// Whether this is the run's terminal error.
    pub fn is_terminal(&self) -> bool {
        self.details
            .as_ref()
            .and_then(|d| d.get("terminal"))
            .and_then(Value::as_bool)
            == Some(true)
    }
}

/// Status of a permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionStatus {
    /// Waiting for a decision.
    Requested,
    /// Allowed.
    Approved,
    /// Refused.
    Denied,
}

/// What a permission request concerns, in typed fields: each is absent where the agent does not say.
///
/// ```
/// use agent_api::universal::PermissionDetails;
/// let details = PermissionDetails::default().call_id(Some("toolu_1")).command(Some("ls -la"));
/// assert_eq!(details.call_id.as_deref(), Some("toolu_1"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PermissionDetails {
    /// The id of the tool call the request is for, as the tool call item's `call_id` has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The shell command line that would run: the same string as the tool call's `ToolMeta::command`
    /// (never a description of it), so an allow-list can match on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The whole command's length in UTF-8 bytes, present only when [`Self::command`] holds a
    /// prefix of it (a command over [`COMMAND_BOUND`](super::COMMAND_BOUND)): whoever shows the
    /// request says that it is cut and by how much, since approving it runs all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_bytes: Option<u64>,
    /// The directory it would run in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The file or directory it would read or change (several files of one change: their paths
    /// joined with `, `).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// What a file change would do, as the agent shows it (a unified diff, or the old lines with
    /// `-` and the new with `+`), cut to [`PERMISSION_DIFF_BOUND`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Why the agent asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The most of a file change's diff a permission request carries (16 KiB): enough to judge an
/// edit, bounded whatever the agent sends.
pub const PERMISSION_DIFF_BOUND: usize = 16 * 1024;

/// An edit shown as a diff: each line of `old` with `-`, then each line of `new` with `+` (a file
/// written whole has no `old`).
///
/// ```
/// assert_eq!(agent_api::kit::transcript::replacement_diff(Some("a\nb"), "a\nc\n"), "-a\n-b\n+a\n+c\n");
/// ```
pub fn replacement_diff(old: Option<&str>, new: &str) -> String {
    let mut diff = String::with_capacity(old.map_or(0, str::len) + new.len() + 16);
    for (mark, text) in old
        .map(|old| ('-', old))
        .into_iter()
        .chain(std::iter::once(('+', new)))
    {
        for line in text.lines() {
            diff.push(mark);
            diff.push_str(line);
            diff.push('\n');
        }
    }
    diff
}

impl PermissionDetails {
    /// Sets the id of the tool call the request is for, when known.
    pub fn call_id(mut self, call_id: Option<impl Into<String>>) -> Self {
        self.call_id = call_id.map(Into::into);
        self
    }

    /// Sets the shell command, when known: the whole command, cut to
    /// [`COMMAND_BOUND`](super::COMMAND_BOUND) as the tool call's `ToolMeta::command` is (the
    /// transcript masks its secrets, as it masks the tools facet's), with its real length in
    /// [`Self::command_bytes`] when cut. Give it the command whole: a prefix cut before would be
    /// shown as if it were all that runs.
    ///
    /// ```
    /// use agent_api::universal::{PermissionDetails, COMMAND_BOUND};
    /// let long = format!("echo {}", "x".repeat(COMMAND_BOUND));
    /// let details = PermissionDetails::default().command(Some(long.clone()));
    /// assert_eq!(details.command_bytes, Some(long.len() as u64));
    /// assert!(long.starts_with(details.command.as_deref().unwrap()));
    /// assert_eq!(PermissionDetails::default().command(Some("ls")).command_bytes, None);
    /// ```
    pub fn command(mut self, command: Option<impl Into<String>>) -> Self {
        let command = command.map(Into::into);
        let whole = command.as_ref().map_or(0, String::len);
        self.command = command.map(super::shell::bounded_command);
        self.command_bytes = self
            .command
            .as_ref()
            .filter(|kept| kept.len() < whole)
            .map(|_| whole as u64);
        self
    }

    /// Sets the working directory, when known, cut to [`SHELL_FIELD_BOUND`](super::SHELL_FIELD_BOUND).
    pub fn cwd(mut self, cwd: Option<impl Into<String>>) -> Self {
        self.cwd = cwd.map(|c| super::shell::bounded_field(c.into()));
        self
    }

    /// Sets the file, when known, cut as [`Self::cwd`] is.
    pub fn file(mut self, file: Option<impl Into<String>>) -> Self {
        self.file = file.map(|f| super::shell::bounded_field(f.into()));
        self
    }

    /// Sets what a file change would do, cut to [`PERMISSION_DIFF_BOUND`] bytes (with the
    /// truncation suffix when cut).
    pub fn diff(mut self, diff: Option<impl Into<String>>) -> Self {
        self.diff = diff
            .map(|d| crate::guards::bounds::truncate_message(&d.into(), PERMISSION_DIFF_BOUND))
            .filter(|d| !d.is_empty());
        self
    }

    /// Sets the files of a change and their diffs together: `file` holds the paths joined with
    /// `, `, `diff` each file's diff under a `--- PATH` line.
    ///
    /// ```
    /// use agent_api::universal::PermissionDetails;
    /// let details = PermissionDetails::default().changes([("a.txt", Some("+hi\n")), ("b.txt", None)]);
    /// assert_eq!(details.file.as_deref(), Some("a.txt, b.txt"));
    /// assert_eq!(details.diff.as_deref(), Some("--- a.txt\n+hi\n"));
    /// ```
    pub fn changes<'a>(
        self,
        changes: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Self {
        let (mut paths, mut diff) = (Vec::new(), String::new());
        for (path, change) in changes {
            paths.push(path);
            if let Some(change) = change.filter(|c| !c.is_empty()) {
                diff.push_str("--- ");
                diff.push_str(path);
                diff.push('\n');
                diff.push_str(change);
                if !change.ends_with('\n') {
                    diff.push('\n');
                }
            }
        }
        let file = (!paths.is_empty()).then(|| paths.join(", "));
        self.file(file).diff(Some(diff))
    }

    /// Sets the agent's reason, when known.
    pub fn reason(mut self, reason: Option<impl Into<String>>) -> Self {
        self.reason = reason.map(|r| super::shell::bounded_field(r.into()));
        self
    }
}

/// Data of `permission.requested` and `permission.resolved`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PermissionEventData {
    /// The id to answer with `RunControl::respond_permission`.
    pub permission_id: String,
    /// What the agent wants to do (tool name and a safe summary).
    pub action: String,
    /// Where the request stands.
    pub status: PermissionStatus,
    /// The category a permission policy decides it by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<ToolCategory>,
    /// The agent's name for the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The tool call, command, directory and file it concerns (flattened into `data`).
    #[serde(flatten)]
    pub details: PermissionDetails,
    /// The backend's further context, such as the tool input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Who decided, on `permission.resolved` (absent while requested).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
}

impl PermissionEventData {
    /// A request waiting for a decision, with no category, tool, details or metadata yet.
    pub fn requested(permission_id: impl Into<String>, action: impl Into<String>) -> Self {
        Self {
            permission_id: permission_id.into(),
            action: action.into(),
            status: PermissionStatus::Requested,
            category: None,
            tool_name: None,
            details: PermissionDetails::default(),
            metadata: None,
            decided_by: None,
        }
    }
}

/// Status of a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionStatus {
    /// Waiting for an answer.
    Requested,
    /// Answered.
    Answered,
    /// Rejected or left unanswered.
    Rejected,
}

/// Data of `question.requested` and `question.resolved`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QuestionEventData {
    /// The id to answer with `RunControl::answer_question`.
    pub question_id: String,
    /// The question.
    pub prompt: String,
    /// The offered answers (may be empty for free-form questions).
    pub options: Vec<String>,
    /// The answer, once resolved.
    #[serde(default)]
    pub response: Option<String>,
    /// Where the question stands.
    pub status: QuestionStatus,
    /// The id of the tool call that asks it, where the agent asks through a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// Who decided, on `question.resolved` (absent while requested).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
}

impl QuestionEventData {
    /// A question waiting for an answer.
    pub fn requested(
        question_id: impl Into<String>,
        prompt: impl Into<String>,
        options: Vec<String>,
    ) -> Self {
        Self {
            question_id: question_id.into(),
            prompt: prompt.into(),
            options,
            response: None,
            status: QuestionStatus::Requested,
            call_id: None,
            decided_by: None,
        }
    }
}

/// Who resolved a permission request or a question (`decided_by` on the resolved event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DecidedBy {
    /// The caller, through `RunControl` (or, in a replay, the recorded client).
    Caller,
    /// The run's `PermissionPolicy`, without asking anyone.
    Policy,
    /// The run's timeout ended the run while the request waited.
    Timeout,
    /// Nobody: the agent withdrew the request, or the run was cancelled or ended while it waited.
    Cancel,
}

impl DecidedBy {
    /// The name used in the JSON form (`caller`, `policy`, `timeout`, `cancel`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Caller => "caller",
            Self::Policy => "policy",
            Self::Timeout => "timeout",
            Self::Cancel => "cancel",
        }
    }
}

impl std::fmt::Display for DecidedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Data of `agent.unparsed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentUnparsedData {
    /// Why parsing failed (never the line itself).
    pub error: String,
    /// The parser that failed.
    pub location: String,
    /// A hash of the unparsed bytes, to correlate with a raw capture.
    #[serde(default)]
    pub raw_hash: Option<String>,
}
