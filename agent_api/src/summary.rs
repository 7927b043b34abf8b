//! [`RunSummary`]: what a finished run did, for callers who do not stream.
//!
//! Built from the universal events of one run (or one session turn): the final text and usage,
//! every tool call joined with its result (name, command or path, exit code, status, output size),
//! every permission asked and how it was decided, and the files changed.
//!
//! ```
//! use agent_api::universal::{DecidedBy, NewItem, Transcript};
//! use agent_api::RunSummary;
//! let mut t = Transcript::new("sess_1".into(), false);
//! let call = t.start_item(NewItem::tool_call("Bash", r#"{"command":"ls -la"}"#, "call_1"));
//! t.permission_requested("perm_1", "Bash: ls -la", None);
//! t.permission_resolved("perm_1", true, DecidedBy::Policy).unwrap();
//! t.complete_item(&call);
//! let events: Vec<_> = t.drain().collect();
//! let summary = RunSummary::from_events(&events, None);
//! assert_eq!(summary.tool_calls[0].command.as_deref(), Some("ls -la"));
//! assert_eq!(summary.permissions[0].decided_by, Some(DecidedBy::Policy));
//! ```

use crate::request::ToolCategory;
use crate::run::{RunCompletion, Usage};
use crate::tools_facet::ToolStatus;
use crate::universal::{
    shell_fields, ContentPart, DecidedBy, FileAction, ItemKind, ItemStatus, PermissionStatus, UniversalEvent, UniversalEventBody as Body,
    UniversalItem,
};

/// One tool call of a run, joined with its result.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolCallSummary {
    /// The id linking the call to its result.
    pub call_id: String,
    /// The tool's name as the agent calls it (`Bash`, `command_execution`, …).
    pub name: String,
    /// The tools-facet kind (`command_execution`, `file_change`, …), when the backend knows it.
    pub kind: Option<String>,
    /// The shell command, for tools that run one.
    pub command: Option<String>,
    /// The directory the command ran in, when the agent named one.
    pub cwd: Option<String>,
    /// The file or directory the tool acts on, for tools that name one.
    pub path: Option<String>,
    /// The command's exit code, when known.
    pub exit_code: Option<i64>,
    /// How the call ended: completed, failed, or still running when the run ended.
    pub status: ToolStatus,
    /// Bytes of the tool's output.
    pub output_bytes: u64,
}

/// One permission request and its decision.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PermissionSummary {
    /// The request's id.
    pub id: String,
    /// What the agent wanted to do.
    pub action: String,
    /// The decision (or `Requested` if none came).
    pub status: PermissionStatus,
    /// Who decided.
    pub decided_by: Option<DecidedBy>,
    /// The category a policy decides it by.
    pub category: Option<ToolCategory>,
    /// The id of the tool call it was for, as in [`ToolCallSummary::call_id`].
    pub call_id: Option<String>,
}

/// What one finished run did.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RunSummary {
    /// The final answer text.
    pub final_text: Option<String>,
    /// Token usage, where the agent reports it.
    pub usage: Option<Usage>,
    /// The provider's session id, to resume with.
    pub native_session_id: Option<String>,
    /// Every tool call, in the order they started.
    pub tool_calls: Vec<ToolCallSummary>,
    /// Every permission request, in the order they were asked.
    pub permissions: Vec<PermissionSummary>,
    /// Every file the agent wrote or changed, with what was done, in order (a path may repeat).
    pub files_changed: Vec<(String, FileAction)>,
    /// Messages of the errors the agent reported and survived, and of the terminal error.
    pub errors: Vec<String>,
}

impl RunSummary {
    /// Summarizes a run's universal events and, when it succeeded, its completion.
    pub fn from_events(events: &[UniversalEvent], completion: Option<&RunCompletion>) -> Self {
        let mut summary = RunSummary {
            final_text: completion.and_then(|c| c.final_text.clone()),
            usage: completion.and_then(|c| c.usage.clone()),
            native_session_id: completion.and_then(|c| c.native_session_id.clone()),
            ..Self::default()
        };
        for event in events {
            match &event.body {
                Body::ItemCompleted(data) => summary.item(&data.item),
                Body::PermissionRequested(p) => summary.permissions.push(PermissionSummary {
                    id: p.permission_id.clone(),
                    action: p.action.clone(),
                    status: p.status,
                    decided_by: None,
                    category: p.category,
                    call_id: p.details.call_id.clone(),
                }),
                Body::PermissionResolved(p) => {
                    if let Some(asked) = summary.permissions.iter_mut().rev().find(|s| s.id == p.permission_id) {
                        asked.status = p.status;
                        asked.decided_by = p.decided_by;
                    }
                }
                Body::Error(e) => summary.errors.push(e.message.clone()),
                _ => {}
            }
        }
        if summary.native_session_id.is_none() {
            summary.native_session_id = events.iter().rev().find_map(|e| e.native_session_id.as_deref().map(str::to_string));
        }
        summary
    }

    fn item(&mut self, item: &UniversalItem) {
        for part in &item.content {
            if let ContentPart::FileRef { path, action: action @ (FileAction::Write | FileAction::Patch), .. } = part {
                self.files_changed.push((path.clone(), *action));
            }
        }
        match item.kind {
            ItemKind::ToolCall => {
                let Some(call) = item.tool_call() else { return };
                let arguments = call.arguments_json();
                let path = ["file_path", "path", "notebook_path"].iter().find_map(|k| arguments.as_ref()?.get(*k)?.as_str());
                let meta = item.tool.as_ref();
                // Backends put the command on the item; parsing the arguments covers older recordings.
                let command = meta.and_then(|m| m.command.clone()).or_else(|| shell_fields(arguments.as_ref()?).0);
                self.tool_calls.push(ToolCallSummary {
                    call_id: call.call_id.to_string(),
                    name: meta.and_then(|m| m.tool_name.clone()).unwrap_or_else(|| call.name.to_string()),
                    kind: meta.map(|m| m.kind.clone()).filter(|k| !k.is_empty()),
                    command,
                    cwd: meta.and_then(|m| m.cwd.clone()),
                    path: path.map(str::to_string),
                    exit_code: meta.and_then(|m| m.exit_code),
                    status: status_of(item.status),
                    output_bytes: meta.map_or(0, |m| m.bytes.stdout + m.bytes.result),
                });
            }
            ItemKind::ToolResult => {
                let Some(call_id) = item.content.iter().find_map(|p| match p {
                    ContentPart::ToolResult { call_id, .. } => Some(call_id.as_str()),
                    _ => None,
                }) else {
                    return;
                };
                let Some(call) = self.tool_calls.iter_mut().rev().find(|c| c.call_id == call_id) else { return };
                let meta = item.tool.as_ref();
                call.status = status_of(item.status);
                call.exit_code = meta.and_then(|m| m.exit_code).or(call.exit_code);
                let bytes = meta.map_or(0, |m| m.bytes.stdout + m.bytes.result);
                call.output_bytes = bytes.max(item.tool_output().map_or(0, |o| o.len() as u64));
            }
            _ => {}
        }
    }
}

fn status_of(status: ItemStatus) -> ToolStatus {
    match status {
        ItemStatus::Completed => ToolStatus::Completed,
        ItemStatus::Failed => ToolStatus::Failed,
        ItemStatus::InProgress => ToolStatus::Running,
    }
}
