//! [`ToolCalls`]: one joined view of each tool call, whose call, output and result arrive as two
//! to four events (a start, deltas, a completion, a separate result), in either stream.
//!
//! ```
//! use agent_api::run::ToolCalls;
//! use agent_api::run::ToolStatus;
//! use agent_api::kit::transcript::{NewItem, Transcript};
//! use agent_api::universal::ToolMeta;
//! use serde_json::json;
//! let mut t = Transcript::new("sess_1".into(), false);
//! let meta = ToolMeta { kind: "command_execution".into(), ..ToolMeta::default() }.with_shell_fields(&json!({"command": "ls"}));
//! let call = t.start_item(NewItem::tool_call("Bash", r#"{"command":"ls"}"#, "call_1").tool(meta));
//! t.complete_item(&call);
//! let mut calls = ToolCalls::new();
//! for event in t.drain() {
//!     calls.push_universal(&event);
//! }
//! let ls = calls.get("call_1").unwrap();
//! assert_eq!((ls.command.as_deref(), ls.status), (Some("ls"), ToolStatus::Running));
//! ```

use std::collections::HashMap;

use crate::vocabulary::event::{AgentWrapperEvent, AgentWrapperEventKind};
use crate::vocabulary::tools_facet::ToolCategory;
use crate::vocabulary::tools_facet::{ToolPhase, ToolStatus};
use crate::vocabulary::universal::{
    shell_fields, ContentPart, ItemKind, ItemStatus, UniversalEvent, UniversalEventBody as Body,
    UniversalItem,
};

/// One tool call, joined from every event about it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolCallSummary {
    /// The id linking the call to its result.
    pub call_id: String,
    /// The tool's name as the agent calls it (`Bash`, `exec_command`, …); empty until an event names it.
    pub name: String,
    /// The tools-facet kind (`command_execution`, `file_change`, …), when the backend knows it.
    pub kind: Option<String>,
    /// The category a permission policy decides the call by: from its permission request when it
    /// had one, else from its kind (`None` when neither says).
    pub category: Option<ToolCategory>,
    /// The shell command, for tools that run one.
    pub command: Option<String>,
    /// The directory the command ran in, when the agent named one.
    pub cwd: Option<String>,
    /// The file or directory the tool acts on, for tools that name one.
    pub path: Option<String>,
    /// The command's exit code, when known.
    pub exit_code: Option<i64>,
    /// `Running` until the result is seen; then `Completed` or `Failed`. A call still `Running`
    /// when its run ended never reported a result.
    pub status: ToolStatus,
    /// Bytes of the tool's output.
    pub output_bytes: u64,
}

impl ToolCallSummary {
    fn new(call_id: &str) -> Self {
        Self {
            call_id: call_id.to_string(),
            name: String::new(),
            kind: None,
            category: None,
            command: None,
            cwd: None,
            path: None,
            exit_code: None,
            status: ToolStatus::Running,
            output_bytes: 0,
        }
    }

    fn set_kind(&mut self, kind: &str) {
        if kind.is_empty() || kind == crate::vocabulary::tools_facet::FacetKind::ToolResult.as_str()
        {
            return;
        }
        self.kind = Some(kind.to_string());
        self.category = self.category.or_else(|| category_of(kind));
    }

    /// A result's status is final; a call's only says the call is known (or failed to start).
    fn set_status(&mut self, status: ToolStatus, from_result: bool) {
        let finished = matches!(self.status, ToolStatus::Completed | ToolStatus::Failed);
        if from_result || (!finished && status == ToolStatus::Failed) {
            self.status = status;
        }
    }
}

/// Tool calls folded from a stream of universal or wrapper events, in the order they were first
/// seen. Each event updates one entry; phases may come in any order or not at all (a result
/// without its call makes an entry named by the result alone).
#[derive(Debug, Clone, Default)]
pub struct ToolCalls {
    calls: Vec<ToolCallSummary>,
    by_id: HashMap<String, usize>,
}

