//! What a backend writes: the [`Protocol`] trait, the [`Ctx`] its methods get, and the
//! [`ProtocolHarness`] to unit-test one.

use serde_json::Value;

use super::stderr::StderrCapture;
use crate::pipeline::transcript::Transcript;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::request::Prompt;
use crate::vocabulary::run::{ControlCommand, RunCompletion};

/// Why a native message could not be converted; becomes an `agent.unparsed` event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unparsed(pub String);

impl From<serde_json::Error> for Unparsed {
    /// Keeps the error's category and position only: serde's own messages quote native values
    /// (`invalid type: string "…"`), which must not reach an event.
    fn from(e: serde_json::Error) -> Self {
        Unparsed(describe_json_error(&e))
    }
}

/// A safe description of a JSON error: its category and, for syntax errors, where it was.
pub fn describe_json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Io => "I/O error while reading JSON".to_string(),
        Category::Syntax => format!(
            "JSON syntax error at line {} column {}",
            e.line(),
            e.column()
        ),
        Category::Eof => "JSON ends too early".to_string(),
        Category::Data => "JSON does not have the expected shape".to_string(),
    }
}

/// What a backend writes: the stateful converter of one agent's native protocol.
///
/// Every method gets a [`Ctx`] to describe events to the transcript and to send messages to
/// the agent's stdin. Methods are synchronous: sending only queues.
pub trait Protocol: Send + 'static {
    /// Parser name used as `location` in `agent.unparsed` events.
    fn name(&self) -> &'static str;

    /// Called once before the first line: send the opening messages (initialize, the prompt).
    ///
    /// It need not announce the session: call `ctx.transcript.session_started(metadata)` when the
    /// agent says its session began (usually on its first line, with what it reports: model, tools,
    /// its id through `set_native_session_id` first), here only when the protocol knows that
    /// without the agent. Whatever comes first otherwise, the transcript opens with a synthetic
    /// `session.started` (`source = daemon`), so every run starts with exactly one; a later call
    /// to `session_started` is then ignored (the transcript's tests hold it to this).
    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let _ = ctx;
        Ok(())
    }

    /// Whether the protocol reads the agent's stderr as it comes ([`Protocol::on_stderr`]).
    /// Most agents say nothing there that events need, so the default is no.
    fn reads_stderr(&self) -> bool {
        false
    }

    /// One line of the agent's stderr, as it comes (cut to 2 KiB, secrets masked; lines may be
    /// skipped when many come at once), for a protocol whose agent reports there only what the
    /// run should show, such as its retries; also each line of a log it follows
    /// ([`Ctx::follow_log`]). Never copy it into an event: describe what it says. A replay with a
    /// recorded stderr calls it too.
    fn on_stderr(&mut self, line: &str, ctx: &mut Ctx<'_>) {
        let _ = (line, ctx);
    }

    /// One native line from the agent's stdout (valid UTF-8, not blank), as bytes.
    ///
    /// The default parses a `Value` and calls [`Protocol::on_message`]. A backend on the hot
    /// path overrides it to deserialize straight into its own message type (see
    /// [`parse_typed`]) and falls back to `on_message` only for lines its types do not take,
    /// so that no `Value` is built for the lines that make up most of a run.
    fn on_line(&mut self, line: &[u8], ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let message = parse_value(line)?;
        self.on_message(message, ctx)
    }

    /// One native JSON message from the agent's stdout (the `Value` path of [`Protocol::on_line`]).
    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed>;

    /// One message the client sent, in a recorded two-way session (replay only).
    fn on_recorded_send(&mut self, message: Value, ctx: &mut Ctx<'_>) {
        let _ = (message, ctx);
    }

    /// A caller's control command. The default knows no permission or question ids.
    fn on_control(&mut self, command: ControlCommand, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let _ = ctx;
        Err(match command {
            ControlCommand::Permission { id, .. } => AgentError::UnknownPermission { id },
            ControlCommand::Question { id, .. } => AgentError::UnknownQuestion { id },
            ControlCommand::Steer { .. } => AgentError::UnsupportedCapability {
                kind: self.name().to_string(),
                capability: agent_api_capabilities::CONTROL_STEER.into(),
            },
        })
    }

    /// A session's next turn (`spec/run-protocol.md` §8): send `prompt` to the live agent. The
    /// protocol reports the native end of the turn with [`Ctx::end_turn`]. The default refuses:
    /// a protocol built for one run takes no more turns.
    fn send_turn(&mut self, prompt: &Prompt, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let _ = (prompt, ctx);
        Err(AgentError::UnsupportedCapability {
            kind: self.name().to_string(),
            capability: agent_api_capabilities::SESSION_WARM.into(),
        })
    }

    /// A warm session's mode for its next turns (`agent_api.session.mode_switch`), between
    /// turns: send the agent's own switch, after refusing a mode it does not offer
    /// ([`crate::vocabulary::modes::check_mode`]). The default refuses: the protocol cannot switch.
    fn set_mode(
        &mut self,
        mode: &crate::vocabulary::modes::AgentMode,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        let _ = (mode, ctx);
        Err(AgentError::UnsupportedCapability {
            kind: self.name().to_string(),
            capability: agent_api_capabilities::SESSION_MODE_SWITCH.into(),
        })
    }

    /// Steers the running turn ([`crate::RunControl::steer`], `agent_api.control.steer`): send
    /// `prompt` to the agent by its own means, as part of the turn in progress, and put it in the
    /// transcript as a user message of that turn (unless the agent reports it natively). Return
    /// [`Steering::Taken`] when sending it is all the agent needs, or [`Steering::Awaiting`] with
    /// a number of the protocol's choosing when the agent acknowledges it later (then report that
    /// with [`Ctx::steer_answered`]); refuse with [`AgentError::NoTurnRunning`] between turns.
    /// The default refuses: the protocol cannot be steered (never emulate it by cancelling).
    fn steer(&mut self, prompt: &Prompt, ctx: &mut Ctx<'_>) -> Result<Steering, AgentError> {
        let _ = (prompt, ctx);
        Err(AgentError::UnsupportedCapability {
            kind: self.name().to_string(),
            capability: agent_api_capabilities::CONTROL_STEER.into(),
        })
    }

    /// Sends the agent's soft interrupt, if it has one; returns whether it did. The driver
    /// terminates the process group after the cancel grace period either way.
    fn interrupt(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let _ = ctx;
        false
    }

    /// The agent's output ended and its process exited: report how the run went.
    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError>;
}

