//! The `codex app-server` converter: JSON-RPC over stdio without the `"jsonrpc"` member.
//!
//! Live, it sends `initialize`, then (on its response) `initialized` and `thread/start`,
//! `thread/resume` (after `thread/list` for "the last one") or `thread/fork`, then `turn/start`;
//! it closes stdin after `turn/completed`. In replay the recorded sends stand in for all of that.
//! Notifications map as follows (every method of the schema is listed in
//! [`crate::schema::NOTIFICATION_METHODS`]; methods outside it become an `unknown_notification`
//! status):
//!
//! - `thread/started` / thread responses → `session.started` and the native session id;
//! - `turn/started`, `turn/completed` → status items and the run's outcome; usage from
//!   `thread/tokenUsage/updated` (the sum of `last` over this turn's updates);
//! - `item/*` → items ([`items`]); `turn/diff/updated` → a status item with `file_ref` parts;
//!   `turn/plan/updated` → a `todo_list` status item;
//! - `error` → a non-terminal error event, typed; warnings and notices → status items;
//! - account, rate-limit, thread-status, realtime, fuzzy-search and similar bookkeeping → nothing.

pub mod items;
mod rate_limits;
pub mod requests;
mod session;
mod steer;

use agent_api::kit::jsonrpc::{classify, Dialect, Message, RpcPeer};
use agent_api::kit::transcript::{NewItem, Transcript};
use agent_api::kit::{Ctx, Protocol};
use agent_api::kit::{ExitInfo, Unparsed};
use agent_api::run::ControlCommand;
use agent_api::universal::{ContentPart, FileAction, ItemRole, ReasoningVisibility};
use agent_api::{AgentError, PermissionPolicy, RunCompletion, SessionSelector};
use serde_json::{json, Value};

use crate::argv::StartPlan;
use crate::errors::{self, ErrorClass};
use crate::schema::{self, parse, Notice, NOTIFICATION_METHODS};
use items::Items;
use requests::{id_key, Requests};

/// What one of our requests was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    /// `initialize`.
    Initialize,
    /// `thread/list` (to resume the last thread).
    ThreadList,
    /// `thread/start`, `thread/resume`, `thread/fork`.
    Thread,
    /// `turn/start`.
    TurnStart,
    /// `turn/steer`, with the number of its steering message.
    Steer(u64),
    /// `turn/interrupt` or anything else.
    Other,
}

impl Pending {
    fn of_method(method: &str) -> Self {
        match method {
            "initialize" => Pending::Initialize,
            "thread/list" => Pending::ThreadList,
            "thread/start" | "thread/resume" | "thread/fork" => Pending::Thread,
            "turn/start" => Pending::TurnStart,
            _ => Pending::Other,
        }
    }
}

enum Outcome {
    Completed,
    Interrupted,
    Failed(AgentError),
}

/// The app-server converter. Build it with [`AppServer::live`] or [`AppServer::replay`].
pub struct AppServer {
    plan: Option<StartPlan>,
    experimental_api: bool,
    peer: RpcPeer<Pending>,
    recorded: std::collections::HashMap<String, Pending>,
    thread_id: Option<String>,
    turn_id: Option<String>,
    outcome: Option<Outcome>,
    fatal: Option<AgentError>,
    last_error: Option<(ErrorClass, String)>,
    usage: Option<schema::TokenUsageBreakdown>,
    items: Items,
    requests: Requests,
    early_notes: Vec<(String, Option<String>)>,
    last_diff: Option<String>,
    /// Serving a live session: `turn/start` per [`Protocol::send_turn`], and each
    /// `turn/completed` ends a turn, not the run.
    session: bool,
    /// A session's turn sent before its thread was ready: its `turn/start` input.
    queued_turn: Option<Value>,
    /// A session's turn was cancelled before its id was known: interrupt it once it is.
    interrupt_pending: bool,
    /// The current turn completed: it takes no steering.
    turn_over: bool,
    /// Steering messages sent, to number them.
    steers_sent: u64,
}

impl AppServer {
    fn new(plan: Option<StartPlan>, requests: Requests) -> Self {
        Self {
            plan,
            experimental_api: true,
            peer: RpcPeer::new(Dialect::NoVersion),
            recorded: Default::default(),
            thread_id: None,
            turn_id: None,
            outcome: None,
            fatal: None,
            last_error: None,
            usage: None,
            items: Items::default(),
            requests,
            early_notes: Vec::new(),
            last_diff: None,
            session: false,
            queued_turn: None,
            interrupt_pending: false,
            turn_over: false,
            steers_sent: 0,
        }
    }

