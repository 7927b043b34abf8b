//! The ACP client converter: JSON-RPC 2.0 over stdio, on the kit's [`RpcPeer`].
//!
//! Live, it sends `initialize` (protocol version 1; `fs` capabilities only when the run serves the
//! file system; no terminal), then `session/new` with the run's working directory, or
//! `session/load` when resuming a session of an agent that advertises `loadSession`, then one
//! `session/prompt` per turn ([`Acp::send_prompt`]); the prompt's `stopReason` ends the turn, and
//! when no further prompt is queued the run shuts the agent down. The agent's `initialize` answer
//! (name, version, capabilities, authentication methods) is recorded in `session.started`.
//! Usage is the prompt result's, or the sum of the `_meta.usage` that an agent may put on an
//! empty message chunk after each model call; an error response's `data` (where an agent may put
//! the model API's status) is read with its message to type the error.
//! In replay the recorded sends stand in for all of that.

mod modes;
mod turns;

pub use turns::prompt_blocks;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;

use agent_api::kit::bounds::utf8_prefix;
use agent_api::kit::jsonrpc::{classify, Dialect, Message, RpcPeer};
use agent_api::kit::{Ctx, Protocol};
use agent_api::kit::{ExitInfo, Unparsed};
use agent_api::run::{ControlCommand, Usage};
use agent_api::{AgentError, RunCompletion, SessionSelector};
use agent_client_protocol_schema::{
    CancelNotification, ClientCapabilities, ContentBlock, FileSystemCapabilities, Implementation,
    InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
    NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse, ProtocolVersion,
    SessionId, SessionNotification, SessionUpdate, StopReason, ToolCallUpdate,
};
use serde_json::{json, Value};

use crate::errors;
use crate::requests::Requests;
use crate::rpc::{id_key, to_value, Pending};
use crate::updates::Updates;

/// What a live run asks the agent to do.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The session's working directory (absolute).
    pub cwd: PathBuf,
    /// New session, or the one to load.
    pub session: SessionSelector,
    /// The prompts, one turn each, in order.
    pub prompts: VecDeque<Vec<ContentBlock>>,
}

/// The ACP converter. Build it with [`Acp::live`] or [`Acp::replay`].
#[derive(Debug)]
pub struct Acp {
    name: &'static str,
    plan: Option<Plan>,
    peer: RpcPeer<Pending>,
    recorded: HashMap<String, Pending>,
    requests: Requests,
    updates: Updates,
    agent: Option<Value>,
    session_id: Option<String>,
    stop: Option<StopReason>,
    fatal: Option<AgentError>,
    /// Whether the agent takes images in prompts (`promptCapabilities.image` at `initialize`).
    image_prompts: bool,
    usage: Option<Usage>,
    prompt_in_flight: bool,
    /// `session/new` or `session/load` answered (and the history replayed): prompts may go out.
    ready: bool,
    /// The agent answers `session/load` before its replay ([`Acp::history_trails_load`]).
    history_trails_load: bool,
    /// `session/load` answered, its history still to come.
    awaiting_replay: bool,
    /// A warm session (`spec/run-protocol.md` §8): each turn ends with [`Ctx::end_turn`] and the
    /// agent lives on until the session closes.
    warm: bool,
    /// The `mcpServers` of `session/new` and `session/load` ([`Acp::with_mcp_servers`]).
    mcp_servers: Vec<Value>,
    /// Where the agent writes a debug log per session, followed once the session is known
    /// ([`Acp::with_debug_logs`]).
    debug_logs: Option<std::path::PathBuf>,
    /// What the agent's stderr (and debug log) lines say, as its crate reads them
    /// ([`Acp::with_stderr_reader`]); `None`: not read.
    stderr_reader: Option<StderrReader>,
    /// The backend's modes a warm session may switch among ([`Acp::with_mode_switch`]).
    switch_modes: Option<&'static [agent_api::request::ModeInfo]>,
    /// The mode ids the agent advertised when the session opened.
    agent_modes: Vec<String>,
    /// The config option the agent's modes are the values of (`session/set_config_option`),
    /// when it advertised them so rather than as `modes` (`mode`: `build` or `plan`, say).
    mode_config: Option<String>,
    /// The mode the session opened in.
    opened_mode: Option<String>,
    /// `session/new` or `session/load` answered: a mode switch goes out at once.
    session_open: bool,
    /// The mode switches asked before the session opened, in order.
    queued_modes: Vec<agent_api::request::AgentMode>,
}