/// How a protocol took a steering message ([`Protocol::steer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Steering {
    /// The agent has it: `RunControl::steer` returns now.
    Taken,
    /// The agent acknowledges it later: `RunControl::steer` waits for [`Ctx::steer_answered`]
    /// with this number (or fails with `TurnEndedBeforeSteer` when the turn ends first).
    Awaiting(u64),
}

/// Parses a native line into a `Value`; a line that is not JSON becomes [`Unparsed`].
pub fn parse_value(line: &[u8]) -> Result<Value, Unparsed> {
    let parsed = match std::str::from_utf8(line) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(line),
    };
    parsed.map_err(|e| Unparsed(format!("not a JSON line: {}", describe_json_error(&e))))
}

/// The typed entry of a backend's [`Protocol::on_line`]: parses `line` straight into the
/// backend's own message type `T`. `Err` hands back nothing but the fact: the caller then goes
/// through [`parse_value`] and its `Value` path, which knows how to report the line. `T` may
/// borrow from the line (`&str`, `Cow<str>` with `#[serde(borrow)]`): an id only looked up
/// then costs no allocation.
pub fn parse_typed<'line, T: serde::Deserialize<'line>>(line: &'line [u8]) -> Option<T> {
    // One check of the whole line: parsed from bytes, serde checks the UTF-8 of every string
    // again, which costs several times more than this (a line the driver hands over is valid).
    serde_json::from_str(std::str::from_utf8(line).ok()?).ok()
}

/// A string field of a native line, borrowed from the line unless it had escapes (then
/// owned): for ids a protocol only looks up, read with [`parse_typed`] at no allocation. serde's
/// own `Cow<str>` borrows only as a bare field, never inside an `Option`; this does both.
///
/// ```
/// use agent_api::kit::{parse_typed, LineStr};
/// #[derive(serde::Deserialize)]
/// struct Delta<'a> {
///     #[serde(borrow)]
///     id: Option<LineStr<'a>>,
/// }
/// let line = br#"{"id":"msg_1"}"#;
/// let delta: Delta = parse_typed(line).unwrap();
/// assert!(matches!(delta.id.unwrap().0, std::borrow::Cow::Borrowed("msg_1")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineStr<'a>(pub std::borrow::Cow<'a, str>);

impl LineStr<'_> {
    /// The string, owned.
    pub fn into_owned(self) -> String {
        self.0.into_owned()
    }
}