    /// A converter that serves a live session through `plan` (its prompt is ignored): the
    /// thread opens at once, and every turn is a `turn/start` on it.
    pub fn session(plan: StartPlan, policy: PermissionPolicy) -> Self {
        Self {
            session: true,
            ..Self::live(plan, policy)
        }
    }

    /// A converter that drives a live `codex app-server` through `plan`, answering approval
    /// requests itself where `policy` says so.
    pub fn live(plan: StartPlan, policy: PermissionPolicy) -> Self {
        Self::new(Some(plan), Requests::live(policy))
    }

    /// A converter for a recorded session (sends nothing; the recorded sends drive it).
    pub fn replay() -> Self {
        Self::new(None, Requests::replay())
    }

    fn live_mode(&self) -> bool {
        self.plan.is_some()
    }

    fn send_request(&mut self, ctx: &mut Ctx<'_>, method: &str, params: Value) {
        if self.live_mode() {
            let message = self
                .peer
                .request(method, params, Pending::of_method(method));
            ctx.send(&message);
        }
    }

    /// A status note; before the thread starts it waits, so the session starts natively.
    fn note(&mut self, t: &mut Transcript, label: &str, detail: Option<String>) {
        if self.thread_id.is_none() {
            self.early_notes.push((label.to_string(), detail));
        } else {
            t.status(label, detail);
        }
    }

    fn flush_notes(&mut self, t: &mut Transcript) {
        for (label, detail) in std::mem::take(&mut self.early_notes) {
            t.status(label, detail);
        }
    }

    fn ours(&self, thread_id: Option<&str>) -> bool {
        match (thread_id, &self.thread_id) {
            (Some(theirs), Some(ours)) => theirs == ours,
            _ => true,
        }
    }

    fn thread_started(&mut self, t: &mut Transcript, envelope: schema::ThreadEnvelope) {
        let thread = envelope.thread;
        if self.thread_id.as_deref().is_some_and(|id| id != thread.id) {
            return; // another thread (a sub-agent's) started
        }
        t.set_native_session_id(thread.id.clone());
        let metadata = json!({
            "thread_id": thread.id,
            "model": envelope.model.or(thread.model),
            "cwd": thread.cwd,
            "cli_version": thread.cli_version,
            "forked_from_id": thread.forked_from_id,
        });
        t.session_started(Some(metadata));
        self.thread_id = Some(thread.id);
        self.flush_notes(t);
    }

    fn on_response(&mut self, id: Value, result: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let tag = self
            .peer
            .take_pending(&id)
            .or_else(|| self.recorded.remove(&id_key(&id)));
        match tag {
            Some(Pending::Initialize) => {
                if self.live_mode() {
                    ctx.send(&self.peer.notification("initialized", None));
                    self.open_thread(ctx, None);
                }
            }
            Some(Pending::ThreadList) => {
                let list: schema::ThreadList =
                    parse("the thread/list result", result).map_err(Unparsed)?;
                match list.data.into_iter().next() {
                    Some(thread) => self.open_thread(ctx, Some(thread.id)),
                    None => {
                        let error = AgentError::InvalidRequest {
                            reason: "there is no earlier codex thread to resume in this working directory".into(),
                        };
                        if self.session {
                            self.session_refused(ctx, false, error);
                        } else {
                            self.fatal = Some(error);
                            ctx.shutdown();
                        }
                    }
                }
            }
            Some(Pending::Thread) => {
                let envelope: schema::ThreadEnvelope =
                    parse("the thread result", result).map_err(Unparsed)?;
                let thread_id = envelope.thread.id.clone();
                self.thread_started(ctx.transcript, envelope);
                if !self.session {
                    self.start_turn(ctx, &thread_id, None);
                } else if let Some(input) = self.queued_turn.take() {
                    self.start_turn(ctx, &thread_id, Some(input));
                }
            }
            Some(Pending::TurnStart) => {
                let envelope: schema::TurnEnvelope =
                    parse("the turn/start result", result).map_err(Unparsed)?;
                self.turn_id.get_or_insert(envelope.turn.id);
                self.send_pending_interrupt(ctx);
            }
            Some(Pending::Steer(number)) => ctx.steer_answered(number, Ok(())),
            Some(Pending::Other) | None => {}
        }
        Ok(())
    }

