//! [`RunSummary`]: what a finished run did, for callers who do not stream.
//!
//! Built from the universal events of one run (or one session turn): the final text and usage,
//! every tool call joined with its result (name, command or path, exit code, status, output size),
//! every permission asked and how it was decided, and the files changed.
//!
//! ```
//! use agent_api::universal::DecidedBy;
//! use agent_api::kit::transcript::{NewItem, Transcript};
//! use agent_api::run::RunSummary;
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

use crate::tool_calls::ToolCalls;
use crate::vocabulary::run::{RunCompletion, Usage};
use crate::vocabulary::tools_facet::ToolCategory;
use crate::vocabulary::universal::{
    ContentPart, DecidedBy, FileAction, PermissionStatus, UniversalEvent,
    UniversalEventBody as Body, UniversalItem,
};

use crate::tool_calls::ToolCallSummary;

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
        let mut calls = ToolCalls::new();
        for event in events {
            calls.push_universal(event);
            match &event.body {
                Body::ItemCompleted(data) => summary.files(&data.item),
                Body::PermissionRequested(p) => summary.permissions.push(PermissionSummary {
                    id: p.permission_id.clone(),
                    action: p.action.clone(),
                    status: p.status,
                    decided_by: None,
                    category: p.category,
                    call_id: p.details.call_id.clone(),
                }),
                Body::PermissionResolved(p) => {
                    if let Some(asked) = summary
                        .permissions
                        .iter_mut()
                        .rev()
                        .find(|s| s.id == p.permission_id)
                    {
                        asked.status = p.status;
                        asked.decided_by = p.decided_by;
                    }
                }
                Body::Error(e) => summary.errors.push(e.message.clone()),
                _ => {}
            }
        }
        summary.tool_calls = calls.into_calls();
        if summary.native_session_id.is_none() {
            summary.native_session_id = events
                .iter()
                .rev()
                .find_map(|e| e.native_session_id.as_deref().map(str::to_string));
        }
        summary
    }

    fn files(&mut self, item: &UniversalItem) {
        for part in &item.content {
            if let ContentPart::FileRef {
                path,
                action: action @ (FileAction::Write | FileAction::Patch),
                ..
            } = part
            {
                self.files_changed.push((path.clone(), *action));
            }
        }
    }
}

impl crate::contract::handle::RunHandle {
    /// Reads the whole run and sums it up (see [`RunSummary`]): for callers who do not stream.
    pub async fn collect_summary(
        self,
    ) -> (
        RunSummary,
        Result<RunCompletion, crate::vocabulary::error::AgentError>,
    ) {
        let (events, completion) = self.collect_universal().await;
        (
            RunSummary::from_events(&events, completion.as_ref().ok()),
            completion,
        )
    }
}