impl std::ops::Deref for LineStr<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for LineStr<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Borrowing;
        impl<'de> serde::de::Visitor<'de> for Borrowing {
            type Value = std::borrow::Cow<'de, str>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(std::borrow::Cow::Borrowed(v))
            }

            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(std::borrow::Cow::Owned(v.to_owned()))
            }

            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(std::borrow::Cow::Owned(v))
            }
        }
        deserializer.deserialize_str(Borrowing).map(LineStr)
    }
}

/// What a [`Protocol`] method may do besides describing events.
pub struct Ctx<'a> {
    /// The run's transcript: describe what happened here.
    pub transcript: &'a mut Transcript,
    outbox: &'a mut Outbox,
}

/// What the protocol queued during one call, for the driver to carry out.
#[derive(Default)]
pub(super) struct Outbox {
    pub(super) lines: Vec<Vec<u8>>,
    pub(super) close_input: bool,
    pub(super) shutdown: bool,
    pub(super) turn_end: Option<Result<RunCompletion, AgentError>>,
    pub(super) follow_log: Option<std::path::PathBuf>,
    pub(super) steer_answers: Vec<(u64, Result<(), AgentError>)>,
}

impl Outbox {
    /// Whether the call queued nothing (most lines): the driver then skips moving it.
    pub(super) fn is_empty(&self) -> bool {
        self.lines.is_empty()
            && !self.close_input
            && !self.shutdown
            && self.turn_end.is_none()
            && self.follow_log.is_none()
            && self.steer_answers.is_empty()
    }
}

impl<'a> Ctx<'a> {
    pub(super) fn new(transcript: &'a mut Transcript, outbox: &'a mut Outbox) -> Self {
        Self { transcript, outbox }
    }

    /// Queues one JSON message, newline-terminated, for the agent's stdin.
    pub fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).expect("a Value always serializes");
        line.push(b'\n');
        self.outbox.lines.push(line);
    }

    /// Queues `text` as it is for the agent's stdin: a prompt a one-way CLI reads from stdin,
    /// kept off its command line (which every local user can read in `/proc/<pid>/cmdline`).
    pub fn send_text(&mut self, text: &str) {
        self.outbox.lines.push(text.as_bytes().to_vec());
    }

    /// A one-way CLI's whole input: `prompt` on its stdin ([`Ctx::send_text`]), which is then
    /// closed. `None` (a replay, or a start already made) sends and closes nothing.
    pub fn send_prompt(&mut self, prompt: Option<String>) {
        if let Some(prompt) = prompt {
            self.send_text(&prompt);
            self.close_input();
        }
    }

    /// Closes the agent's stdin once queued messages are written.
    pub fn close_input(&mut self) {
        self.outbox.close_input = true;
    }

    /// The run is done: close stdin, and terminate the process group if it has not exited
    /// after the shutdown grace period.
    pub fn shutdown(&mut self) {
        self.outbox.close_input = true;
        self.outbox.shutdown = true;
    }

    /// Follows a log file the agent appends to, for an agent that reports there only what the
    /// run should show (its retry notices, say): each line added from now on reaches
    /// [`Protocol::on_stderr`] like a stderr line (cut, masked, skipped when many come at once).
    /// A file that does not exist yet is read from its start once it appears. One file per run:
    /// a later call follows the new file instead. It works only where the file is on this machine
    /// (the local and sandbox launchers), and only for a protocol that reads stderr.
    pub fn follow_log(&mut self, path: std::path::PathBuf) {
        self.outbox.follow_log = Some(path);
    }

    /// In a session: the agent ended the current turn, with this outcome. The driver writes the
    /// turn's closing delimiter and resolves its completion; a completion's empty final text and
    /// native session id are filled from this turn's transcript. The first report of a turn wins.
    pub fn end_turn(&mut self, result: Result<RunCompletion, AgentError>) {
        self.outbox.turn_end.get_or_insert(result);
    }

    /// The agent answered the steering message the protocol took as [`Steering::Awaiting`]
    /// `id`: `Ok` once it has it, or why not. An unknown id is ignored.
    pub fn steer_answered(&mut self, id: u64, result: Result<(), AgentError>) {
        self.outbox.steer_answers.push((id, result));
    }
}

