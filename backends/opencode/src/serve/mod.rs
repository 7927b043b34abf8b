//! The `opencode serve` interface: HTTP requests out, the server's events in.
//!
//! [`ServeProtocol`] writes each request as `{"method", "path", "body"}` and reads the answers
//! (`{"status", "body"}`) and the events (`{"directory", "payload": {"type", "properties"}}`)
//! of its own session; live, [`bridge`] carries them to a [`server::Server`], in a replay they
//! come from the recording. A turn is one prompt ([`ServeProtocol::prompt`]) and ends at
//! `session.idle`.

pub mod bridge;
mod events;
mod questions;
pub mod server;
pub(crate) mod session;
mod steer;

use std::collections::{HashSet, VecDeque};

use agent_api::kit::hitl::Hitl;
use agent_api::kit::{start_run, Ctx, Protocol, RunSettings, Transport};
use agent_api::kit::{ExitInfo, Unparsed};
use agent_api::run::ControlCommand;
use agent_api::{
    AgentError, PermissionDecision, RunCompletion, RunHandle, RunRequest, SessionSelector,
};
use serde_json::{json, Value};

use crate::config::OpenCodeConfig;
use crate::errors::NativeError;
use crate::parts::Parts;
pub use server::ServerPool;

/// What an answer in flight belongs to (answers come back in the order requests went out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Session,
    Latest,
    Prompt,
    /// A steering message's prompt, by its number ([`steer`]).
    Steer(u64),
    Other,
}

/// A prompt's `agent` for `mode`: the mode's own name (`plan`), none for the default (OpenCode's
/// default agent).
fn prompt_agent(mode: Option<&agent_api::request::AgentMode>) -> Option<String> {
    mode.filter(|m| **m != agent_api::request::AgentMode::Default)
        .map(|m| m.as_str().to_string())
}

/// What a live run sends (a replay sends nothing: the recording holds the client's side).
#[derive(Debug, Clone)]
struct Plan {
    /// The first prompt's `parts` ([`prompt_parts`]).
    prompt: Value,
    model: Option<Value>,
    /// The prompt's `agent` (the request's mode) and `variant`.
    agent: Option<String>,
    variant: Option<String>,
    directory: String,
    session: SessionSelector,
    ask_first: bool,
}

/// The `serve` converter, live or replaying.
#[derive(Debug)]
pub struct ServeProtocol {
    plan: Option<Plan>,
    pending: VecDeque<Pending>,
    session_id: Option<String>,
    user_messages: HashSet<String>,
    hitl: Hitl<String, questions::QuestionRef>,
    /// The caller's policy, which the session's mode changes ([`ServeProtocol::switch_mode`]).
    policy: agent_api::PermissionPolicy,
    questions: questions::Questions,
    parts: Parts,
    title: Option<String>,
    error: Option<NativeError>,
    failure: Option<AgentError>,
    prompted: bool,
    idle: bool,
    /// OpenCode said it works on this turn's prompt (`session.status` busy). Until then a
    /// `session.idle` or `session.error` is a late one of the turn before: an aborted or failed
    /// turn sends two idles, the second of which can follow the next prompt.
    busy: bool,
    /// Serving a warm session: a prompt per [`Protocol::send_turn`], each turn ended with
    /// `Ctx::end_turn` at its `session.idle`, the bridge kept open between turns.
    warm: bool,
    /// A warm session's turn sent before its OpenCode session was known.
    queued: Option<Value>,
    /// The running turn's steering messages not taken yet.
    steers: steer::Steers,
    /// A replay's running turn was opened by a recorded prompt the turn before did not take
    /// ([`steer::Steers::next_recorded_turn`]).
    carried_over: bool,
}

impl ServeProtocol {
    fn new(
        plan: Option<Plan>,
        hitl: Hitl<String, questions::QuestionRef>,
        policy: agent_api::PermissionPolicy,
    ) -> Self {
        Self {
            plan,
            pending: VecDeque::new(),
            session_id: None,
            user_messages: HashSet::new(),
            hitl,
            policy,
            questions: questions::Questions::default(),
            parts: Parts::default(),
            title: None,
            error: None,
            failure: None,
            prompted: false,
            idle: false,
            busy: false,
            warm: false,
            queued: None,
            steers: steer::Steers::default(),
            carried_over: false,
        }
    }

