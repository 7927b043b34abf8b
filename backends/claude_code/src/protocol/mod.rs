//! [`ClaudeProtocol`]: the converter of Claude Code's stream-json output (and, in the two-way
//! mode, its control protocol) to the universal transcript.
//!
//! One struct holds the state; its parts live in sibling modules, one idea each:
//! `messages` (assistant and user messages), `stream` (the `stream_event` SSE deltas),
//! `system` (system and other informational lines), `control` (permission and question
//! requests, interrupts) and `outcome` (turn results, usage, typed errors).

mod control;
mod messages;
mod outcome;
mod stream;
mod system;

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

use crate::tools::ToolCallInfo;
pub use control::tool_permission;
use control::{PendingAsk, PendingPermission};
use messages::OpenMessage;
use outcome::Outcome;
pub use outcome::ResultError;

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

/// The stateful converter of one Claude Code run.
pub struct ClaudeProtocol {
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
    /// Whether the CLI speaks the control protocol on stdin (`initialize`, `interrupt`); a CLI
    /// that reads only user messages (Amp's `--stream-json-input`) does not.
    control_messages: bool,
    /// One-way: `start` writes the prompt to stdin and closes it.
    prompt_on_stdin: bool,
    /// The first prompt's images, sent with it as image blocks.
    images: Vec<ImageData>,
    /// Whether user messages may carry image blocks (Claude Code's do; another CLI speaking
    /// this protocol refuses a turn with images).
    takes_images: bool,
    /// A log the CLI reports in (Qwen Code's debug log), and what reads each of its lines.
    log: Option<(std::path::PathBuf, LogReader)>,
    outcome: Outcome,
}

/// Reads one line of the log a CLI reports in ([`ClaudeProtocol::with_log`]) into the transcript.
pub type LogReader = fn(&str, &mut agent_api::kit::transcript::Transcript);

impl ClaudeProtocol {
    fn new(channel: Channel, prompt: Option<String>, policy: PermissionPolicy, bypass_requested: bool) -> Self {
        let hitl = if channel == Channel::Replay { Hitl::replay() } else { Hitl::live(policy) };
        Self {
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
            control_messages: true,
            prompt_on_stdin: false,
            images: Vec::new(),
            takes_images: false,
            log: None,
            outcome: Outcome::default(),
        }
    }

    /// A live run over the two-way control channel: `start` sends `initialize` and `prompt`.
    pub fn control(prompt: impl Into<String>, policy: PermissionPolicy, bypass_requested: bool) -> Self {
        Self::new(Channel::Control, Some(prompt.into()), policy, bypass_requested)
    }

    /// Claude Code's user messages carry images: `images` go with the first prompt, and each
    /// turn's own with it.
    pub fn with_images(mut self, images: Vec<ImageData>) -> Self {
        self.images = images;
        self.takes_images = true;
        self
    }

    /// A live session over the two-way control channel: `start` sends `initialize`, and each
    /// turn its user message.
    pub fn session(policy: PermissionPolicy, bypass_requested: bool) -> Self {
        Self::new(Channel::Session, None, policy, bypass_requested)
    }

    /// A live one-way run (`-p PROMPT`): the prompt is on the command line.
    pub fn print(prompt: impl Into<String>, bypass_requested: bool) -> Self {
        Self::new(Channel::Print, Some(prompt.into()), PermissionPolicy::Ask, bypass_requested)
    }

    /// A live one-way run whose CLI reads the prompt from stdin (`claude -p` without a prompt
    /// argument): `start` writes it and closes stdin, so it never shows in the process list.
    pub fn print_from_stdin(prompt: impl Into<String>, bypass_requested: bool) -> Self {
        Self { prompt_on_stdin: true, ..Self::print(prompt, bypass_requested) }
    }

    /// A replay of a recording (one-way stdout or a two-way session).
    pub fn replaying() -> Self {
        Self::new(Channel::Replay, None, PermissionPolicy::Ask, false)
    }

    /// Another CLI speaking this protocol (Qwen Code) reports some failures as a successful
    /// `result` whose text says so: `read` turns such a text into the turn's typed error (one
    /// error event, and the run's error when it is the last turn).
    pub fn with_result_error(mut self, read: ResultError) -> Self {
        self.outcome.result_error = Some(read);
        self
    }

