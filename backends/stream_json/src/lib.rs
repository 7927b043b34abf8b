//! `agent_api_stream_json`: the stream-json family's converter. The protocol is Claude Code's
//! (its stream-json output and, two-way, its control protocol on stdin), the family's origin,
//! which the rest of this crate calls "the protocol"; other CLIs speak it too (their crates name
//! this one), each with its own tools and a few quirks. One converter ([`StreamJson`]) serves
//! them all: what differs is data, a [`Dialect`] each agent's crate declares (its tool table,
//! whether it speaks the control protocol, whether its user messages carry images, how it hides
//! an error in a successful result, the log it reports in). Nothing else here names an agent:
//! what one agent alone does is said in its crate.
//!
//! One struct holds the state; its parts live in sibling modules, one idea each:
//! `messages` (assistant and user messages), `stream` (the `stream_event` SSE deltas),
//! `system` (system and other informational lines), `control` (permission and question
//! requests, interrupts), `outcome` (turn results, usage, typed errors) and `tools` (tool items,
//! command metadata, file refs).
//!
//! | native line | universal events |
//! |---|---|
//! | `system/init` | `session.started` (model, tools, MCP servers), then the user messages sent |
//! | other `system` subtypes (`api_retry`, `compact_boundary`, `status`, hooks, …) | a status item; a retry also a `rate_limited` notice |
//! | `stream_event` (`message_start`, `content_block_*`, `message_delta`) | an assistant message item opened, text and reasoning deltas, a tool call item started |
//! | `assistant` | the message's text, reasoning and tool call items completed |
//! | `user` with `tool_result` blocks | tool result items (the facet's kind, exit code, bytes; `file_ref` parts) |
//! | `control_request` `can_use_tool` | `permission.requested` (or `question.requested` for AskUserQuestion), then `.resolved` |
//! | `control_request` other subtypes | answered as unsupported, a status item |
//! | `control_cancel_request` | the waiting request resolved as cancelled |
//! | `result` | the turn's outcome: usage, final text, or one typed error |
//! | anything else | a status item naming the type (never its content) |

mod control;
mod messages;
mod outcome;
mod stored;
mod stream;
mod system;
mod tools;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use agent_api::kit::hitl::Hitl;
use agent_api::kit::images::ImageData;
use agent_api::kit::{parse_typed, parse_value, Unparsed};
use agent_api::kit::{Ctx, ExitInfo, Protocol};
use agent_api::run::ControlCommand;
use agent_api::{AgentError, PermissionPolicy, RunCompletion};
use serde_json::{json, Value};

use agent_api::kit::tool_table::ToolTable;
pub use control::EXIT_PLAN_OPTIONS;
use control::{PendingAsk, PendingPermission};
use messages::OpenMessage;
use outcome::Outcome;
pub use outcome::ResultError;
pub use stored::{user_prompt, StoreReader};
use tools::ToolCallInfo;

/// What tells one agent's stream-json apart: data its crate declares once, which the converter
/// reads (never a switch named after an agent). Build it with [`Dialect::new`] and the setters.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Dialect {
    /// The converter's name (in `agent.unparsed` events and errors): `<agent>.stream_json`.
    pub name: &'static str,
    /// The agent's tools: the permission category and tools-facet kind of each name.
    pub tools: ToolTable,
    /// Whether the agent speaks the control protocol on stdin (`initialize`, `interrupt`,
    /// permission answers); one that reads only user messages gets each message's content as a
    /// list of text blocks, and a cancel terminates its process group.
    pub control_messages: bool,
    /// Whether the agent's user messages may carry image blocks.
    pub takes_images: bool,
    /// How the agent reports some failures as a successful `result` whose text says so: what
    /// turns such a text into the turn's typed error.
    pub result_error: Option<ResultError>,
    /// What reads each line of the log the agent reports in (see [`StreamJson::following`]).
    pub log_reader: Option<LogReader>,
    /// Whether a user message sent while a turn runs joins that turn (read at the agent's next
    /// step, or run right after the turn's last step) and comes back as an `isReplay` user line
    /// once the agent takes it (a `--replay-user-messages` flag, say): what
    /// `RunControl::steer` needs.
    pub steers_mid_turn: bool,
}

