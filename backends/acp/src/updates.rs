//! `session/update` notifications → the transcript.
//!
//! - `agent_message_chunk` / `agent_thought_chunk`: deltas of one assistant message or reasoning
//!   item, which stays open until another kind of update or the end of the turn;
//! - `tool_call` / `tool_call_update`: a `tool_call` item (complete as soon as it is known) and a
//!   `tool_result` item that completes or fails with the call's status, carrying the text content,
//!   `diff` content as `file_ref` parts, and the tools facet (kind, exit code where given, bytes);
//!   relative paths are made absolute against the session's directory; a call whose permission
//!   was refused fails at once ([`Updates::deny`]);
//! - `plan` → a `todo_list` status; `available_commands_update`, `current_mode_update`,
//!   `config_option_update`, `session_info_update`, `usage_update` → status items;
//! - `user_message_chunk` and everything the agent replays while a session loads → `history`
//!   status items, never new output;
//! - an update kind this client does not know → an `unknown_update` status naming the kind.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use agent_api::kit::bounds::utf8_prefix;
use agent_api::kit::transcript::{NewItem, Transcript};
use agent_api::run::{FacetKind, ToolBytes};
use agent_api::universal::{ContentPart, FileAction, ItemRole, ReasoningVisibility, ToolMeta};
use agent_client_protocol_schema::{
    ContentBlock, Plan, SessionUpdate, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolKind,
};
use serde_json::{json, Value};

/// Every `sessionUpdate` kind this client's schema knows; a line with another kind is a newer
/// protocol's update (a status), one with a known kind that does not parse is unparsed.
pub(crate) const KNOWN_UPDATES: &[&str] = &[
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
    "usage_update",
];

/// Longest detail copied from an update into a status item.
const DETAIL_BOUND: usize = 2048;
/// The longest title kept as a tool name.
const TOOL_NAME_BOUND: usize = 128;

/// The tools-facet kind of an ACP tool kind.
pub(crate) fn facet_kind(kind: ToolKind) -> FacetKind {
    match kind {
        ToolKind::Execute => FacetKind::CommandExecution,
        ToolKind::Edit | ToolKind::Delete | ToolKind::Move => FacetKind::FileChange,
        ToolKind::Read => FacetKind::FileRead,
        ToolKind::Search => FacetKind::Search,
        ToolKind::Fetch => FacetKind::WebFetch,
        ToolKind::Think => FacetKind::Think,
        _ => FacetKind::ToolUse,
    }
}

/// The ACP name of a tool kind (`execute`, `edit`, …).
pub(crate) fn kind_name(kind: ToolKind) -> String {
    match serde_json::to_value(kind) {
        Ok(Value::String(name)) => name,
        _ => "other".into(),
    }
}

/// The text of a content block (other blocks are described, not copied).
pub(crate) fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::ResourceLink(link) => format!("[resource {}]", utf8_prefix(&link.uri, 256)),
        ContentBlock::Image(_) => "[image]".into(),
        ContentBlock::Audio(_) => "[audio]".into(),
        _ => "[resource]".into(),
    }
}

/// One tool call as known so far (ACP sends its fields piecemeal).
#[derive(Debug, Clone, Default)]
struct CallState {
    title: String,
    kind: ToolKind,
    status: Option<ToolCallStatus>,
    content: Vec<ToolCallContent>,
    paths: Vec<String>,
    raw_input: Option<Value>,
    raw_output: Option<Value>,
    result_item: Option<String>,
}

impl CallState {
    fn merge(&mut self, update: &ToolCallUpdate) {
        let f = &update.fields;
        if let Some(title) = &f.title {
            self.title.clone_from(title);
        }
        if let Some(kind) = f.kind {
            self.kind = kind;
        }
        if f.status.is_some() {
            self.status = f.status;
        }
        if let Some(content) = &f.content {
            self.content.clone_from(content);
        }
        if let Some(locations) = &f.locations {
            self.paths = locations
                .iter()
                .map(|l| l.path.display().to_string())
                .collect();
        }
        if f.raw_input.is_some() {
            self.raw_input.clone_from(&f.raw_input);
        }
        if f.raw_output.is_some() {
            self.raw_output.clone_from(&f.raw_output);
        }
    }