/// Reads one line of an agent's stderr or debug log into the transcript (what it says, never
/// the line itself): the agent's crate's own, [`crate::AgentCli::reads_stderr`].
pub type StderrReader = fn(&str, &mut agent_api::kit::transcript::Transcript);

impl Acp {
    fn new(name: &'static str, plan: Option<Plan>, requests: Requests) -> Self {
        Self {
            name,
            plan,
            peer: RpcPeer::new(Dialect::Strict),
            recorded: HashMap::new(),
            requests,
            updates: Updates::default(),
            agent: None,
            session_id: None,
            stop: None,
            fatal: None,
            usage: None,
            prompt_in_flight: false,
            ready: false,
            history_trails_load: false,
            awaiting_replay: false,
            warm: false,
            image_prompts: false,
            mcp_servers: Vec::new(),
            debug_logs: None,
            stderr_reader: None,
            switch_modes: None,
            agent_modes: Vec::new(),
            mode_config: None,
            opened_mode: None,
            session_open: false,
            queued_modes: Vec::new(),
        }
    }

    /// A converter that drives a live agent through `plan`; `name` is its parser name.
    pub fn live(name: &'static str, plan: Plan, requests: Requests) -> Self {
        let mut acp = Self::new(name, Some(plan.clone()), requests);
        acp.updates.cwd = Some(plan.cwd);
        acp
    }

    /// A converter for a warm session: `plan` opens the ACP session, and each
    /// [`Protocol::send_turn`] is one `session/prompt` on it.
    pub fn session(name: &'static str, plan: Plan, requests: Requests) -> Self {
        let mut acp = Self::live(name, plan, requests);
        acp.warm = true;
        acp
    }

    /// For an agent that answers `session/load` before it has replayed the history (against the
    /// protocol): the first prompt waits for the `available_commands_update`
    /// the agent sends once the load is over, so that the replay is not taken for the new turn.
    pub fn history_trails_load(mut self) -> Self {
        self.history_trails_load = true;
        self
    }

    /// Gives the agent these MCP servers (ACP `McpServer` JSON) in `session/new` and `session/load`.
    pub fn with_mcp_servers(mut self, servers: Vec<Value>) -> Self {
        self.mcp_servers = servers;
        self
    }

    /// The agent writes a debug log per session, `<dir>/<session id>.txt` ([`session_log`]), and
    /// reports its retries only there: the run follows the session's log once
    /// `session/new` or `session/load` names it, and reads its lines as stderr lines.
    pub fn with_debug_logs(mut self, dir: Option<std::path::PathBuf>) -> Self {
        self.debug_logs = dir;
        self
    }

    /// Reads each line of the agent's stderr and of its debug log with `reader` (an agent's
    /// retry notices, [`crate::read_retries`]); `None` leaves them unread.
    pub fn with_stderr_reader(mut self, reader: Option<StderrReader>) -> Self {
        self.stderr_reader = reader;
        self
    }

    /// The agent asks to leave plan mode as `exit_plan` says: the caller gets plan mode's exit
    /// question for it ([`ExitPlan`](crate::ExitPlan)).
    pub fn with_exit_plan(mut self, exit_plan: Option<crate::ExitPlan>) -> Self {
        self.requests =
            std::mem::replace(&mut self.requests, Requests::replay()).with_exit_plan(exit_plan);
        self
    }

    /// `params` with the run's `mcpServers` (the schema's builders leave the list empty).
    fn with_servers(&self, mut params: Value) -> Value {
        if let (Some(object), false) = (params.as_object_mut(), self.mcp_servers.is_empty()) {
            object.insert("mcpServers".into(), Value::Array(self.mcp_servers.clone()));
        }
        params
    }

    /// A converter for a recorded session (sends nothing; the recorded sends drive it).
    pub fn replay(name: &'static str) -> Self {
        Self::new(name, None, Requests::replay())
    }