    /// Sends the thread request of the plan; `resume_id` is the thread `thread/list` found.
    fn open_thread(&mut self, ctx: &mut Ctx<'_>, resume_id: Option<String>) {
        let Some(plan) = self.plan.clone() else {
            return;
        };
        let mut params = plan.thread_params.clone();
        let method = match (&plan.session, resume_id) {
            (_, Some(id)) => {
                params.insert("threadId".into(), json!(id));
                "thread/resume"
            }
            (SessionSelector::Resume(session), None) => {
                params.insert("threadId".into(), json!(session.id));
                "thread/resume"
            }
            (SessionSelector::Fork(session), _) => {
                params.insert("threadId".into(), json!(session.id));
                "thread/fork"
            }
            (SessionSelector::ResumeLast, None) => {
                let list = json!({"cwd": plan.cwd, "limit": 1, "sortKey": "updated_at", "sortDirection": "desc"});
                return self.send_request(ctx, "thread/list", list);
            }
            _ => "thread/start",
        };
        self.send_request(ctx, method, Value::Object(params));
    }

    fn on_error_response(&mut self, id: Value, message: String, ctx: &mut Ctx<'_>) {
        let tag = self
            .peer
            .take_pending(&id)
            .or_else(|| self.recorded.remove(&id_key(&id)));
        let what = match tag {
            Some(Pending::Initialize) => "initialize",
            Some(Pending::ThreadList) => "thread/list",
            Some(Pending::Thread) => "the thread request",
            Some(Pending::TurnStart) => "turn/start",
            Some(Pending::Steer(number)) => return self.steer_refused(number, &message, ctx),
            Some(Pending::Other) | None => {
                ctx.transcript
                    .status("request_refused", Some(errors::explanation(&message)));
                return;
            }
        };
        let reason = format!("codex refused {what}: {}", errors::explanation(&message));
        let error = match tag {
            // No handshake, no session: the agent's own words say why.
            Some(Pending::Initialize) => AgentError::Protocol { reason },
            Some(Pending::Thread) => errors::missing_thread(&message)
                .unwrap_or(AgentError::AgentFailed { message: reason }),
            _ => AgentError::AgentFailed { message: reason },
        };
        if self.session {
            return self.session_refused(ctx, tag == Some(Pending::TurnStart), error);
        }
        self.fatal.get_or_insert(error);
        if self.live_mode() {
            ctx.shutdown();
        }
    }

    fn turn_completed(&mut self, envelope: schema::TurnEnvelope, ctx: &mut Ctx<'_>) {
        if !self.ours(envelope.thread_id.as_deref())
            || self
                .turn_id
                .as_deref()
                .is_some_and(|id| id != envelope.turn.id)
        {
            return;
        }
        let t = &mut *ctx.transcript;
        let status = envelope
            .turn
            .status
            .clone()
            .unwrap_or_else(|| "completed".into());
        self.items.fail_all(t);
        let outcome = match status.as_str() {
            "completed" => Outcome::Completed,
            "interrupted" => Outcome::Interrupted,
            _ => {
                let (class, message) = match (&envelope.turn.error, &self.last_error) {
                    (Some(e), _) => (
                        errors::classify(e.codex_error_info.as_ref(), &e.message),
                        e.message.clone(),
                    ),
                    (None, Some((class, message))) => (*class, message.clone()),
                    (None, None) => (
                        ErrorClass::Other,
                        format!(
                            "the turn ended with status {}",
                            agent_api::kit::bounds::utf8_prefix(&status, 32)
                        ),
                    ),
                };
                Outcome::Failed(class.into_error(&message))
            }
        };
        t.status(
            "turn_completed",
            Some(agent_api::kit::bounds::utf8_prefix(&status, 32).to_string()),
        );
        self.turn_id.get_or_insert(envelope.turn.id);
        self.outcome = Some(outcome);
        self.turn_over = true;
        if self.session {
            let result = self.completion().unwrap_or_else(|| {
                Err(AgentError::Protocol {
                    reason: "a turn ended without an outcome".into(),
                })
            });
            ctx.end_turn(result);
        } else if self.live_mode() {
            ctx.shutdown();
        }
    }