    fn of_call(call: &ToolCall) -> Self {
        Self {
            title: call.title.clone(),
            kind: call.kind,
            status: Some(call.status),
            content: call.content.clone(),
            paths: call
                .locations
                .iter()
                .map(|l| l.path.display().to_string())
                .collect(),
            raw_input: call.raw_input.clone(),
            raw_output: call.raw_output.clone(),
            result_item: None,
        }
    }

    fn meta(&self) -> ToolMeta {
        let meta = ToolMeta {
            kind: facet_kind(self.kind).to_string(),
            tool_name: Some(self.tool_name()),
            exit_code: self.raw_output.as_ref().and_then(exit_code),
            ..ToolMeta::default()
        };
        match self.kind {
            ToolKind::Execute => shell_fields(meta, self.raw_input.as_ref(), &self.title),
            _ => meta,
        }
    }

    /// What the call is named by: ACP names only a kind, and the kind `other` (MCP tools, the
    /// agent's own extras) says nothing, so such a call is named by its title.
    fn tool_name(&self) -> String {
        match (self.kind, self.title.trim()) {
            (ToolKind::Other, title) if !title.is_empty() => {
                utf8_prefix(title, TOOL_NAME_BOUND).to_string()
            }
            (kind, _) => kind_name(kind),
        }
    }

    fn arguments(&self) -> String {
        let mut args =
            json!({"title": utf8_prefix(&self.title, DETAIL_BOUND), "kind": kind_name(self.kind)});
        if self.kind == ToolKind::Execute {
            args["command"] = json!(utf8_prefix(&self.title, DETAIL_BOUND));
        }
        if let Some(path) = self.paths.first() {
            args["path"] = json!(path);
        }
        args.to_string()
    }

    /// The output text and the file parts of the call's content.
    fn outcome(&self) -> (String, Vec<ContentPart>) {
        let mut text = String::new();
        let mut files = Vec::new();
        for part in &self.content {
            match part {
                ToolCallContent::Content(c) => text.push_str(&block_text(&c.content)),
                ToolCallContent::Diff(d) => {
                    let action = if d.old_text.is_none() {
                        FileAction::Write
                    } else {
                        FileAction::Patch
                    };
                    let diff = unified(d.old_text.as_deref().unwrap_or(""), &d.new_text);
                    files.push(ContentPart::FileRef {
                        path: d.path.display().to_string(),
                        action,
                        diff: Some(diff),
                    });
                }
                ToolCallContent::Terminal(t) => text.push_str(&format!(
                    "[terminal {}]",
                    utf8_prefix(&t.terminal_id.0, 128)
                )),
                _ => {}
            }
        }
        (text, files)
    }
}

/// A minimal whole-file diff: every old line removed, every new line added.
fn unified(old: &str, new: &str) -> String {
    let mut out = String::new();
    old.lines().for_each(|l| out.push_str(&format!("-{l}\n")));
    new.lines().for_each(|l| out.push_str(&format!("+{l}\n")));
    out
}

/// An exit code from a tool's raw output, where the agent gives one.
fn exit_code(raw: &Value) -> Option<i64> {
    ["exitCode", "exit_code", "code"]
        .iter()
        .find_map(|k| raw.get(k)?.as_i64())
}

/// The open message or reasoning item of the current turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Message,
    Thought,
}