    /// A replay of a recorded session.
    pub fn replay() -> Self {
        Self::new(None, Hitl::replay(), agent_api::PermissionPolicy::default())
    }

    fn live(request: &RunRequest, directory: String) -> Result<Self, AgentError> {
        let model = request
            .model
            .as_deref()
            .and_then(|m| m.split_once('/'))
            .map(|(p, m)| json!({"providerID": p, "modelID": m}));
        let plan = Plan {
            prompt: prompt_parts(&request.prompt)?,
            model,
            agent: prompt_agent(request.mode.as_ref()),
            variant: request.variant.clone(),
            directory,
            session: request.session.clone(),
            ask_first: !request.skip_permission_prompts,
        };
        // Plan mode's policy: what OpenCode's plan agent still asks to write or run is denied.
        let policy =
            agent_api::kit::hitl::policy_in_mode(request.mode.as_ref(), &request.permissions);
        Ok(Self::new(
            Some(plan),
            Hitl::live(policy),
            request.permissions.clone(),
        ))
    }

    fn query(&self) -> String {
        let dir = self
            .plan
            .as_ref()
            .map(|p| p.directory.as_str())
            .unwrap_or("");
        format!("?directory={}", percent_encode(dir))
    }

    fn send(&mut self, ctx: &mut Ctx<'_>, kind: Pending, method: &str, path: String, body: Value) {
        self.pending.push_back(kind);
        ctx.send(&json!({"method": method, "path": path, "body": body}));
    }

    /// Sends one prompt on the session and starts waiting for its `session.idle`; a next turn
    /// calls it again once the session is idle.
    pub fn prompt(&mut self, ctx: &mut Ctx<'_>, parts: Value) {
        let (Some(_), Some(id)) = (&self.plan, &self.session_id) else {
            return;
        };
        let path = format!("/session/{id}/prompt_async{}", self.query());
        let body = self.prompt_body(parts);
        self.prompted = true;
        self.idle = false;
        self.busy = false;
        self.steers.new_turn();
        self.send(ctx, Pending::Prompt, "POST", path, body);
    }

    /// A `prompt_async` body: the `parts`, with the run's model, agent and variant.
    fn prompt_body(&self, parts: Value) -> Value {
        let mut body = json!({ "parts": parts });
        let Some(plan) = &self.plan else {
            return body;
        };
        if let Some(model) = &plan.model {
            body["model"] = model.clone();
        }
        if let Some(agent) = &plan.agent {
            body["agent"] = json!(agent);
        }
        if let Some(variant) = &plan.variant {
            body["variant"] = json!(variant);
        }
        body
    }

    fn session_known(&mut self, id: &str, ctx: &mut Ctx<'_>) {
        self.session_id = Some(id.to_string());
        ctx.transcript.set_native_session_id(id.to_string());
        ctx.transcript.session_started(None);
    }

    fn on_reply(&mut self, reply: &Value, ctx: &mut Ctx<'_>) {
        let status = reply.get("status").and_then(Value::as_u64).unwrap_or(0) as u16;
        let kind = self.pending.pop_front().unwrap_or(Pending::Other);
        if let Pending::Steer(number) = kind {
            // Taken once an answer names it (`steer`); refused, the turn goes on without it.
            if !(200..300).contains(&status) {
                self.steers.refused(number, status, ctx);
            }
            return;
        }
        if !(200..300).contains(&status) && kind != Pending::Other {
            let what = match kind {
                Pending::Session => "creating the session",
                Pending::Latest => "listing its sessions",
                _ => "sending the prompt",
            };
            let status = (status != 0).then_some(status);
            let error = AgentError::Http {
                status,
                reason: format!("the opencode server refused {what}"),
            };
            if self.warm {
                return self.warm_failure(ctx, kind == Pending::Prompt, error);
            }
            self.failure.get_or_insert(error);
            ctx.close_input();
            return;
        }
        let session = match kind {
            Pending::Latest => latest_session(reply.get("body")),
            Pending::Session => reply.pointer("/body/id").and_then(Value::as_str),
            _ => return,
        };
        match session {
            Some(id) => {
                self.session_known(id, ctx);
                let parts = match self.warm {
                    true => self.queued.take(),
                    false => self.plan.as_ref().map(|p| p.prompt.clone()),
                };
                if let Some(parts) = parts {
                    self.prompt(ctx, parts);
                }
            }
            None if self.warm => self.warm_failure(
                ctx,
                false,
                AgentError::SessionNotFound {
                    id: "the most recent session".into(),
                },
            ),
            None => {
                self.failure.get_or_insert(AgentError::SessionNotFound {
                    id: "the most recent session".into(),
                });
                ctx.close_input();
            }
        }
    }