    fn send_request(&mut self, ctx: &mut Ctx<'_>, method: &str, params: Value) {
        if self.plan.is_some() {
            let message = self
                .peer
                .request(method, params, Pending::of_method(method));
            ctx.send(&message);
        }
    }

    /// Sends the next queued prompt as one `session/prompt`; returns false when none is left.
    /// Called again on the same live process, it runs another turn of the same session.
    pub fn send_prompt(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let (Some(plan), Some(session), true) =
            (self.plan.as_mut(), self.session_id.clone(), self.ready)
        else {
            return false;
        };
        if plan
            .prompts
            .front()
            .is_some_and(|blocks| turns::has_image(blocks))
            && !self.image_prompts
        {
            let capability = agent_api::capabilities::IMAGES.to_string();
            self.fail(
                ctx,
                AgentError::UnsupportedCapability {
                    kind: self.name.to_string(),
                    capability,
                },
            );
            return false;
        }
        let Some(blocks) = plan.prompts.pop_front() else {
            return false;
        };
        self.stop = None;
        self.prompt_in_flight = true;
        self.end_history(ctx);
        let request = PromptRequest::new(SessionId::new(session), blocks);
        self.send_request(ctx, "session/prompt", to_value(&request));
        true
    }

    fn end_history(&mut self, ctx: &mut Ctx<'_>) {
        if self.updates.loading {
            self.updates.loading = false;
            self.updates.flush_history(ctx.transcript);
        }
        self.updates.release_history(ctx.transcript);
    }

    fn started(&mut self, ctx: &mut Ctx<'_>, session_id: &str, session: Option<Value>) {
        self.session_id = Some(session_id.to_string());
        ctx.transcript.set_native_session_id(session_id);
        if let Some(log) = self
            .debug_logs
            .as_deref()
            .and_then(|dir| session_log(dir, session_id))
        {
            ctx.follow_log(log);
        }
        let metadata = json!({"session_id": session_id, "agent": self.agent, "session": session});
        ctx.transcript.session_started(Some(metadata));
    }

    fn on_initialized(&mut self, ctx: &mut Ctx<'_>, result: Value) -> Result<(), Unparsed> {
        let init: InitializeResponse = serde_json::from_value(result)?;
        let auth: Vec<Value> = init
            .auth_methods
            .iter()
            .map(|m| json!({"id": m.id().0.as_ref(), "name": m.name()}))
            .collect();
        self.agent = Some(json!({
            "name": init.agent_info.as_ref().map(|i| i.name.clone()),
            "version": init.agent_info.as_ref().map(|i| i.version.clone()),
            "protocol_version": to_value(&init.protocol_version),
            "capabilities": to_value(&init.agent_capabilities),
            "auth_methods": auth,
        }));
        self.image_prompts = init.agent_capabilities.prompt_capabilities.image;
        let Some(plan) = self.plan.clone() else {
            return Ok(());
        };
        let cwd = plan.cwd.clone();
        match &plan.session {
            SessionSelector::New => {
                let params = self.with_servers(to_value(&NewSessionRequest::new(cwd)));
                self.send_request(ctx, "session/new", params)
            }
            SessionSelector::Resume(session) if init.agent_capabilities.load_session => {
                self.updates.loading = true;
                self.updates.hold_history = self.warm;
                self.started(ctx, &session.id, None);
                let params = self.with_servers(to_value(&LoadSessionRequest::new(
                    SessionId::new(session.id.as_str()),
                    cwd,
                )));
                self.send_request(ctx, "session/load", params);
            }
            other => {
                let what = match other {
                    SessionSelector::Resume(_) => {
                        "resuming a session (the agent does not advertise loadSession)"
                    }
                    SessionSelector::ResumeLast => "resuming the last session",
                    _ => "forking a session",
                };
                self.fail(
                    ctx,
                    AgentError::InvalidRequest {
                        reason: format!("this ACP client does not support {what}"),
                    },
                );
            }
        }
        Ok(())
    }