impl ToolCalls {
    /// No calls yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call, in the order first seen.
    pub fn calls(&self) -> &[ToolCallSummary] {
        &self.calls
    }

    /// The call with this id.
    pub fn get(&self, call_id: &str) -> Option<&ToolCallSummary> {
        self.by_id.get(call_id).map(|&i| &self.calls[i])
    }

    /// The calls, in the order first seen.
    pub fn into_calls(self) -> Vec<ToolCallSummary> {
        self.calls
    }

    fn entry(&mut self, call_id: &str) -> &mut ToolCallSummary {
        let next = self.calls.len();
        let at = *self.by_id.entry(call_id.to_string()).or_insert(next);
        if at == next {
            self.calls.push(ToolCallSummary::new(call_id));
        }
        &mut self.calls[at]
    }

    /// Folds one universal event (tool items started or completed, and permission requests,
    /// which give a call its category); returns the call it updated.
    pub fn push_universal(&mut self, event: &UniversalEvent) -> Option<&ToolCallSummary> {
        match &event.body {
            Body::ItemStarted(data) | Body::ItemCompleted(data) => self.item(&data.item),
            Body::PermissionRequested(p) => {
                let (call_id, category) = (p.details.call_id.as_deref()?, p.category?);
                let call = self.entry(call_id);
                call.category = Some(category);
                Some(call)
            }
            _ => None,
        }
    }

    /// Folds one universal event as [`ToolCalls::push_universal`] does, and returns the call only
    /// when this event finished it (its result completed or failed): each call once, at its end.
    pub fn push_universal_finished(&mut self, event: &UniversalEvent) -> Option<&ToolCallSummary> {
        let before = self.status_before(event_call_id(event)?);
        self.push_universal(event)
            .filter(|call| newly_finished(before, call))
    }

    /// Folds one wrapper event as [`ToolCalls::push_wrapper`] does, and returns the call only when
    /// this event finished it: each call once, at its end.
    ///
    /// ```no_run
    /// # async fn show(handle: agent_api::RunHandle) {
    /// use futures::StreamExt;
    /// let (mut events, _completion) = handle.into_wrapper();
    /// let mut calls = agent_api::run::ToolCalls::new();
    /// while let Some(event) = events.next().await {
    ///     if let Some(call) = calls.push_wrapper_finished(&event) {
    ///         println!("ran {} `{}`: {}", call.name, call.command.as_deref().unwrap_or("-"), call.status);
    ///     }
    /// }
    /// # }
    /// ```
    pub fn push_wrapper_finished(&mut self, event: &AgentWrapperEvent) -> Option<&ToolCallSummary> {
        let before = self.status_before(event.tools_facet()?.tool_use_id.as_deref()?);
        self.push_wrapper(event)
            .filter(|call| newly_finished(before, call))
    }

    /// The status of call `call_id` before an event about it is folded (running when unknown).
    fn status_before(&self, call_id: &str) -> ToolStatus {
        self.get(call_id)
            .map_or(ToolStatus::Running, |call| call.status)
    }

    /// Folds one wrapper event carrying a tools facet (see `agent_api.tools.structured.v1`);
    /// returns the call it updated. Events without a facet or a `tool_use_id` change nothing.
    pub fn push_wrapper(&mut self, event: &AgentWrapperEvent) -> Option<&ToolCallSummary> {
        let facet = event.tools_facet()?;
        let call = self.entry(facet.tool_use_id.as_deref()?);
        call.set_kind(&facet.kind);
        if let Some(name) = facet.tool_name.as_deref().filter(|_| call.name.is_empty()) {
            call.name = name.to_string();
        }
        call.command = facet.command.clone().or(call.command.take());
        call.cwd = facet.cwd.clone().or(call.cwd.take());
        call.exit_code = facet.exit_code.or(call.exit_code);
        call.output_bytes = call
            .output_bytes
            .max(facet.bytes.stdout.saturating_add(facet.bytes.result));
        // A call's own event completes as soon as the call is known: only its result's end ends it.
        let result_ended = event.kind == AgentWrapperEventKind::ToolResult
            && matches!(facet.phase, ToolPhase::Complete | ToolPhase::Fail);
        call.set_status(facet.status, result_ended);
        Some(call)
    }