/// The state of the update stream.
#[derive(Debug, Default)]
pub(crate) struct Updates {
    open: Option<(Stream, String)>,
    calls: HashMap<String, CallState>,
    call_order: Vec<String>,
    history: Option<(String, String)>,
    /// Set while a session loads: what arrives is replayed history.
    pub loading: bool,
    /// Replayed history is held back until [`Updates::release_history`] (a warm session loads
    /// before its first turn, and nothing but `session.started` may precede a turn's opening).
    pub hold_history: bool,
    held: Vec<String>,
    /// The latest `usage_update` (`used`, `size`).
    pub context_usage: Option<(u64, u64)>,
    /// The session's working directory: relative tool paths are reported against it.
    pub cwd: Option<PathBuf>,
    /// Calls whose permission was refused and whose result already failed: a later update about
    /// one of them is not news.
    denied: HashSet<String>,
}

impl Updates {
    /// Handles one typed update.
    pub(crate) fn apply(&mut self, t: &mut Transcript, update: SessionUpdate) {
        if self.loading {
            return self.history(t, update);
        }
        match update {
            SessionUpdate::AgentMessageChunk(c) => {
                self.stream(t, Stream::Message, &block_text(&c.content))
            }
            SessionUpdate::AgentThoughtChunk(c) => {
                self.stream(t, Stream::Thought, &block_text(&c.content))
            }
            SessionUpdate::UserMessageChunk(c) => {
                self.close_stream(t);
                t.status(
                    "history",
                    Some(format!(
                        "user: {}",
                        utf8_prefix(&block_text(&c.content), DETAIL_BOUND)
                    )),
                );
            }
            SessionUpdate::ToolCall(mut call) => {
                self.absolute(&mut call.locations, &mut call.content);
                self.tool_call(t, call)
            }
            SessionUpdate::ToolCallUpdate(mut update) => {
                let f = &mut update.fields;
                self.absolute(
                    f.locations.get_or_insert_with(Vec::new),
                    f.content.get_or_insert_with(Vec::new),
                );
                f.locations = f.locations.take().filter(|l| !l.is_empty());
                f.content = f.content.take().filter(|c| !c.is_empty());
                self.tool_call_update(t, update)
            }
            SessionUpdate::Plan(plan) => self.plan(t, &plan),
            other => self.note(t, other),
        }
    }

    /// Makes relative paths absolute against the session's directory: an agent may give them
    /// absolute in permission requests and relative in tool updates, and one call must name one path.
    fn absolute(&self, locations: &mut [ToolCallLocation], content: &mut [ToolCallContent]) {
        let Some(cwd) = &self.cwd else { return };
        let fix = |path: &mut PathBuf| {
            if path.is_relative() {
                *path = cwd.join(&*path);
            }
        };
        locations.iter_mut().for_each(|l| fix(&mut l.path));
        content.iter_mut().for_each(|c| {
            if let ToolCallContent::Diff(d) = c {
                fix(&mut d.path);
            }
        });
    }

    /// Status items of the bookkeeping updates.
    fn note(&mut self, t: &mut Transcript, update: SessionUpdate) {
        match update {
            SessionUpdate::AvailableCommandsUpdate(u) => {
                t.status(
                    "available_commands",
                    Some(format!("{} commands", u.available_commands.len())),
                );
            }
            SessionUpdate::CurrentModeUpdate(u) => {
                t.status(
                    "current_mode",
                    Some(utf8_prefix(&u.current_mode_id.0, 128).to_string()),
                );
            }
            SessionUpdate::UsageUpdate(u) => {
                self.context_usage = Some((u.used, u.size));
                t.status(
                    "context_usage",
                    Some(format!("{} of {} tokens", u.used, u.size)),
                );
            }
            SessionUpdate::ConfigOptionUpdate(_) => {
                t.status("config_options", None);
            }
            SessionUpdate::SessionInfoUpdate(_) => {
                t.status("session_info", None);
            }
            other => {
                let kind = serde_json::to_value(&other)
                    .ok()
                    .and_then(|v| v.get("sessionUpdate")?.as_str().map(str::to_string));
                t.status("unknown_update", kind);
            }
        }
    }