    fn on_response(&mut self, id: Value, result: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match self.take_pending(&id) {
            Some(Pending::Initialize) => self.on_initialized(ctx, result)?,
            Some(Pending::NewSession) => {
                let session: NewSessionResponse = serde_json::from_value(result)?;
                let advertised = modes::Advertised::of(session.modes, session.config_options);
                let modes = advertised
                    .current
                    .as_ref()
                    .map(|current| json!({"current_mode": current}));
                self.started(ctx, &session.session_id.0, modes);
                self.modes_known(advertised, ctx);
                self.ready = true;
                self.send_prompt(ctx);
            }
            // History may still follow the response (an agent may replay it after): it ends
            // where the first prompt is sent.
            Some(Pending::LoadSession) => {
                let loaded = serde_json::from_value::<LoadSessionResponse>(result).ok();
                let advertised = loaded
                    .map(|r| modes::Advertised::of(r.modes, r.config_options))
                    .unwrap_or_default();
                self.modes_known(advertised, ctx);
                self.awaiting_replay = self.history_trails_load && self.plan.is_some();
                self.ready = !self.awaiting_replay;
                self.send_prompt(ctx);
            }
            Some(Pending::Prompt) => {
                // The response's figure may be smaller than the calls reported while the turn
                // ran: the larger counts (limits are checked against it).
                self.usage = Usage::larger(usage_of(&result), self.usage.take());
                // Only the stop reason is needed to end the turn: an optional field this schema
                // reads otherwise (an unstable `usage` missing a count) must not leave it open.
                let stop = result
                    .get("stopReason")
                    .cloned()
                    .map(serde_json::from_value::<StopReason>);
                match stop {
                    Some(Ok(stop)) => self.turn_ended(ctx, stop),
                    _ => {
                        let _: PromptResponse = serde_json::from_value(result)?;
                    }
                }
            }
            Some(Pending::Other) | None => {}
        }
        Ok(())
    }

    fn turn_ended(&mut self, ctx: &mut Ctx<'_>, stop: StopReason) {
        self.prompt_in_flight = false;
        self.updates
            .end_turn(ctx.transcript, stop == StopReason::Cancelled);
        ctx.transcript.status("turn_ended", Some(stop_name(stop)));
        self.stop = Some(stop);
        if self.warm {
            if let Some(outcome) = self.outcome() {
                ctx.end_turn(outcome);
            }
        } else if self.plan.is_some() && (stop == StopReason::Cancelled || !self.send_prompt(ctx)) {
            ctx.shutdown();
        }
    }

    fn take_pending(&mut self, id: &Value) -> Option<Pending> {
        self.peer
            .take_pending(id)
            .or_else(|| self.recorded.remove(&id_key(id)))
    }

    fn on_error_response(&mut self, id: Value, code: i64, message: String, ctx: &mut Ctx<'_>) {
        let error = match self.take_pending(&id) {
            Some(Pending::Initialize) => errors::refused("initialize", code, &message),
            Some(Pending::NewSession) => errors::refused("session/new", code, &message),
            Some(Pending::LoadSession) => {
                self.updates.loading = false;
                AgentError::SessionNotFound {
                    id: self.session_id.clone().unwrap_or_default(),
                }
            }
            Some(Pending::Prompt) => {
                self.prompt_in_flight = false;
                let error = errors::prompt_failed(code, &message);
                if self.warm {
                    // One turn failed; the session takes the next one.
                    self.updates.end_turn(ctx.transcript, true);
                    ctx.end_turn(Err(error));
                    return;
                }
                error
            }
            Some(Pending::Other) | None => {
                ctx.transcript
                    .status("request_refused", Some(errors::explanation(&message)));
                return;
            }
        };
        self.fail(ctx, error);
    }

    /// The agent cannot go on: the run's (or the waiting turn's) error, and the agent shut down.
    fn fail(&mut self, ctx: &mut Ctx<'_>, error: AgentError) {
        match self.plan.as_mut() {
            Some(plan) if self.warm && !plan.prompts.is_empty() => {
                plan.prompts.clear();
                ctx.end_turn(Err(error));
            }
            _ => {
                self.fatal.get_or_insert(error);
            }
        }
        if self.plan.is_some() {
            ctx.shutdown();
        }
    }

    /// Ends the results of the tool calls just refused: they will not run.
    fn end_denied(&mut self, ctx: &mut Ctx<'_>) {
        for call in self.requests.take_denied() {
            self.updates.deny(ctx.transcript, &call);
        }
    }