    /// The item notifications: item starts and completions, and their streamed content.
    fn on_item_notification(
        &mut self,
        method: &str,
        params: Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), String> {
        let t = &mut *ctx.transcript;
        match method {
            "item/started" | "item/completed" => {
                let envelope: schema::ItemEnvelope = parse(method, params)?;
                if self.ours(envelope.thread_id.as_deref()) {
                    if envelope.item.get("type").and_then(Value::as_str) == Some("fileChange") {
                        self.requests
                            .note_file_change(&envelope.item, method == "item/started");
                    }
                    let turn = envelope
                        .turn_id
                        .as_deref()
                        .or(self.turn_id.as_deref())
                        .map(str::to_string);
                    if method == "item/started" {
                        self.items.started(t, &envelope.item, turn.as_deref())?;
                    } else {
                        self.items.completed(t, &envelope.item, turn.as_deref())?;
                    }
                }
            }
            "item/agentMessage/delta" => {
                let d: schema::ItemDelta = parse(method, params)?;
                self.items.delta(t, &d.item_id, &d.delta, || {
                    NewItem::message(ItemRole::Assistant)
                });
            }
            "item/reasoning/summaryTextDelta" | "item/reasoning/textDelta" => {
                let d: schema::ItemDelta = parse(method, params)?;
                self.items.delta(t, &d.item_id, &d.delta, || {
                    NewItem::reasoning(ReasoningVisibility::Public)
                });
            }
            "item/plan/delta" => {
                let d: schema::ItemDelta = parse(method, params)?;
                self.items
                    .delta(t, &d.item_id, &d.delta, || NewItem::status("plan", None));
            }
            "item/commandExecution/outputDelta" | "item/fileChange/outputDelta" => {
                let d: schema::ItemDelta = parse(method, params)?;
                self.items.tools.delta(t, &d.item_id, &d.delta);
            }
            "item/fileChange/patchUpdated" => {
                let p: schema::PatchUpdated = parse(method, params)?;
                self.items
                    .tools
                    .update_files(t, &p.item_id, items::file_refs(&p.changes));
            }
            "item/mcpToolCall/progress" => {
                let p: schema::McpProgress = parse(method, params)?;
                t.status(
                    "mcp_progress",
                    Some(agent_api::kit::bounds::utf8_prefix(&p.message, 1024).to_string()),
                );
            }
            // The caller routes only the methods above here.
            _ => {}
        }
        Ok(())
    }

    /// This turn's token usage, summed (saturating) over its updates.
    fn token_usage(&mut self, u: schema::TokenUsageUpdated) {
        let this_turn = self.turn_id.is_some() && u.turn_id == self.turn_id;
        if this_turn && self.ours(u.thread_id.as_deref()) {
            self.usage
                .get_or_insert_with(Default::default)
                .add(&u.token_usage.last);
        }
    }

    /// An `error` notification: a typed error event; the last one that will not be retried
    /// fails the turn.
    fn error_notification(
        &mut self,
        method: &str,
        params: Value,
        t: &mut agent_api::kit::transcript::Transcript,
    ) {
        let e: schema::ErrorNotification = match parse(method, params.clone()) {
            Ok(e) => e,
            Err(_) => schema::ErrorNotification {
                error: schema::TurnError {
                    message: params
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .into(),
                    codex_error_info: None,
                },
                will_retry: false,
                thread_id: None,
                turn_id: None,
            },
        };
        let class = errors::classify(e.error.codex_error_info.as_ref(), &e.error.message);
        let message = errors::explanation(&e.error.message);
        // An error Codex will retry is a retry under way: a status, as the exec notices are.
        if e.will_retry {
            let detail =
                errors::reconnect_detail(&e.error.message).unwrap_or_else(|| message.clone());
            t.status("api_retry", Some(detail));
        } else {
            let details = json!({"will_retry": false, "turn_id": e.turn_id, "codex_error_info": e.error.codex_error_info});
            t.error(
                message.clone(),
                Some(class.code().to_string()),
                Some(details),
            );
        }
        if let Some(notice) = errors::rate_limit_notice(class, &e.error.message) {
            notice.emit(t);
        }
        if !e.will_retry {
            self.last_error = Some((class, e.error.message));
        }
    }