impl Dialect {
    /// A dialect named `name` with the tools `tools`: the control protocol spoken, no images, no
    /// result errors, no log.
    pub const fn new(name: &'static str, tools: ToolTable) -> Self {
        Self {
            name,
            tools,
            control_messages: true,
            takes_images: false,
            result_error: None,
            log_reader: None,
            steers_mid_turn: false,
        }
    }

    /// The agent kind the dialect's name starts with (`<agent>.stream_json`), for errors.
    fn agent(&self) -> &'static str {
        self.name
            .split_once('.')
            .map_or(self.name, |(agent, _)| agent)
    }

    /// The agent reads user messages on stdin and nothing else (no control protocol).
    pub const fn user_messages_only(mut self) -> Self {
        self.control_messages = false;
        self
    }

    /// A user message sent while a turn runs joins that turn, read at the agent's next step, and
    /// is echoed as an `isReplay` user line when taken (`agent_api.control.steer`): only for an
    /// agent seen to do so.
    pub const fn steerable(mut self) -> Self {
        self.steers_mid_turn = true;
        self
    }

    /// The agent's user messages carry images.
    pub const fn with_images(mut self) -> Self {
        self.takes_images = true;
        self
    }

    /// `read` turns a successful `result` text that is really a failure into its typed error.
    pub const fn with_result_error(mut self, read: ResultError) -> Self {
        self.result_error = Some(read);
        self
    }

    /// `read` reads each line of the log the agent reports in.
    pub const fn with_log_reader(mut self, read: LogReader) -> Self {
        self.log_reader = Some(read);
        self
    }

    /// The kit's permission request for a call of `tool` with `input`: its category from the
    /// dialect's tools, a short summary, the command or file it names (the control protocol's
    /// `can_use_tool`, or a dialect's own permission checks).
    pub fn tool_permission(
        &self,
        id: &str,
        tool: &str,
        input: &Value,
    ) -> agent_api::kit::hitl::PermissionRequest {
        control::tool_permission(&self.tools, id, tool, input)
    }
}

impl std::fmt::Debug for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialect")
            .field("name", &self.name)
            .field("control_messages", &self.control_messages)
            .finish_non_exhaustive()
    }
}

/// How the protocol is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Channel {
    /// Live, two-way: the prompt and control messages go to the CLI's stdin.
    Control,
    /// Live, one-way (`-p PROMPT`): nothing is written to the CLI.
    Print,
    /// A recording: what the client sent comes from the recording, nothing is written.
    Replay,
    /// Live, two-way, several turns: each `result` ends a turn, not the run.
    Session,
}

/// The stateful converter of one run or session of an agent speaking the dialect.
pub struct StreamJson {
    /// What tells the agent apart.
    dialect: Dialect,
    channel: Channel,
    prompt: Option<String>,
    /// Permission requests and questions: the policy, and what each needs for its reply
    /// (a question's context is its request id and position).
    hitl: Hitl<PendingPermission, (String, usize)>,
    /// Whether the run asked for a bypass permission mode (to classify a refusal).
    bypass_requested: bool,
    next_request: u64,
    /// Open assistant messages by native message id.
    messages: HashMap<String, OpenMessage>,
    /// How many messages were opened: each message's place in that order, to close them in it.
    messages_opened: u64,
    /// The message that `stream_event`s of each thread (`parent_tool_use_id`) belong to.
    streaming: HashMap<Option<String>, String>,
    /// Tool calls by `tool_use_id`.
    tools: HashMap<String, ToolCallInfo>,
    /// Call ids whose tool_result item was emitted.
    results_seen: HashSet<String>,
    /// AskUserQuestion requests waiting for answers, by request id.
    asks: HashMap<String, PendingAsk>,
    /// User messages sent but not yet in the transcript: they wait for the CLI's `system/init`,
    /// so that the session starts natively (with its model and tools) before them.
    pending_user: Vec<String>,
    /// One-way: `start` writes the prompt to stdin and closes it.
    prompt_on_stdin: bool,
    /// The first prompt's images, sent with it as image blocks.
    images: Vec<ImageData>,
    /// The log the agent reports in, followed from the start, read by the dialect's
    /// [`Dialect::log_reader`].
    log: Option<std::path::PathBuf>,
    /// The modes a warm session may switch to (`set_permission_mode`); empty: the agent speaking
    /// this dialect has no such request.
    switch_modes: &'static [agent_api::request::ModeInfo],
    /// The caller's policy, before a mode changes it ([`agent_api::kit::hitl::policy_in_mode`]).
    policy: PermissionPolicy,
    outcome: Outcome,
    /// A turn runs: its user message was sent and its `result` has not come.
    turn_open: bool,
    /// The turn's own prompt has not come back yet (an agent that echoes user messages).
    prompt_echo_due: bool,
    /// Steering messages sent and not yet taken, oldest first: their number and text.
    steers: std::collections::VecDeque<(u64, String)>,
    /// Steering messages sent, to number them.
    steers_sent: u64,
}