    fn item(&mut self, item: &UniversalItem) -> Option<&ToolCallSummary> {
        match item.kind {
            ItemKind::ToolCall => {
                let part = item.tool_call()?;
                let arguments = part.arguments_json();
                let call = self.entry(part.call_id);
                let meta = item.tool.as_ref();
                call.name = meta
                    .and_then(|m| m.tool_name.clone())
                    .unwrap_or_else(|| part.name.to_string());
                if let Some(meta) = meta {
                    call.set_kind(&meta.kind);
                }
                // Backends put the command on the item; parsing the arguments covers older recordings.
                let parsed = arguments.as_ref().map(shell_fields).unwrap_or_default();
                call.command = meta
                    .and_then(|m| m.command.clone())
                    .or(parsed.0.map(crate::vocabulary::universal::bounded_command))
                    .or(call.command.take());
                call.cwd = meta
                    .and_then(|m| m.cwd.clone())
                    .or(parsed.1)
                    .or(call.cwd.take());
                let path = ["file_path", "path", "notebook_path"]
                    .iter()
                    .find_map(|k| arguments.as_ref()?.get(*k)?.as_str());
                call.path = path.map(str::to_string).or(call.path.take());
                call.set_status(status_of(item.status), false);
                Some(call)
            }
            ItemKind::ToolResult => {
                let call_id = item.content.iter().find_map(|p| match p {
                    ContentPart::ToolResult { call_id, .. } => Some(call_id.as_str()),
                    _ => None,
                })?;
                let call = self.entry(call_id);
                let meta = item.tool.as_ref();
                if let Some(meta) = meta {
                    call.set_kind(&meta.kind);
                    if call.name.is_empty() {
                        call.name = meta.tool_name.clone().unwrap_or_default();
                    }
                    call.command = call.command.take().or_else(|| meta.command.clone());
                    call.cwd = call.cwd.take().or_else(|| meta.cwd.clone());
                    call.exit_code = meta.exit_code.or(call.exit_code);
                }
                // A started result is still running; only its completion ends the call.
                call.set_status(
                    status_of(item.status),
                    item.status != ItemStatus::InProgress,
                );
                let bytes = meta.map_or(0, |m| m.bytes.stdout + m.bytes.result);
                call.output_bytes = call
                    .output_bytes
                    .max(bytes)
                    .max(item.tool_output().map_or(0, |o| o.len() as u64));
                Some(call)
            }
            _ => None,
        }
    }
}

/// Whether `call`, `before` an event, was still running and the event ended it.
fn newly_finished(before: ToolStatus, call: &ToolCallSummary) -> bool {
    let ended = |status| matches!(status, ToolStatus::Completed | ToolStatus::Failed);
    !ended(before) && ended(call.status)
}

/// The call a universal event is about, when it is about one.
fn event_call_id(event: &UniversalEvent) -> Option<&str> {
    match &event.body {
        Body::ItemStarted(data) | Body::ItemCompleted(data) => {
            data.item.tool_call().map(|c| c.call_id).or_else(|| {
                data.item.content.iter().find_map(|p| match p {
                    ContentPart::ToolResult { call_id, .. } => Some(call_id.as_str()),
                    _ => None,
                })
            })
        }
        Body::PermissionRequested(p) => p.details.call_id.as_deref(),
        _ => None,
    }
}

fn status_of(status: ItemStatus) -> ToolStatus {
    match status {
        ItemStatus::Completed => ToolStatus::Completed,
        ItemStatus::Failed => ToolStatus::Failed,
        ItemStatus::InProgress => ToolStatus::Running,
    }
}

/// The policy category of a tools-facet kind, for kinds that name one.
fn category_of(kind: &str) -> Option<ToolCategory> {
    crate::vocabulary::tools_facet::FacetKind::parse(kind)
        .and_then(crate::vocabulary::tools_facet::FacetKind::category)
}