    /// An update whose kind this client's schema does not have (a newer protocol version).
    pub(crate) fn unknown(&mut self, t: &mut Transcript, kind: Option<&str>) {
        t.status(
            "unknown_update",
            kind.map(|k| utf8_prefix(k, 128).to_string()),
        );
    }

    fn history(&mut self, t: &mut Transcript, update: SessionUpdate) {
        let (who, text) = match &update {
            SessionUpdate::UserMessageChunk(c) => ("user", block_text(&c.content)),
            SessionUpdate::AgentMessageChunk(c) => ("assistant", block_text(&c.content)),
            SessionUpdate::AgentThoughtChunk(c) => ("reasoning", block_text(&c.content)),
            _ => return self.flush_history(t),
        };
        match &mut self.history {
            Some((current, buffer)) if current == who => buffer.push_str(&text),
            _ => {
                self.flush_history(t);
                self.history = Some((who.to_string(), text));
            }
        }
    }

    /// Writes the buffered history message (replayed by `session/load`) as one status item.
    pub(crate) fn flush_history(&mut self, t: &mut Transcript) {
        if let Some((who, text)) = self.history.take() {
            let detail = format!("{who}: {}", utf8_prefix(&text, DETAIL_BOUND));
            if self.hold_history {
                self.held.push(detail);
            } else {
                t.status("history", Some(detail));
            }
        }
    }

    /// Writes the history held back so far, and stops holding it.
    pub(crate) fn release_history(&mut self, t: &mut Transcript) {
        self.hold_history = false;
        for detail in std::mem::take(&mut self.held) {
            t.status("history", Some(detail));
        }
    }

    fn stream(&mut self, t: &mut Transcript, kind: Stream, text: &str) {
        let id = match &self.open {
            Some((open, id)) if *open == kind => id.clone(),
            _ => {
                self.close_stream(t);
                let item = match kind {
                    Stream::Message => NewItem::message(ItemRole::Assistant),
                    Stream::Thought => NewItem::reasoning(ReasoningVisibility::Public),
                };
                let id = t.start_item(item);
                self.open = Some((kind, id.clone()));
                id
            }
        };
        t.delta(&id, text);
    }

    /// Completes the open message or reasoning item.
    pub(crate) fn close_stream(&mut self, t: &mut Transcript) {
        if let Some((_, id)) = self.open.take() {
            t.complete_item(&id);
        }
    }

    /// Fails the open message or reasoning item: a turn cut by a cancel gave no answer.
    fn abandon_stream(&mut self, t: &mut Transcript) {
        if let Some((_, id)) = self.open.take() {
            t.fail_item(&id);
        }
    }