/// Reads one line of the log an agent reports in ([`StreamJson::following`]) into the transcript.
pub type LogReader = fn(&str, &mut agent_api::kit::transcript::Transcript);

impl StreamJson {
    fn new(
        dialect: Dialect,
        channel: Channel,
        prompt: Option<String>,
        policy: PermissionPolicy,
        bypass_requested: bool,
    ) -> Self {
        let hitl = if channel == Channel::Replay {
            Hitl::replay()
        } else {
            Hitl::live(policy.clone())
        };
        Self {
            dialect,
            channel,
            prompt,
            hitl,
            bypass_requested,
            next_request: 0,
            messages: HashMap::new(),
            messages_opened: 0,
            streaming: HashMap::new(),
            tools: HashMap::new(),
            results_seen: HashSet::new(),
            asks: HashMap::new(),
            pending_user: Vec::new(),
            prompt_on_stdin: false,
            images: Vec::new(),
            log: None,
            switch_modes: &[],
            policy,
            outcome: Outcome::for_dialect(&dialect),
            turn_open: false,
            prompt_echo_due: false,
            steers: Default::default(),
            steers_sent: 0,
        }
    }

    /// A live run over the two-way channel: `start` sends `initialize` (when the dialect speaks
    /// the control protocol) and `prompt`.
    pub fn control(
        dialect: Dialect,
        prompt: impl Into<String>,
        policy: PermissionPolicy,
        bypass_requested: bool,
    ) -> Self {
        Self::new(
            dialect,
            Channel::Control,
            Some(prompt.into()),
            policy,
            bypass_requested,
        )
    }

    /// `images` go with the first prompt as image blocks (the dialect must take images; each
    /// turn of a session sends its own).
    pub fn with_images(mut self, images: Vec<ImageData>) -> Self {
        self.images = images;
        self
    }

    /// A session that may switch among `modes` between turns with the `set_permission_mode`
    /// control request (the protocol's permission modes).
    pub fn with_mode_switch(mut self, modes: &'static [agent_api::request::ModeInfo]) -> Self {
        self.switch_modes = modes;
        self
    }

    /// Runs in `mode`: its requests are decided by the caller's policy as the mode changes it
    /// ([`agent_api::kit::hitl::policy_in_mode`]: plan mode denies writes and commands).
    pub fn in_mode(mut self, mode: Option<&agent_api::request::AgentMode>) -> Self {
        self.hitl
            .set_policy(agent_api::kit::hitl::policy_in_mode(mode, &self.policy));
        self
    }

    /// A live session over the two-way channel: `start` sends `initialize` (when the dialect
    /// speaks the control protocol), and each turn its user message.
    pub fn session(dialect: Dialect, policy: PermissionPolicy, bypass_requested: bool) -> Self {
        Self::new(dialect, Channel::Session, None, policy, bypass_requested)
    }