    /// The turn's whole diff, as a `turn_diff` status with one file part per file, when it changed.
    fn turn_diff(&mut self, d: schema::TurnDiff, t: &mut agent_api::kit::transcript::Transcript) {
        if self.last_diff.as_deref() != Some(d.diff.as_str()) && !d.diff.is_empty() {
            let mut item = NewItem::status(
                "turn_diff",
                Some(format!("{} file(s) changed", split_diff(&d.diff).len())),
            );
            for part in split_diff(&d.diff) {
                item = item.with_part(part);
            }
            let id = t.start_item(item);
            t.complete_item(&id);
            self.last_diff = Some(d.diff);
        }
    }

    fn on_notification(
        &mut self,
        method: &str,
        params: Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), String> {
        let t = &mut *ctx.transcript;
        match method {
            "thread/started" => {
                let envelope = parse(method, params)?;
                self.thread_started(t, envelope);
            }
            "turn/started" => {
                let envelope: schema::TurnEnvelope = parse(method, params)?;
                if self.ours(envelope.thread_id.as_deref())
                    && self
                        .turn_id
                        .as_deref()
                        .is_none_or(|id| id == envelope.turn.id)
                {
                    self.turn_id = Some(envelope.turn.id.clone());
                    t.status("turn_started", Some(envelope.turn.id));
                    self.send_pending_interrupt(ctx);
                }
            }
            "turn/completed" => self.turn_completed(parse(method, params)?, ctx),
            "item/started"
            | "item/completed"
            | "item/agentMessage/delta"
            | "item/reasoning/summaryTextDelta"
            | "item/reasoning/textDelta"
            | "item/plan/delta"
            | "item/commandExecution/outputDelta"
            | "item/fileChange/outputDelta"
            | "item/fileChange/patchUpdated"
            | "item/mcpToolCall/progress" => self.on_item_notification(method, params, ctx)?,
            "item/commandExecution/terminalInteraction" => {
                t.status("terminal_input", None);
            }
            "turn/diff/updated" => self.turn_diff(parse(method, params)?, t),
            "account/rateLimits/updated" => {
                if let Some(notice) = rate_limits::reached(&params) {
                    notice.emit(t);
                }
            }
            "turn/plan/updated" => {
                let p: schema::PlanUpdated = parse(method, params)?;
                let steps: Vec<String> = p
                    .plan
                    .iter()
                    .map(|s| format!("[{}] {}", s.status, s.step))
                    .collect();
                let detail = match p.explanation {
                    Some(e) if !e.is_empty() => format!("{e}\n{}", steps.join("\n")),
                    _ => steps.join("\n"),
                };
                t.status("todo_list", Some(detail));
            }
            "thread/tokenUsage/updated" => self.token_usage(parse(method, params)?),
            "error" | "thread/realtime/error" => self.error_notification(method, params, t),
            "configWarning"
            | "deprecationNotice"
            | "warning"
            | "guardianWarning"
            | "windows/worldWritableWarning" => {
                let n: Notice = serde_json::from_value(params).unwrap_or_default();
                let label = method.rsplit('/').next().unwrap_or(method);
                let detail = n.summary.or(n.message).map(|s| errors::explanation(&s));
                self.note(t, label, detail);
            }
            "model/rerouted" => {
                let r: schema::ModelRerouted = parse(method, params)?;
                t.status(
                    "model_rerouted",
                    Some(format!("{} -> {}", r.from_model, r.to_model)),
                );
            }
            "thread/compacted" => {
                t.status("context_compacted", None);
            }
            "hook/started"
            | "hook/completed"
            | "item/autoApprovalReview/started"
            | "item/autoApprovalReview/completed"
            | "autoApprovalReview/strictReviewRequired"
            | "model/verification"
            | "modelProvider/authRecoveryStarted"
            | "modelProvider/authRecoveryCompleted"
            | "model/safetyBuffering/updated" => {
                t.status(method.replace('/', "_"), None);
            }
            known if NOTIFICATION_METHODS.contains(&known) => {}
            unknown => self.note(
                t,
                "unknown_notification",
                Some(agent_api::kit::bounds::utf8_prefix(unknown, 128).to_string()),
            ),
        }
        Ok(())
    }
}