/// Drives a [`Protocol`] by hand, for unit tests of a converter: hand it messages through
/// [`ProtocolHarness::ctx`], then read the transcript's events and what it sent to the agent.
///
/// ```
/// use agent_api::kit::ProtocolHarness;
/// let mut harness = ProtocolHarness::new();
/// harness.ctx().send(&serde_json::json!({"type": "interrupt"}));
/// assert_eq!(harness.take_sent(), vec![serde_json::json!({"type": "interrupt"})]);
/// ```
pub struct ProtocolHarness {
    /// The transcript the protocol describes events to.
    pub transcript: Transcript,
    outbox: Outbox,
}

impl Default for ProtocolHarness {
    fn default() -> Self {
        Self::new()
    }
}

impl ProtocolHarness {
    /// A harness with an empty transcript.
    pub fn new() -> Self {
        Self {
            transcript: Transcript::new("sess_harness".into(), false),
            outbox: Outbox::default(),
        }
    }

    /// A context to pass to the protocol's methods.
    pub fn ctx(&mut self) -> Ctx<'_> {
        Ctx {
            transcript: &mut self.transcript,
            outbox: &mut self.outbox,
        }
    }

    /// The messages the protocol queued for the agent's stdin since the last call.
    pub fn take_sent(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.outbox.lines)
            .iter()
            .map(|line| serde_json::from_slice(line).expect("sent lines are JSON"))
            .collect()
    }

    /// The bytes the protocol queued for the agent's stdin since the last call, as text: for a
    /// one-way CLI that reads its prompt from stdin ([`Ctx::send_text`]).
    pub fn take_sent_text(&mut self) -> String {
        String::from_utf8_lossy(&std::mem::take(&mut self.outbox.lines).concat()).into_owned()
    }

    /// How the protocol ended the session's current turn ([`Ctx::end_turn`]), if it did since
    /// the last call.
    pub fn take_turn_end(&mut self) -> Option<Result<RunCompletion, AgentError>> {
        self.outbox.turn_end.take()
    }

    /// The steering answers the protocol reported ([`Ctx::steer_answered`]) since the last call.
    pub fn take_steer_answers(&mut self) -> Vec<(u64, Result<(), AgentError>)> {
        std::mem::take(&mut self.outbox.steer_answers)
    }

    /// Whether the protocol closed the agent's stdin (or asked for shutdown).
    pub fn input_closed(&self) -> bool {
        self.outbox.close_input
    }
}

/// How the agent's side of a run ended, for [`Protocol::finish`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ExitInfo {
    /// Exit code, when the process exited normally.
    pub exit_code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
    /// Its bounded stderr (never to be copied into wrapper events or error messages).
    pub stderr: StderrCapture,
    /// How many native lines were skipped for exceeding the line cap.
    pub oversized_lines: u64,
    /// The longest of them, in bytes (0 when none was).
    pub longest_oversized_line: u64,
    /// The line cap the run read with, in bytes.
    pub line_cap: usize,
    /// Whether the driver stopped the run (cancel, timeout, drop).
    pub stopped_by_daemon: bool,
}

impl ExitInfo {
    /// Whether the process exited with code 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// The error for a process that ended before its protocol finished. An agent that exited
    /// cleanly after a line over the cap was skipped lost what that line said (its answer, a
    /// structured answer, its result): that, not the exit, is the reason.
    pub fn early_exit_error(&self) -> AgentError {
        if self.oversized_lines > 0 && self.success() {
            return AgentError::LineOverCap {
                bytes: self.longest_oversized_line,
                cap: self.line_cap as u64,
            };
        }
        AgentError::ProcessExited {
            exit_code: self.exit_code,
            signal: self.signal,
            stderr: self.stderr.last_lines(),
        }
    }
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ProtocolHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtocolHarness").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Ids<'a> {
        #[serde(borrow)]
        plain: Option<LineStr<'a>>,
        #[serde(borrow)]
        escaped: Option<LineStr<'a>>,
        #[serde(borrow)]
        absent: Option<LineStr<'a>>,
    }

    #[test]
    fn a_line_string_borrows_plain_text_and_owns_unescaped_text() {
        let line = br#"{"plain":"msg_1","escaped":"a\"b\u00e9"}"#;
        let ids: Ids = parse_typed(line).unwrap();
        assert!(matches!(
            ids.plain.unwrap().0,
            std::borrow::Cow::Borrowed("msg_1")
        ));
        let escaped = ids.escaped.unwrap();
        assert!(matches!(escaped.0, std::borrow::Cow::Owned(_)));
        assert_eq!(&*escaped, "a\"bé");
        assert!(ids.absent.is_none());
        assert!(
            parse_typed::<Ids>(br#"{"plain":5}"#).is_none(),
            "not a string: the typed parse fails"
        );
    }
}