    /// A live one-way run (`-p PROMPT`): the prompt is on the command line.
    pub fn print(dialect: Dialect, prompt: impl Into<String>, bypass_requested: bool) -> Self {
        Self::new(
            dialect,
            Channel::Print,
            Some(prompt.into()),
            PermissionPolicy::Ask,
            bypass_requested,
        )
    }

    /// A live one-way run whose CLI reads the prompt from stdin (`-p` without a prompt
    /// argument): `start` writes it and closes stdin, so it never shows in the process list.
    pub fn print_from_stdin(
        dialect: Dialect,
        prompt: impl Into<String>,
        bypass_requested: bool,
    ) -> Self {
        Self {
            prompt_on_stdin: true,
            ..Self::print(dialect, prompt, bypass_requested)
        }
    }

    /// A replay of a recording (one-way stdout or a two-way session).
    pub fn replaying(dialect: Dialect) -> Self {
        Self::new(dialect, Channel::Replay, None, PermissionPolicy::Ask, false)
    }

    /// The run follows the agent's log at `path` from its start, each line added read by the
    /// dialect's [`Dialect::log_reader`] (which describes what a line says, never copies it);
    /// nothing is followed when the dialect reads no log.
    pub fn following(mut self, path: std::path::PathBuf) -> Self {
        self.log = self.dialect.log_reader.map(|_| path);
        self
    }

    /// The dialect the converter reads.
    pub fn dialect(&self) -> &Dialect {
        &self.dialect
    }

    /// Whether the protocol may write to the CLI.
    fn writes(&self) -> bool {
        matches!(self.channel, Channel::Control | Channel::Session)
    }

    fn initialize(&mut self, ctx: &mut Ctx<'_>) {
        if !self.dialect.control_messages {
            return;
        }
        let id = self.request_id();
        ctx.send(&json!({ "type": "control_request", "request_id": id, "request": { "subtype": "initialize", "hooks": null } }));
    }

    /// A fresh id for a control request this client sends.
    fn request_id(&mut self) -> String {
        self.next_request += 1;
        let tag = uuid::Uuid::new_v4().simple().to_string();
        format!("req_{}_{}", self.next_request, &tag[..8])
    }

    /// A user message: its text, then its images as base64 image blocks.
    fn user_line(&self, text: &str, images: &[ImageData]) -> Value {
        let content = if images.is_empty() && self.dialect.control_messages {
            json!(text)
        } else {
            let mut blocks = vec![json!({ "type": "text", "text": text })];
            blocks.extend(images.iter().map(|image| {
                json!({ "type": "image", "source": { "type": "base64", "media_type": image.file.media_type, "data": image.base64 } })
            }));
            Value::Array(blocks)
        };
        if !self.dialect.control_messages {
            return json!({ "type": "user", "message": { "role": "user", "content": content } });
        }
        json!({ "type": "user", "message": { "role": "user", "content": content }, "parent_tool_use_id": null, "session_id": "" })
    }
}

/// The `type` of a native message.
fn type_of(message: &Value) -> Result<&str, Unparsed> {
    if !message.is_object() {
        return Err(Unparsed("a native message is not a JSON object".into()));
    }
    message
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| Unparsed("a native message has no string `type`".into()))
}

/// `value`'s string field `key`, `None` when it is absent or not a string.
pub(crate) fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// A `tool_use` block's id (empty when absent) and tool name (`unknown` when absent), whether
/// it streams or comes whole.
pub(crate) fn tool_use(block: &Value) -> (String, String) {
    (
        str_field(block, "id").unwrap_or_default().to_string(),
        str_field(block, "name").unwrap_or("unknown").to_string(),
    )
}

/// A string field, cut to `max` bytes (for status details built from parsed fields).
pub(crate) fn short(value: Option<&Value>, max: usize) -> Option<String> {
    value.and_then(Value::as_str).map(|s| safe(s, max))
}

/// `text` with secrets masked ([`agent_api::kit::secrets::redact`]) and cut to `max` bytes with `…`.
pub(crate) fn safe(text: &str, max: usize) -> String {
    let masked = agent_api::kit::secrets::redact(text);
    let cut = agent_api::kit::bounds::utf8_prefix(&masked, max);
    if cut.len() < masked.len() {
        format!("{cut}…")
    } else {
        cut.to_string()
    }
}