    /// Another CLI speaking this protocol (Qwen Code) reports some things only in a log file:
    /// the run follows `path` from its start, and `read` reads each line added (never copy a
    /// line into an event: describe what it says).
    pub fn with_log(mut self, path: std::path::PathBuf, read: LogReader) -> Self {
        self.log = Some((path, read));
        self
    }

    /// Another CLI speaking this protocol (Amp's `--stream-json-input`) reads user messages on
    /// stdin and nothing else: no `initialize`, no control `interrupt` (a cancel terminates the
    /// process group), and each user message's content is a list of text blocks.
    pub fn plain_input(mut self) -> Self {
        self.control_messages = false;
        self
    }

    /// Whether the protocol may write to the CLI.
    fn writes(&self) -> bool {
        matches!(self.channel, Channel::Control | Channel::Session)
    }

    fn initialize(&mut self, ctx: &mut Ctx<'_>) {
        if !self.control_messages {
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
        let content = if images.is_empty() && self.control_messages {
            json!(text)
        } else {
            let mut blocks = vec![json!({ "type": "text", "text": text })];
            blocks.extend(images.iter().map(|image| {
                json!({ "type": "image", "source": { "type": "base64", "media_type": image.file.media_type, "data": image.base64 } })
            }));
            Value::Array(blocks)
        };
        if !self.control_messages {
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
    message.get("type").and_then(Value::as_str).ok_or_else(|| Unparsed("a native message has no string `type`".into()))
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

impl ClaudeProtocol {
    /// Puts the user messages sent so far into the transcript.
    pub(crate) fn flush_user_messages(&mut self, ctx: &mut Ctx<'_>) {
        for text in std::mem::take(&mut self.pending_user) {
            ctx.transcript.user_message(&text);
        }
    }
}

impl Protocol for ClaudeProtocol {
    fn name(&self) -> &'static str {
        "claude_code.stream_json"
    }

    fn reads_stderr(&self) -> bool {
        self.log.is_some()
    }

    fn on_stderr(&mut self, line: &str, ctx: &mut Ctx<'_>) {
        if let Some((_, read)) = &self.log {
            read(line, ctx.transcript);
        }
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        if let Some((path, _)) = &self.log {
            ctx.follow_log(path.clone());
        }
        if self.channel == Channel::Session {
            self.initialize(ctx);
            return Ok(());
        }
        let Some(prompt) = self.prompt.clone() else { return Ok(()) };
        // Claude Code never echoes the user's input: the transcript gets it from what we sent,
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
        }
        Ok(())
    }

    fn send_turn(&mut self, prompt: &agent_api::Prompt, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        if self.channel != Channel::Session {
            return Err(AgentError::InvalidRequest { reason: "this Claude Code run takes no more turns".into() });
        }
        if !prompt.images.is_empty() && !self.takes_images {
            return Err(AgentError::InvalidRequest { reason: "this agent's user messages carry no images".into() });
        }
        let images = ImageData::read_all(prompt)?;
        // Each turn reports its own outcome and usage; how result texts are read stays.
        let result_error = self.outcome.result_error;
        self.outcome = Outcome::default();
        self.outcome.result_error = result_error;
        self.pending_user.push(prompt.text.clone());
        ctx.send(&self.user_line(&prompt.text, &images));
        Ok(())
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
                    other => crate::tools::output_text(other).0,
                };
                self.pending_user.push(text);
            }
            Some("control_response") => self.on_recorded_response(&message, ctx),
            Some("control_request") => {
                let subtype = message.pointer("/request/subtype").and_then(Value::as_str).unwrap_or("unknown");
                if subtype == "interrupt" {
                    ctx.transcript.status("interrupt_requested", None);
                }
            }
            _ => {}
        }
    }

    fn on_control(&mut self, command: ControlCommand, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        match command {
            ControlCommand::Permission { id, decision } => self.decide_permission(&id, decision, ctx),
            ControlCommand::Question { id, answer } => self.answer_question(&id, answer, ctx),
            other => Err(AgentError::InvalidRequest { reason: format!("unsupported control command {other:?}") }),
        }
    }

    fn interrupt(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.writes() || !self.control_messages {
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

impl std::fmt::Debug for ClaudeProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaudeProtocol").finish_non_exhaustive()
    }
}