    fn on_notification(
        &mut self,
        method: &str,
        params: Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        if method != "session/update" {
            ctx.transcript.status(
                "unknown_notification",
                Some(utf8_prefix(method, 128).to_string()),
            );
            return Ok(());
        }
        // An agent may report each model call's usage as `_meta` on an empty message chunk: the
        // turn's usage is their sum, and the empty chunk is no text.
        if let Some(call) = params.pointer("/update/_meta").and_then(usage_of) {
            Usage::accumulate(&mut self.usage, call);
            if params
                .pointer("/update/content/text")
                .and_then(Value::as_str)
                == Some("")
            {
                return Ok(());
            }
        }
        match serde_json::from_value::<SessionNotification>(params.clone()) {
            Ok(note) => {
                let replayed = self.awaiting_replay
                    && matches!(note.update, SessionUpdate::AvailableCommandsUpdate(_));
                self.updates.apply(ctx.transcript, note.update);
                if replayed {
                    self.awaiting_replay = false;
                    self.ready = true;
                    self.send_prompt(ctx);
                }
            }
            Err(e) => {
                let kind = params
                    .get("update")
                    .and_then(|u| u.get("sessionUpdate"))
                    .and_then(Value::as_str);
                match kind {
                    // A kind this schema does not know: a newer protocol version, not a broken line.
                    Some(kind) if !crate::updates::KNOWN_UPDATES.contains(&kind) => {
                        self.updates.unknown(ctx.transcript, Some(kind))
                    }
                    _ => return Err(e.into()),
                }
            }
        }
        Ok(())
    }
}

/// The log of session `id` in `dir` (`<dir>/<id>.txt`, see [`Acp::with_debug_logs`]), when the
/// id is a plain file name: an id the agent sent is never a path to follow elsewhere.
pub fn session_log(dir: &std::path::Path, id: &str) -> Option<PathBuf> {
    let plain = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    plain.then(|| dir.join(format!("{id}.txt")))
}

/// The snake_case name of a stop reason.
pub(crate) fn stop_name(stop: StopReason) -> String {
    match to_value(&stop) {
        Value::String(s) => s,
        _ => "unknown".into(),
    }
}

/// An error response's `data` as text (an agent may put the model API's failure there, under a
/// generic "Internal error"), bounded.
fn error_data(message: &Value) -> Option<String> {
    let data = message.pointer("/error/data")?;
    let text = match data
        .get("details")
        .or_else(|| data.get("message"))
        .unwrap_or(data)
    {
        Value::String(s) => s.clone(),
        Value::Null => return None,
        other => other.to_string(),
    };
    Some(utf8_prefix(&text, 1024).to_string())
}

/// Usage from a prompt result: the protocol's `usage`, or an agent's `_meta.quota.token_count`.
fn usage_of(result: &Value) -> Option<Usage> {
    let counts = result
        .get("usage")
        .or_else(|| result.pointer("/_meta/quota/token_count"))?;
    let get = |keys: &[&str]| keys.iter().find_map(|k| counts.get(*k)?.as_u64());
    let mut usage = Usage::default();
    usage.input_tokens = get(&["inputTokens", "input_tokens"]);
    usage.output_tokens = get(&["outputTokens", "output_tokens"]);
    usage.reasoning_tokens = get(&["thoughtTokens", "thought_tokens"]);
    usage.cached_input_tokens = get(&["cachedReadTokens", "cached_read_tokens"]);
    (usage.input_tokens.is_some() || usage.output_tokens.is_some()).then_some(usage)
}