impl StreamJson {
    /// A user message the agent took, echoed: the turn's prompt (in the transcript already, from
    /// what was sent), or the oldest steering message, now taken.
    fn on_echo(&mut self, ctx: &mut Ctx<'_>) {
        if std::mem::take(&mut self.prompt_echo_due) {
            return;
        }
        if let Some((number, text)) = self.steers.pop_front() {
            ctx.transcript.user_message(&text);
            ctx.steer_answered(number, Ok(()));
        }
    }

    /// Puts the user messages sent so far into the transcript.
    pub(crate) fn flush_user_messages(&mut self, ctx: &mut Ctx<'_>) {
        for text in std::mem::take(&mut self.pending_user) {
            ctx.transcript.user_message(&text);
        }
    }

    /// Ends a transcript read from somewhere other than a run (a stored session): the user
    /// messages still waiting go in, and every open message is closed.
    pub fn close_transcript(&mut self, ctx: &mut Ctx<'_>) {
        self.flush_user_messages(ctx);
        self.close_all_messages(ctx);
    }
}

impl Protocol for StreamJson {
    fn name(&self) -> &'static str {
        self.dialect.name
    }

    fn reads_stderr(&self) -> bool {
        self.log.is_some()
    }

    fn on_stderr(&mut self, line: &str, ctx: &mut Ctx<'_>) {
        if let (Some(_), Some(read)) = (&self.log, self.dialect.log_reader) {
            read(line, ctx.transcript);
        }
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        if let Some(path) = &self.log {
            ctx.follow_log(path.clone());
        }
        if self.channel == Channel::Session {
            self.initialize(ctx);
            return Ok(());
        }
        let Some(prompt) = self.prompt.clone() else {
            return Ok(());
        };
        // The protocol never echoes the user's input: the transcript gets it from what we sent,
        // once the session has started.
        self.pending_user.push(prompt.clone());
        if self.prompt_on_stdin {
            ctx.send_text(&prompt);
            ctx.close_input();
        }
        if self.writes() {
            self.initialize(ctx);
            let images = std::mem::take(&mut self.images);
            ctx.send(&self.user_line(&prompt, &images));
            self.turn_open = true;
            self.prompt_echo_due = self.dialect.steers_mid_turn;
        }
        Ok(())
    }

    fn set_mode(
        &mut self,
        mode: &agent_api::request::AgentMode,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        if self.channel != Channel::Session || self.switch_modes.is_empty() {
            let capability = agent_api::capabilities::SESSION_MODE_SWITCH.to_string();
            return Err(AgentError::UnsupportedCapability {
                kind: self.name().to_string(),
                capability,
            });
        }
        agent_api::kit::check_mode(self.dialect.agent(), self.switch_modes, mode)?;
        let id = self.request_id();
        ctx.send(
            &json!({ "type": "control_request", "request_id": id, "request": { "subtype": "set_permission_mode", "mode": mode.as_str() } }),
        );
        self.hitl.switch_mode(ctx.transcript, mode, &self.policy);
        Ok(())
    }

    fn send_turn(
        &mut self,
        prompt: &agent_api::Prompt,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        if self.channel != Channel::Session {
            return Err(AgentError::no_more_turns(self.dialect.name));
        }
        if !prompt.images.is_empty() && !self.dialect.takes_images {
            return Err(AgentError::InvalidRequest {
                reason: "this agent's user messages carry no images".into(),
            });
        }
        let images = ImageData::read_all(prompt)?;
        // Each turn reports its own outcome and usage; how result texts are read stays.
        self.outcome = Outcome::for_dialect(&self.dialect);
        self.pending_user.push(prompt.text.clone());
        ctx.send(&self.user_line(&prompt.text, &images));
        self.turn_open = true;
        self.prompt_echo_due = self.dialect.steers_mid_turn;
        Ok(())
    }

    fn steer(
        &mut self,
        prompt: &agent_api::Prompt,
        ctx: &mut Ctx<'_>,
    ) -> Result<agent_api::kit::Steering, AgentError> {
        if !self.dialect.steers_mid_turn || !self.writes() {
            return Err(AgentError::UnsupportedCapability {
                kind: self.dialect.agent().to_string(),
                capability: agent_api::capabilities::CONTROL_STEER.into(),
            });
        }
        if !self.turn_open {
            return Err(AgentError::NoTurnRunning);
        }
        if !prompt.images.is_empty() && !self.dialect.takes_images {
            return Err(AgentError::InvalidRequest {
                reason: "this agent's user messages carry no images".into(),
            });
        }
        let images = ImageData::read_all(prompt)?;
        ctx.send(&self.user_line(&prompt.text, &images));
        // Taken when it comes back (`isReplay`): then it goes in the transcript, where the
        // agent read it.
        self.steers_sent += 1;
        self.steers
            .push_back((self.steers_sent, prompt.text.clone()));
        Ok(agent_api::kit::Steering::Awaiting(self.steers_sent))
    }

    fn on_line(&mut self, line: &[u8], ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        // The hot path: stream events (one per delta) are parsed straight into their type.
        if stream::looks_like_stream_event(line) {
            if let Some(event) = parse_typed::<stream::StreamLine>(line) {
                self.flush_user_messages(ctx);
                self.outcome.turn_goes_on(ctx);
                return self.on_stream_event(event, ctx);
            }
        }
        self.on_message(parse_value(line)?, ctx)
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let kind = type_of(&message)?;
        if !matches!(kind, "system" | "control_response") {
            // The turn is under way without an init (or before it): the input goes first.
            self.flush_user_messages(ctx);
        }
        if matches!(kind, "assistant" | "user") {
            self.outcome.turn_goes_on(ctx);
        }
        match kind {
            "system" => self.on_system(&message, ctx),
            "stream_event" => self.on_stream_value(message, ctx),
            "assistant" => self.on_assistant(&message, ctx),
            "user" if message.get("isReplay").and_then(Value::as_bool) == Some(true) => {
                self.on_echo(ctx);
                Ok(())
            }
            "user" => self.on_user(&message, ctx),
            "result" => self.on_result(&message, ctx),
            "control_request" => self.on_control_request(&message, ctx),
            "control_response" => self.on_control_response(&message, ctx),
            "control_cancel_request" => self.on_control_cancel(&message, ctx),
            other => self.on_other(other, &message, ctx),
        }
    }

    fn on_recorded_send(&mut self, message: Value, ctx: &mut Ctx<'_>) {
        match message.get("type").and_then(Value::as_str) {
            Some("user") => {
                let content = message.pointer("/message/content");
                let text = match content {
                    Some(Value::String(text)) => text.clone(),
                    other => tools::output_text(other).0,
                };
                self.pending_user.push(text);
            }
            Some("control_response") => self.on_recorded_response(&message, ctx),
            Some("control_request") => {
                let subtype = message
                    .pointer("/request/subtype")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown");
                if subtype == "interrupt" {
                    ctx.transcript.status("interrupt_requested", None);
                }
            }
            _ => {}
        }
    }

    fn on_control(&mut self, command: ControlCommand, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        match command {
            ControlCommand::Permission { id, decision } => {
                self.decide_permission(&id, decision, ctx)
            }
            ControlCommand::Question { id, answer } => self.answer_question(&id, answer, ctx),
            other => Err(AgentError::InvalidRequest {
                reason: format!("unsupported control command: {other}"),
            }),
        }
    }

    fn interrupt(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.writes() || !self.dialect.control_messages {
            return false;
        }
        let id = self.request_id();
        ctx.send(&json!({ "type": "control_request", "request_id": id, "request": { "subtype": "interrupt" } }));
        true
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.flush_user_messages(ctx);
        self.close_all_messages(ctx);
        let result = self.outcome.finish(exit, self.bypass_requested);
        self.outcome.settle(&result, ctx);
        result
    }
}

impl std::fmt::Debug for StreamJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamJson")
            .field("dialect", &self.dialect.name)
            .finish_non_exhaustive()
    }
}