    fn reply_permission(&mut self, ctx: &mut Ctx<'_>, id: &str, decision: &PermissionDecision) {
        let (reply, message) = match decision {
            PermissionDecision::AllowForSession => ("always", None),
            d if d.is_approval() => ("once", None),
            PermissionDecision::Deny { message } => ("reject", message.clone()),
            _ => ("reject", None),
        };
        let mut body = json!({"reply": reply});
        if let Some(message) = message {
            body["message"] = json!(message);
        }
        let path = format!("/permission/{id}/reply{}", self.query());
        self.send(ctx, Pending::Other, "POST", path, body);
    }

    /// The turn is over: nothing waits any more; the bridge may stop.
    fn turn_ended(&mut self, ctx: &mut Ctx<'_>) {
        self.idle = true;
        self.parts.fail_open_tools(ctx.transcript);
        // Nothing asked in this turn still waits once it is over.
        let _ = self.hitl.cancel_permissions(ctx.transcript);
        let _ = self.hitl.cancel_questions(ctx.transcript);
        if self.warm {
            let result = self.outcome();
            ctx.end_turn(result);
        } else if self.plan.is_some() {
            ctx.close_input();
        } else if self.steers.next_recorded_turn() {
            // A replay: the recording goes on with the next turn; its events count again.
            self.idle = false;
            self.busy = false;
            self.carried_over = true;
        }
    }

    /// How the turn went, once it is over (or the run ended).
    fn outcome(&mut self) -> Result<RunCompletion, AgentError> {
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        if let Some(error) = self.error.take() {
            return Err(error.to_agent_error());
        }
        let mut completion = RunCompletion::new().with_data(json!({"interface": "serve"}));
        completion.usage = self.parts.usage();
        completion.exit_code = None;
        Ok(completion)
    }
}