impl Protocol for Acp {
    fn name(&self) -> &'static str {
        self.name
    }

    /// Where the agent's crate gave a reader ([`Acp::with_stderr_reader`]).
    fn reads_stderr(&self) -> bool {
        self.stderr_reader.is_some()
    }

    fn on_stderr(&mut self, line: &str, ctx: &mut Ctx<'_>) {
        if let Some(read) = self.stderr_reader {
            read(line, ctx.transcript);
        }
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let fs = self.requests.serves_fs();
        let capabilities = ClientCapabilities::new()
            .fs(FileSystemCapabilities::new()
                .read_text_file(fs)
                .write_text_file(fs))
            .terminal(false);
        let request = InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(capabilities)
            .client_info(Implementation::new("agent_api", env!("CARGO_PKG_VERSION")));
        self.send_request(ctx, "initialize", to_value(&request));
        Ok(())
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let data = error_data(&message);
        match classify(message)? {
            Message::Notification { method, params } => self.on_notification(&method, params, ctx),
            Message::Request { id, method, params } => {
                if method == "session/request_permission" {
                    // The call asked about is a tool call too (an agent may announce it only here).
                    if let Some(call) = params
                        .get("toolCall")
                        .and_then(|c| serde_json::from_value::<ToolCallUpdate>(c.clone()).ok())
                    {
                        self.updates
                            .apply(ctx.transcript, SessionUpdate::ToolCallUpdate(call));
                    }
                }
                let replies =
                    self.requests
                        .on_request(ctx.transcript, &self.peer, id, &method, params);
                if self.plan.is_some() {
                    replies.iter().for_each(|m| ctx.send(m));
                }
                self.end_denied(ctx);
                Ok(())
            }
            Message::Response { id, result } => self.on_response(id, result, ctx),
            Message::ErrorResponse { id, code, message } => {
                let message = match data {
                    Some(data) => format!("{message}: {data}"),
                    None => message,
                };
                self.on_error_response(id, code, message, ctx);
                Ok(())
            }
        }
    }

    fn on_recorded_send(&mut self, message: Value, ctx: &mut Ctx<'_>) {
        match classify(message) {
            Ok(Message::Request { id, method, params }) => {
                let pending = Pending::of_method(&method);
                if pending == Pending::LoadSession {
                    if let Some(session) = params.get("sessionId").and_then(Value::as_str) {
                        self.updates.loading = true;
                        self.started(ctx, session, None);
                    }
                }
                if pending == Pending::Prompt {
                    self.end_history(ctx);
                }
                if let (Pending::NewSession | Pending::LoadSession, Some(cwd)) =
                    (pending, params.get("cwd").and_then(Value::as_str))
                {
                    self.updates.cwd = Some(PathBuf::from(cwd));
                }
                self.recorded.insert(id_key(&id), pending);
            }
            Ok(Message::Response { id, result }) => {
                self.requests
                    .on_recorded_answer(ctx.transcript, &id, Some(&result));
                self.end_denied(ctx);
            }
            Ok(Message::ErrorResponse { id, .. }) => {
                self.requests.on_recorded_answer(ctx.transcript, &id, None)
            }
            Ok(Message::Notification { method, .. }) if method == "session/cancel" => {
                ctx.transcript.status("cancel_requested", None);
            }
            _ => {}
        }
    }

    fn on_control(&mut self, command: ControlCommand, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        match command {
            ControlCommand::Permission { id, decision } => {
                let reply = self
                    .requests
                    .decide(ctx.transcript, &self.peer, &id, decision)?;
                ctx.send(&reply);
                self.end_denied(ctx);
                Ok(())
            }
            ControlCommand::Question { id, answer } => {
                let reply =
                    self.requests
                        .answer_exit_plan(ctx.transcript, &self.peer, &id, answer)?;
                ctx.send(&reply);
                self.end_denied(ctx);
                Ok(())
            }
            other => Err(AgentError::InvalidRequest {
                reason: format!("an ACP agent cannot take {other}"),
            }),
        }
    }

    fn interrupt(&mut self, ctx: &mut Ctx<'_>) -> bool {
        for reply in self.requests.cancel_all(ctx.transcript, &self.peer) {
            ctx.send(&reply);
        }
        match (&self.session_id, self.plan.is_some(), self.prompt_in_flight) {
            (Some(session), true, true) => {
                let cancel = CancelNotification::new(SessionId::new(session.as_str()));
                ctx.send(
                    &self
                        .peer
                        .notification("session/cancel", Some(to_value(&cancel))),
                );
                true
            }
            _ => self.cancel_unsent(ctx),
        }
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

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.updates.end_turn(ctx.transcript, true);
        if let Some(fatal) = self.fatal.take() {
            return Err(fatal);
        }
        self.outcome()
            .unwrap_or_else(|| Err(errors::early_exit(exit)))
    }
}