/// Splits a unified multi-file diff into one `file_ref` part per file.
pub fn split_diff(diff: &str) -> Vec<ContentPart> {
    let mut parts = Vec::new();
    let mut current: Option<(String, String, FileAction)> = None;
    for line in diff.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            if let Some((path, text, action)) = current.take() {
                parts.push(ContentPart::FileRef {
                    path,
                    action,
                    diff: Some(text),
                });
            }
            let path = rest
                .trim_end()
                .rsplit(" b/")
                .next()
                .unwrap_or(rest.trim_end())
                .to_string();
            current = Some((path, String::new(), FileAction::Patch));
        }
        if let Some((_, text, action)) = current.as_mut() {
            if line.starts_with("new file mode") || line.starts_with("deleted file mode") {
                *action = FileAction::Write;
            }
            text.push_str(line);
        }
    }
    if let Some((path, text, action)) = current {
        parts.push(ContentPart::FileRef {
            path,
            action,
            diff: Some(text),
        });
    }
    parts
}

impl Protocol for AppServer {
    fn name(&self) -> &'static str {
        "codex.app_server"
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let params = json!({
            "clientInfo": {"name": "agent_api", "title": "agent_api", "version": env!("CARGO_PKG_VERSION")},
            // Experimental API: `item/tool/requestUserInput` is only sent to clients that opt in.
            "capabilities": {"experimentalApi": self.experimental_api},
        });
        self.send_request(ctx, "initialize", params);
        Ok(())
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match classify(message)? {
            Message::Notification { method, params } => {
                self.on_notification(&method, params, ctx).map_err(Unparsed)
            }
            Message::Request { id, method, params } => {
                let replies =
                    self.requests
                        .on_request(ctx.transcript, &self.peer, id, &method, params);
                if self.live_mode() {
                    replies.iter().for_each(|m| ctx.send(m));
                }
                Ok(())
            }
            Message::Response { id, result } => self.on_response(id, result, ctx),
            Message::ErrorResponse { id, message, .. } => {
                self.on_error_response(id, message, ctx);
                Ok(())
            }
        }
    }

    fn on_recorded_send(&mut self, message: Value, ctx: &mut Ctx<'_>) {
        match classify(message) {
            Ok(Message::Request { id, method, .. }) => {
                self.recorded
                    .insert(id_key(&id), Pending::of_method(&method));
            }
            Ok(Message::Response { id, result }) => {
                self.requests
                    .on_recorded_answer(ctx.transcript, &id, Some(&result))
            }
            Ok(Message::ErrorResponse { id, .. }) => {
                self.requests.on_recorded_answer(ctx.transcript, &id, None)
            }
            _ => {}
        }
    }

    fn on_control(&mut self, command: ControlCommand, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let replies = match command {
            ControlCommand::Permission { id, decision } => {
                self.requests
                    .decide_permission(ctx.transcript, &self.peer, &id, decision)?
            }
            ControlCommand::Question { id, answer } => {
                self.requests
                    .answer_question(ctx.transcript, &self.peer, &id, answer)?
            }
            other => {
                return Err(AgentError::InvalidRequest {
                    reason: format!("codex cannot take {other}"),
                })
            }
        };
        replies.iter().for_each(|m| ctx.send(m));
        Ok(())
    }

    fn send_turn(
        &mut self,
        prompt: &agent_api::Prompt,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        self.next_turn(prompt, ctx)
    }

    fn set_mode(
        &mut self,
        mode: &agent_api::request::AgentMode,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        self.switch_mode(mode, ctx)
    }

    fn steer(
        &mut self,
        prompt: &agent_api::Prompt,
        ctx: &mut Ctx<'_>,
    ) -> Result<agent_api::kit::Steering, AgentError> {
        self.steer_turn(prompt, ctx)
    }

    fn interrupt(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let replies = self.requests.cancel_all(ctx.transcript, &self.peer);
        replies.iter().for_each(|m| ctx.send(m));
        match (
            &self.thread_id,
            &self.turn_id,
            self.live_mode(),
            self.outcome.is_some(),
        ) {
            (Some(thread), Some(turn), true, false) => {
                let params = json!({"threadId": thread, "turnId": turn});
                self.send_request(ctx, "turn/interrupt", params);
                true
            }
            (_, None, true, false) if self.session => self.interrupt_unstarted(ctx),
            _ => false,
        }
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.flush_notes(ctx.transcript);
        // Close what is still open before the driver writes the terminal error: the transcript's
        // own end() would fail them after it, and a tool event must not follow the terminal error.
        self.items.fail_all(ctx.transcript);
        if let Some(fatal) = self.fatal.take() {
            return Err(fatal);
        }
        self.completion()
            .unwrap_or_else(|| Err(exit.early_exit_error()))
    }
}

impl std::fmt::Debug for AppServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppServer").finish_non_exhaustive()
    }
}