/// The most recently updated session of a `GET /session` answer.
fn latest_session(list: Option<&Value>) -> Option<&str> {
    let sessions = list?.as_array()?;
    let updated = |s: &Value| {
        s.pointer("/time/updated")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    sessions
        .iter()
        .max_by_key(|s| updated(s))?
        .get("id")?
        .as_str()
}

/// Percent-encodes a query value (everything but unreserved characters).
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Protocol for ServeProtocol {
    fn name(&self) -> &'static str {
        "opencode.serve"
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let Some(plan) = self.plan.clone() else {
            return Ok(());
        };
        let query = self.query();
        match &plan.session {
            SessionSelector::Resume(session) => {
                self.session_known(&session.id, ctx);
                if !self.warm {
                    self.prompt(ctx, plan.prompt.clone());
                }
            }
            SessionSelector::Fork(session) => self.send(
                ctx,
                Pending::Session,
                "POST",
                format!("/session/{}/fork{query}", session.id),
                json!({}),
            ),
            SessionSelector::New => {
                let rules = if plan.ask_first {
                    // OpenCode asks before shell commands and edits, so the run's policy decides.
                    json!([
                        {"permission": "bash", "pattern": "*", "action": "ask"},
                        {"permission": "edit", "pattern": "*", "action": "ask"},
                    ])
                } else {
                    // The caller's explicit "don't ask": every permission is allowed.
                    json!([{"permission": "*", "pattern": "*", "action": "allow"}])
                };
                let body = json!({"permission": rules});
                self.send(
                    ctx,
                    Pending::Session,
                    "POST",
                    format!("/session{query}"),
                    body,
                );
            }
            SessionSelector::ResumeLast => self.send(
                ctx,
                Pending::Latest,
                "GET",
                format!("/session{query}"),
                Value::Null,
            ),
            _ => {
                return Err(AgentError::InvalidRequest {
                    reason: "this session selector is not supported by opencode serve".into(),
                })
            }
        }
        Ok(())
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        if message.get("status").is_some() {
            self.on_reply(&message, ctx);
            return Ok(());
        }
        let Some(payload) = message.get("payload") else {
            return Err(Unparsed("neither an answer nor an event".into()));
        };
        events::on_event(self, payload, ctx)
    }

    fn on_recorded_send(&mut self, message: Value, ctx: &mut Ctx<'_>) {
        let path = message.get("path").and_then(Value::as_str).unwrap_or("");
        let kind = match bridge::path_session(path) {
            None if path.starts_with("/session?") || path == "/session" => Pending::Session,
            Some(_) if path.contains("/fork") => Pending::Session,
            Some(_)
                if bridge::is_prompt(
                    message.get("method").and_then(Value::as_str).unwrap_or(""),
                    path,
                ) =>
            {
                Pending::Prompt
            }
            _ => Pending::Other,
        };
        let steering = kind == Pending::Prompt && self.prompted && !self.idle;
        if steering {
            // A prompt while the turn runs steers it: taken where an answer names it.
            let text = message
                .pointer("/body/parts/0/text")
                .and_then(Value::as_str);
            self.steers.recorded(text.unwrap_or_default().to_string());
        } else if kind == Pending::Prompt {
            // A prompt after a `session.idle` is the recording's next turn: its events count again.
            self.prompted = true;
            self.idle = false;
            self.busy = false;
            self.carried_over = false;
            self.steers.new_turn();
        }
        if let (Some(id), Some(reply)) = (
            path.strip_prefix("/permission/")
                .and_then(|p| p.split('/').next()),
            message.pointer("/body/reply"),
        ) {
            self.hitl
                .recorded_permission(ctx.transcript, id, reply.as_str() != Some("reject"));
        }
        self.pending.push_back(match steering {
            true => Pending::Steer(0),
            false => kind,
        });
    }

    fn on_control(&mut self, command: ControlCommand, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        match command {
            ControlCommand::Permission { id, decision } => {
                let decided = self.hitl.decide_permission(ctx.transcript, &id, decision)?;
                self.reply_permission(ctx, &decided.native, &decided.decision);
                Ok(())
            }
            ControlCommand::Question { id, answer } => questions::answer(self, &id, answer, ctx),
            _ => Err(AgentError::RunFinished),
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

    fn steer(
        &mut self,
        prompt: &agent_api::Prompt,
        ctx: &mut Ctx<'_>,
    ) -> Result<agent_api::kit::Steering, AgentError> {
        self.steer_turn(prompt, ctx)
    }

    fn interrupt(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if self.warm && self.queued.take().is_some() {
            ctx.end_turn(Err(AgentError::Cancelled));
            return true;
        }
        let Some(id) = self
            .session_id
            .clone()
            .filter(|_| !self.idle && self.plan.is_some())
        else {
            return false;
        };
        for decided in self.hitl.cancel_permissions(ctx.transcript) {
            self.reply_permission(ctx, &decided.native, &decided.decision);
        }
        questions::cancel_all(self, ctx);
        let path = format!("/session/{id}/abort{}", self.query());
        self.send(ctx, Pending::Other, "POST", path, Value::Null);
        // Aborted before OpenCode said it was busy: the abort's idle ends this turn.
        self.busy = true;
        true
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.parts.fail_open_tools(ctx.transcript);
        if self.carried_over && !self.busy {
            // A replay's last recorded prompt OpenCode never began (a steering message it stored
            // after its loop's last step, which no turn answers): the run ended with the turn
            // before.
            self.idle = true;
        }
        if self.failure.is_none() && self.error.is_none() && !self.idle {
            return Err(exit.early_exit_error());
        }
        self.outcome()
    }
}

/// The bridge to `server`, standing where an agent process would.
fn bridged(server: std::sync::Arc<server::Server>, settings: &RunSettings) -> Transport {
    let (subscriber, events) = server.subscribe();
    Transport::in_process(settings.line_cap, move |pipes| {
        bridge::run(server, subscriber, events, pipes)
    })
}

/// Starts a live `serve` run on `server`.
pub(crate) fn start_on(
    server: std::sync::Arc<server::Server>,
    request: &RunRequest,
    directory: String,
    settings: RunSettings,
) -> Result<RunHandle, AgentError> {
    let transport = bridged(server, &settings);
    Ok(start_run(
        settings,
        transport,
        Box::new(ServeProtocol::live(request, directory)?),
    ))
}

/// The `parts` of a prompt: its text, then each image inline as a `file` part with a `data:` URL
/// (the server may run elsewhere than the caller's files).
fn prompt_parts(prompt: &agent_api::Prompt) -> Result<Value, AgentError> {
    let mut parts = vec![json!({"type": "text", "text": prompt.text})];
    for image in agent_api::kit::images::ImageData::read_all(prompt)? {
        let filename = image
            .file
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        parts.push(json!({"type": "file", "mime": image.file.media_type, "filename": filename, "url": image.data_url()}));
    }
    Ok(Value::Array(parts))
}

/// The server `request` runs on: the pool's for its environment, or for a run with a home of its
/// own a server of its own, held by the run alone, so it stops (and its home goes) when the run
/// ends; pooled, it would outlive both.
pub(crate) async fn server_for(
    config: &OpenCodeConfig,
    pool: &ServerPool,
    request: &RunRequest,
) -> Result<std::sync::Arc<server::Server>, AgentError> {
    let base = crate::base_spec(config, request)?;
    match request.home {
        agent_api::request::Home::Inherit => pool.get(base, config.startup_timeout).await,
        _ => server::Server::start(base, config.startup_timeout).await,
    }
}

/// Starts a `serve` run: gets the backend's server for this environment (starting one if none
/// runs), then runs the turn on it.
pub(crate) async fn start(
    config: &OpenCodeConfig,
    pool: &ServerPool,
    request: RunRequest,
    settings: RunSettings,
) -> Result<RunHandle, AgentError> {
    let directory = crate::working_dir(config, &request)
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let server = server_for(config, pool, &request).await?;
    start_on(server, &request, directory, settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_api::kit::ProtocolHarness;

    fn started(request: RunRequest) -> (ServeProtocol, ProtocolHarness, Vec<Value>) {
        let mut protocol = ServeProtocol::live(&request, "/work/a b".into()).unwrap();
        let mut harness = ProtocolHarness::new();
        protocol.start(&mut harness.ctx()).unwrap();
        let sent = harness.take_sent();
        (protocol, harness, sent)
    }

    #[test]
    fn a_new_session_asks_before_shell_and_edits_unless_told_not_to() {
        let (_, _, sent) = started(RunRequest::new("hi"));
        assert_eq!(sent[0]["path"], "/session?directory=%2Fwork%2Fa%20b");
        assert_eq!(
            sent[0]["body"]["permission"][0],
            json!({"permission": "bash", "pattern": "*", "action": "ask"})
        );
        let (_, _, sent) = started(RunRequest::new("hi").with_skip_permission_prompts(true));
        assert_eq!(
            sent[0]["body"]["permission"],
            json!([{"permission": "*", "pattern": "*", "action": "allow"}])
        );
    }

    #[test]
    fn the_prompt_follows_the_new_session_and_other_sessions_are_ignored() {
        let (mut protocol, mut harness, _) =
            started(RunRequest::new("hi").with_model("mock/mock-model"));
        protocol
            .on_message(
                json!({"status": 200, "body": {"id": "ses_1"}}),
                &mut harness.ctx(),
            )
            .unwrap();
        let sent = harness.take_sent();
        assert_eq!(
            sent[0]["path"],
            "/session/ses_1/prompt_async?directory=%2Fwork%2Fa%20b"
        );
        assert_eq!(
            sent[0]["body"]["model"],
            json!({"providerID": "mock", "modelID": "mock-model"})
        );
        let other =
            json!({"payload": {"type": "session.idle", "properties": {"sessionID": "ses_2"}}});
        protocol.on_message(other, &mut harness.ctx()).unwrap();
        assert!(!protocol.idle, "another session's idle is not this run's");
        let unknown =
            json!({"payload": {"type": "something.new", "properties": {"sessionID": "ses_1"}}});
        protocol.on_message(unknown, &mut harness.ctx()).unwrap();
        // An idle or error before OpenCode works on the prompt is the turn before's, late.
        let idle =
            json!({"payload": {"type": "session.idle", "properties": {"sessionID": "ses_1"}}});
        let late_error = json!({"payload": {"type": "session.error", "properties": {"sessionID": "ses_1", "error": {"name": "MessageAbortedError", "data": {"message": "Aborted"}}}}});
        protocol.on_message(late_error, &mut harness.ctx()).unwrap();
        protocol
            .on_message(idle.clone(), &mut harness.ctx())
            .unwrap();
        assert!(
            !protocol.idle && protocol.error.is_none(),
            "a late idle or error ended or failed the turn"
        );
        let busy = json!({"payload": {"type": "session.status", "properties": {"sessionID": "ses_1", "status": {"type": "busy"}}}});
        protocol.on_message(busy, &mut harness.ctx()).unwrap();
        protocol.on_message(idle, &mut harness.ctx()).unwrap();
        assert!(protocol.idle && harness.input_closed());
        let types: Vec<_> = harness.transcript.drain().map(|e| e.type_name()).collect();
        assert!(!types.contains(&"agent.unparsed"), "{types:?}");
    }

    #[test]
    fn a_steer_is_a_prompt_on_the_busy_session_taken_when_an_answer_names_it() {
        let (mut protocol, mut harness, _) = started(RunRequest::new("hi"));
        let steer = agent_api::Prompt::from("Also say banana.");
        assert!(matches!(
            protocol.steer(&steer, &mut harness.ctx()),
            Err(AgentError::NoTurnRunning)
        ));
        protocol
            .on_message(
                json!({"status": 200, "body": {"id": "ses_1"}}),
                &mut harness.ctx(),
            )
            .unwrap();
        harness.take_sent();
        // The turn's prompt is answered first (answers come in the order requests went out).
        protocol
            .on_message(json!({"status": 204, "body": null}), &mut harness.ctx())
            .unwrap();
        let event =
            |kind: &str, props: Value| json!({"payload": {"type": kind, "properties": props}});
        let user = |id: &str| {
            event(
                "message.updated",
                json!({"sessionID": "ses_1", "info": {"id": id, "role": "user", "sessionID": "ses_1"}}),
            )
        };
        let answer = |id: &str, parent: &str| {
            event(
                "message.updated",
                json!({"sessionID": "ses_1", "info": {"id": id, "parentID": parent, "role": "assistant", "sessionID": "ses_1"}}),
            )
        };
        for message in [
            user("msg_1"),
            event(
                "session.status",
                json!({"sessionID": "ses_1", "status": {"type": "busy"}}),
            ),
            answer("msg_2", "msg_1"),
        ] {
            protocol.on_message(message, &mut harness.ctx()).unwrap();
        }
        let taken = protocol.steer(&steer, &mut harness.ctx()).unwrap();
        assert_eq!(taken, agent_api::kit::Steering::Awaiting(1));
        let sent = harness.take_sent();
        assert_eq!(
            sent[0]["path"],
            "/session/ses_1/prompt_async?directory=%2Fwork%2Fa%20b"
        );
        assert_eq!(sent[0]["body"]["parts"][0]["text"], "Also say banana.");
        protocol
            .on_message(json!({"status": 204, "body": null}), &mut harness.ctx())
            .unwrap();
        // Stored, not yet read: the message is not taken until an answer names it.
        protocol
            .on_message(user("msg_3"), &mut harness.ctx())
            .unwrap();
        assert!(harness.take_steer_answers().is_empty());
        harness.transcript.drain().for_each(drop);
        protocol
            .on_message(answer("msg_4", "msg_3"), &mut harness.ctx())
            .unwrap();
        let answers = harness.take_steer_answers();
        assert!(matches!(answers.as_slice(), [(1, Ok(()))]), "{answers:?}");
        let texts: Vec<String> = harness
            .transcript
            .drain()
            .filter_map(|e| e.completed_item().map(|item| item.text()))
            .collect();
        assert_eq!(texts, vec!["Also say banana.".to_string()]);
        // A refused one is typed, and the turn goes on.
        protocol.steer(&steer, &mut harness.ctx()).unwrap();
        protocol
            .on_message(json!({"status": 400, "body": null}), &mut harness.ctx())
            .unwrap();
        let answers = harness.take_steer_answers();
        assert!(
            matches!(
                answers.as_slice(),
                [(2, Err(AgentError::SteerRefused { .. }))]
            ),
            "{answers:?}"
        );
        assert!(!protocol.idle && protocol.failure.is_none());
        protocol
            .on_message(
                event("session.idle", json!({"sessionID": "ses_1"})),
                &mut harness.ctx(),
            )
            .unwrap();
        assert!(matches!(
            protocol.steer(&steer, &mut harness.ctx()),
            Err(AgentError::NoTurnRunning)
        ));
    }

    #[test]
    fn a_refused_session_fails_the_run_with_its_status() {
        let (mut protocol, mut harness, _) = started(RunRequest::new("hi"));
        protocol
            .on_message(json!({"status": 400, "body": null}), &mut harness.ctx())
            .unwrap();
        assert!(matches!(
            protocol.failure,
            Some(AgentError::Http {
                status: Some(400),
                ..
            })
        ));
        assert!(harness.input_closed());
    }

    #[test]
    fn events_are_routed_by_session() {
        let event =
            |props: Value| json!({"payload": {"type": "x", "properties": props}}).to_string();
        assert_eq!(
            server::event_session(&event(json!({"sessionID": "ses_1"}))).as_deref(),
            Some("ses_1")
        );
        assert_eq!(
            server::event_session(&event(json!({"part": {"sessionID": "ses_2"}}))).as_deref(),
            Some("ses_2")
        );
        assert_eq!(
            server::event_session(&event(json!({"info": {"sessionID": "ses_3"}}))).as_deref(),
            Some("ses_3")
        );
        assert_eq!(server::event_session(&event(json!({}))), None);
        assert_eq!(
            server::event_session(
                &json!({"payload": {"type": "sync", "properties": {"sessionID": "s"}}}).to_string()
            ),
            None
        );
    }

    /// A replay whose turn ends with a recorded prompt no answer of it named: the prompt opens
    /// the recording's next turn; one OpenCode never began (a steering message stored after its
    /// loop's last step) leaves the run ended with the turn before, not failed.
    #[test]
    fn a_replayed_prompt_the_turn_did_not_take_opens_the_next_turn_or_none() {
        let event =
            |kind: &str, props: Value| json!({"payload": {"type": kind, "properties": props}});
        let status = |kind: &str| {
            event(
                "session.status",
                json!({"sessionID": "ses_1", "status": {"type": kind}}),
            )
        };
        let user = |id: &str| {
            event(
                "message.updated",
                json!({"sessionID": "ses_1", "info": {"id": id, "role": "user", "sessionID": "ses_1"}}),
            )
        };
        let idle = || event("session.idle", json!({"sessionID": "ses_1"}));
        let prompt = |text: &str| json!({"method": "POST", "path": "/session/ses_1/message", "body": {"parts": [{"type": "text", "text": text}]}});
        for answered in [true, false] {
            let mut protocol = ServeProtocol::replay();
            let mut harness = ProtocolHarness::new();
            let ctx = &mut harness.ctx();
            protocol.on_recorded_send(
                json!({"method": "POST", "path": "/session", "body": {}}),
                ctx,
            );
            protocol
                .on_message(json!({"status": 200, "body": {"id": "ses_1"}}), ctx)
                .unwrap();
            protocol.on_recorded_send(prompt("first"), ctx);
            protocol.on_message(user("msg_1"), ctx).unwrap();
            protocol.on_message(status("busy"), ctx).unwrap();
            // The second prompt, written while the first turn still runs in the recording.
            protocol.on_recorded_send(prompt("second"), ctx);
            protocol.on_message(idle(), ctx).unwrap();
            assert!(!protocol.idle, "the second prompt opened the next turn");
            if answered {
                protocol.on_message(user("msg_3"), ctx).unwrap();
                protocol.on_message(status("busy"), ctx).unwrap();
                protocol.on_message(idle(), ctx).unwrap();
                assert!(protocol.idle, "the next turn ended at its own idle");
            }
            let done = protocol.finish(&ExitInfo::default(), ctx);
            assert!(done.is_ok(), "answered {answered}: {done:?}");
        }
    }
}