    fn plan(&mut self, t: &mut Transcript, plan: &Plan) {
        self.close_stream(t);
        let steps: Vec<String> = plan
            .entries
            .iter()
            .map(|e| {
                let status = serde_json::to_value(&e.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                format!("[{status}] {}", utf8_prefix(&e.content, 256))
            })
            .collect();
        t.status(
            "todo_list",
            Some(utf8_prefix(&steps.join("\n"), DETAIL_BOUND).to_string()),
        );
    }

    /// The permission of call `id` was refused: the call will not run, so its result fails now
    /// (an agent may send no update for a refused call; the transcript must not wait for one).
    pub(crate) fn deny(&mut self, t: &mut Transcript, id: &str) {
        if self.calls.contains_key(id) {
            self.denied.insert(id.to_string());
            self.finish_call(t, id, true);
        }
    }

    fn tool_call(&mut self, t: &mut Transcript, call: ToolCall) {
        let id = call.tool_call_id.0.to_string();
        if self.denied.contains(&id) {
            return;
        }
        let mut state = CallState::of_call(&call);
        match self.calls.get_mut(&id) {
            // A repeated `tool_call` restates the call: its fields replace what was known.
            Some(known) => {
                state.result_item = known.result_item.take();
                *known = state;
            }
            None => self.open_call(t, &id, state),
        }
        self.maybe_finish(t, &id);
    }

    fn tool_call_update(&mut self, t: &mut Transcript, update: ToolCallUpdate) {
        let id = update.tool_call_id.0.to_string();
        if self.denied.contains(&id) {
            return;
        }
        if !self.calls.contains_key(&id) {
            let mut state = CallState::default();
            state.merge(&update);
            self.open_call(t, &id, state);
        } else if let Some(state) = self.calls.get_mut(&id) {
            state.merge(&update);
        }
        self.maybe_finish(t, &id);
    }

    fn open_call(&mut self, t: &mut Transcript, id: &str, mut state: CallState) {
        self.close_stream(t);
        let meta = state.meta();
        let mut call = NewItem::tool_call(kind_name(state.kind), state.arguments(), id)
            .native(id)
            .tool(meta.clone());
        for path in &state.paths {
            let action = if state.kind == ToolKind::Read {
                FileAction::Read
            } else {
                FileAction::Write
            };
            call = call.with_part(ContentPart::FileRef {
                path: path.clone(),
                action,
                diff: None,
            });
        }
        let call_item = t.start_item(call);
        t.complete_item(&call_item);
        let result = NewItem::tool_result(id)
            .native(format!("{id}/result"))
            .parent(Some(call_item))
            .tool(meta);
        state.result_item = Some(t.start_item(result));
        self.calls.insert(id.to_string(), state);
        self.call_order.push(id.to_string());
    }

    fn maybe_finish(&mut self, t: &mut Transcript, id: &str) {
        let done = self
            .calls
            .get(id)
            .and_then(|s| s.status)
            .filter(|s| matches!(s, ToolCallStatus::Completed | ToolCallStatus::Failed));
        if let Some(status) = done {
            self.finish_call(t, id, status == ToolCallStatus::Failed);
        }
    }

    fn finish_call(&mut self, t: &mut Transcript, id: &str, failed: bool) {
        let Some(state) = self.calls.remove(id) else {
            return;
        };
        self.call_order.retain(|c| c != id);
        let Some(item) = state.result_item.clone() else {
            return;
        };
        let (output, files) = state.outcome();
        let mut meta = state.meta();
        let diff: u64 = files
            .iter()
            .map(|p| {
                if let ContentPart::FileRef { diff: Some(d), .. } = p {
                    d.len() as u64
                } else {
                    0
                }
            })
            .sum();
        meta.bytes = ToolBytes {
            diff,
            ..ToolBytes::default()
        };
        if meta.is_command() {
            meta.bytes.stdout = output.len() as u64;
        } else {
            meta.bytes.result = output.len() as u64;
        }
        let mut content = vec![ContentPart::ToolResult {
            call_id: id.to_string(),
            output,
        }];
        content.extend(files);
        t.update_item(&item, |i| i.tool = Some(meta));
        if failed {
            t.update_item(&item, |i| i.content = content);
            t.fail_item(&item);
        } else {
            t.complete_item_with(&item, content);
        }
    }

    /// The turn ended (`cut`: by a cancel or the end of the process): close or fail the open
    /// stream, and fail the tool calls that never finished.
    pub(crate) fn end_turn(&mut self, t: &mut Transcript, cut: bool) {
        if cut {
            self.abandon_stream(t);
        } else {
            self.close_stream(t);
        }
        self.flush_history(t);
        for id in std::mem::take(&mut self.call_order) {
            self.finish_call(t, &id, true);
        }
    }
}

/// The command and directory of an execute call: from its raw input when the agent sends one
/// (some send it only once the call runs, some only in permission requests), else its title,
/// which is then the command line. A permission request and its tool call
/// read them the same way, so both name the same command.
pub(crate) fn shell_fields(meta: ToolMeta, raw_input: Option<&Value>, title: &str) -> ToolMeta {
    match raw_input {
        Some(input) => meta.with_shell_fields(input),
        None => meta.with_shell_fields(&json!({ "command": title })),
    }
}
