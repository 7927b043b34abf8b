//! The run driver: pumps native lines through a [`Protocol`] into the transcript and out to the
//! caller, within a byte budget, with timeout, cancellation and process-group cleanup.
//!
//! The rules it guarantees (`spec/run-protocol.md`): every run resolves its completion exactly
//! once, after its last event; a failed run's stream ends with exactly one terminal error whose
//! message is the completion error's; cancel wins ties; nothing of the process group survives.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::budget::{self, BatchSender, DEFAULT_BUFFER_BUDGET, EVENTS_PER_BATCH};
use super::lines::{Line, DEFAULT_LINE_CAP};
use super::process::signal_group;
use super::protocol::Outbox;
use super::stderr::StderrCapture;
use super::timeouts::{expiry, Clock, TimeoutLimits};
use super::transport::{wait_exit, Lifecycle, StdinQueue};
use crate::capability::CapabilitySet;
use crate::error::AgentError;
use crate::kind::AgentKind;
use crate::request::RunRequest;
use crate::run::{ControlMessage, RunCompletion, RunControl, RunGuard, RunHandle};
use crate::universal::{SessionEnd, SessionEndReason, TerminatedBy, Transcript, UniversalEvent};

pub use super::protocol::{describe_json_error, parse_typed, parse_value, Ctx, ExitInfo, Protocol, ProtocolHarness, Unparsed};
pub use super::transport::{line_source, AgentPipes, LineSource, SourceItem, Transport};
pub use session::start_session;

mod batches;
mod caller_wait;
mod session;

/// Default limit of replies waiting for the agent to read its stdin: 1 MiB.
pub const DEFAULT_INPUT_LIMIT: usize = 1024 * 1024;

/// Tunables of one run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunSettings {
    /// The backend's kind.
    pub agent_kind: AgentKind,
    /// Fill `raw` in universal events.
    pub include_raw: bool,
    /// Overall timeout. `Duration::MAX` (or anything past the clock's range) means none.
    pub timeout: Option<Duration>,
    /// Until the agent's first message ([`RunRequest::startup_timeout`]).
    pub startup_timeout: Option<Duration>,
    /// Without output while a run or turn is in progress ([`RunRequest::idle_timeout`]).
    pub idle_timeout: Option<Duration>,
    /// Per turn ([`RunRequest::turn_timeout`]).
    pub turn_timeout: Option<Duration>,
    /// Turn, token and cost limits, checked against each completion's usage.
    pub limits: crate::request::Limits,
    /// Between the soft interrupt and SIGTERM to the group.
    pub cancel_grace: Duration,
    /// Between SIGTERM and SIGKILL.
    pub term_grace: Duration,
    /// Between [`Ctx::shutdown`] and SIGTERM, if the agent has not exited.
    pub shutdown_grace: Duration,
    /// After the process exits, how long its output may still drain.
    pub drain_grace: Duration,
    /// After the agent closes its output, how long it may live on before the run fails
    /// ([`AgentError::OutputClosed`]) and its group is killed.
    pub output_closed_grace: Duration,
    /// Whether tool events carry the tools facet.
    pub tools_structured: bool,
    /// Largest native line kept; longer ones are skipped and reported.
    pub line_cap: usize,
    /// Bytes of events that may wait for the caller; when they do, the run stops reading the
    /// agent's output and the agent blocks on its pipe.
    pub buffer_budget: usize,
    /// Bytes of replies that may wait for the agent to read its stdin before the run fails
    /// ([`AgentError::InputBlocked`]).
    pub input_limit: usize,
    /// The caller's token that cancels the run (see [`RunRequest::with_cancellation`]).
    pub cancellation: Option<CancellationToken>,
    /// How long permission requests and questions wait for the caller, and what then.
    pub caller_wait: crate::CallerWait,
    /// The request's output schema: a successful run's answer must fit it
    /// ([`crate::structured::conform`]).
    pub output_schema: Option<serde_json::Value>,
    /// What must live exactly as long as the run (the caller-tools MCP server, a config file
    /// holding a secret): dropped when the driver ends, however the run ends.
    pub held: Vec<Arc<dyn std::any::Any + Send + Sync>>,
}

impl RunSettings {
    /// Defaults for a backend: 16 MiB line cap, 1 MiB buffer budget, 3 s cancel grace, 2 s term grace.
    pub fn new(agent_kind: AgentKind) -> Self {
        Self {
            agent_kind,
            include_raw: false,
            timeout: None,
            startup_timeout: None,
            idle_timeout: None,
            turn_timeout: None,
            limits: crate::request::Limits::default(),
            cancel_grace: Duration::from_secs(3),
            term_grace: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(5),
            drain_grace: Duration::from_secs(2),
            output_closed_grace: Duration::from_secs(5),
            tools_structured: false,
            line_cap: DEFAULT_LINE_CAP,
            buffer_budget: DEFAULT_BUFFER_BUDGET,
            input_limit: DEFAULT_INPUT_LIMIT,
            cancellation: None,
            caller_wait: crate::CallerWait::default(),
            output_schema: None,
            held: Vec::new(),
        }
    }

    /// Defaults plus what the request sets (raw payloads, timeout, buffer budget, cancellation)
    /// and, from the backend's capabilities, whether tool events carry the tools facet.
    pub fn for_request(agent_kind: AgentKind, request: &RunRequest, capabilities: &CapabilitySet) -> Self {
        let mut settings = Self::new(agent_kind);
        settings.include_raw = request.include_raw;
        settings.timeout = request.timeout;
        settings.startup_timeout = request.startup_timeout;
        settings.idle_timeout = request.idle_timeout;
        settings.turn_timeout = request.turn_timeout;
        settings.limits = request.limits;
        settings.tools_structured = capabilities.contains(agent_api_capabilities::TOOLS_STRUCTURED_V1);
        settings.cancellation = request.cancellation.clone();
        settings.caller_wait = request.caller_wait;
        settings.output_schema = request.portable.output_schema.clone();
        if let Some(budget) = request.buffer_budget {
            settings.buffer_budget = budget;
        }
        settings
    }

    /// Keeps `thing`, if any, alive until the run ends ([`RunSettings::held`]).
    pub fn hold<T: std::any::Any + Send + Sync>(&mut self, thing: Option<T>) {
        if let Some(thing) = thing {
            self.held.push(Arc::new(thing));
        }
    }
}

/// `now + d`, saturating: a deadline past the clock's range is as good as none.
fn deadline_after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d).unwrap_or_else(|| now + Duration::from_secs(10 * 365 * 24 * 3600))
}

/// Starts driving a run on the current tokio runtime and returns its handle.
pub fn start_run(settings: RunSettings, transport: Transport, protocol: Box<dyn Protocol>) -> RunHandle {
    let (events_tx, events_rx) = budget::channel(settings.buffer_budget);
    let (completion_tx, completion_rx) = oneshot::channel();
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let cancel_requested = Arc::new(AtomicBool::new(false));
    let raw_wanted = Arc::new(AtomicBool::new(settings.include_raw));
    let abandoned = CancellationToken::new();
    let guard = Arc::new(RunGuard { abandoned: abandoned.clone(), raw_wanted: raw_wanted.clone() });
    let control = RunControl::new(control_tx, cancel_requested.clone());
    if let Some(token) = settings.cancellation.clone() {
        tokio::spawn(cancel_on(token, control.clone()));
    }
    let handle = RunHandle::new(settings.agent_kind.clone(), settings.tools_structured, events_rx, completion_rx, control, guard);
    let (mut core, io) = Core::new(settings, transport, protocol, raw_wanted);
    core.events_tx = Some(events_tx);
    let inputs = Inputs { io, control_rx, cancel_requested, abandoned };
    tokio::spawn(core.drive(inputs, completion_tx));
    handle
}

/// Cancels the run when the caller's token is cancelled; gone once the run has finished.
async fn cancel_on(token: CancellationToken, control: RunControl) {
    tokio::select! {
        _ = token.cancelled() => control.cancel(),
        _ = control.finished() => {}
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Cancelled,
    TimedOut,
    Abandoned,
}

/// The agent's side: its output, its process (or task) and its stderr.
struct Io {
    source: LineSource,
    lifecycle: Lifecycle,
    stderr_task: Option<JoinHandle<StderrCapture>>,
}

/// What the driver's loop waits on.
struct Inputs {
    io: Io,
    control_rx: mpsc::UnboundedReceiver<ControlMessage>,
    cancel_requested: Arc<AtomicBool>,
    abandoned: CancellationToken,
}

/// A batch of events with its weight in bytes.
struct Pending {
    events: Vec<UniversalEvent>,
    weight: usize,
}

struct Core {
    settings: RunSettings,
    protocol: Box<dyn Protocol>,
    transcript: Transcript,
    outbox: Outbox,
    stdin: Option<StdinQueue>,
    events_tx: Option<BatchSender>,
    /// The batch taken from the transcript that waits for room in the budget; while it waits
    /// the driver reads no more of the agent's output but still acts on its other inputs.
    pending: Option<Pending>,
    /// Whether the caller's view shows raw payloads (the wrapper view never does).
    raw_wanted: Arc<AtomicBool>,
    /// Bytes of raw payloads in the batch being built (each counted once, however many events share it).
    raw_bytes: usize,
    pgid: Option<i32>,
    task_abort: Option<tokio::task::AbortHandle>,
    stop: Option<Stop>,
    escalate_at: Option<Instant>,
    escalation_stage: u8,
    oversized_lines: u64,
    replay_stderr: StderrCapture,
    /// Why the run fails regardless of what the protocol says; once set, the protocol is not
    /// called again.
    fatal: Option<AgentError>,
    source_done: bool,
    exit: Option<(Option<i32>, Option<i32>)>,
    /// After the process exited: when to stop waiting for output something it started holds open.
    drain_deadline: Option<Instant>,
    /// After the output closed: when to stop waiting for the process to exit.
    closed_deadline: Option<Instant>,
    /// In a session: how the protocol reported the end of the current turn.
    turn_end: Option<Result<RunCompletion, AgentError>>,
    /// Deadlines of the requests that wait for the caller.
    caller_waits: caller_wait::CallerWaits,
    clock: Clock,
}

impl Core {
    /// A driver for `transport` and `protocol`, with no listener yet.
    fn new(settings: RunSettings, transport: Transport, protocol: Box<dyn Protocol>, raw_wanted: Arc<AtomicBool>) -> (Self, Io) {
        let session_id = format!("sess_{}", uuid::Uuid::new_v4().simple());
        let transcript = Transcript::new(session_id, settings.include_raw);
        let Transport { source, stdin, stderr, lifecycle } = transport;
        let stdin = stdin.map(|writer| StdinQueue::spawn(writer, settings.input_limit));
        let stderr_task = stderr.map(|s| tokio::spawn(StderrCapture::read_from(s)));
        let (pgid, task_abort) = match &lifecycle {
            Lifecycle::Process(p) => (Some(p.pgid), None),
            Lifecycle::Task(t) => (None, Some(t.abort_handle())),
            Lifecycle::Recorded(_) | Lifecycle::Finished => (None, None),
        };
        let caller_waits = caller_wait::CallerWaits::new(settings.caller_wait);
        let clock = Clock::new(TimeoutLimits::of_settings(&settings));
        let core = Core {
            clock,
            settings,
            protocol,
            transcript,
            outbox: Outbox::default(),
            stdin,
            events_tx: None,
            pending: None,
            raw_wanted,
            raw_bytes: 0,
            pgid,
            task_abort,
            stop: None,
            escalate_at: None,
            escalation_stage: 0,
            oversized_lines: 0,
            replay_stderr: StderrCapture::default(),
            fatal: None,
            source_done: false,
            exit: None,
            drain_deadline: None,
            closed_deadline: None,
            turn_end: None,
            caller_waits,
        };
        (core, Io { source, lifecycle, stderr_task })
    }

    /// Calls the protocol. A panicking protocol fails the run (typed `Protocol`, with its one
    /// terminal error) instead of taking the driver down; it is not called again.
    fn with_ctx<T>(&mut self, f: impl FnOnce(&mut dyn Protocol, &mut Ctx<'_>) -> T) -> Option<T> {
        if self.fatal.is_some() {
            return None;
        }
        let mut ctx = Ctx::new(&mut self.transcript, &mut self.outbox);
        let protocol = self.protocol.as_mut();
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(protocol, &mut ctx)));
        self.flush_outbox();
        match out {
            Ok(out) => Some(out),
            Err(_) => {
                let reason = format!("the {} converter panicked", self.protocol.name());
                tracing::error!(%reason, "failing the run");
                self.fail(AgentError::Protocol { reason });
                None
            }
        }
    }

    /// Fails the run with `error` (the first such error wins) and kills its processes.
    fn fail(&mut self, error: AgentError) {
        self.fatal.get_or_insert(error);
        self.kill_now();
    }

    fn flush_outbox(&mut self) {
        let outbox = std::mem::take(&mut self.outbox);
        if let Some(stdin) = &self.stdin {
            for line in outbox.lines {
                if let Err(error) = stdin.push(line) {
                    tracing::warn!(%error, "failing the run");
                    self.fail(error);
                    break;
                }
            }
        }
        if outbox.close_input {
            self.stdin = None;
        }
        if outbox.shutdown && self.escalate_at.is_none() {
            self.escalate_at = Some(deadline_after(self.settings.shutdown_grace));
        }
        if let Some(end) = outbox.turn_end {
            self.turn_end.get_or_insert(end);
        }
    }

    fn begin_stop(&mut self, reason: Stop) {
        if self.stop.is_some() {
            return;
        }
        self.stop = Some(reason);
        if reason == Stop::TimedOut {
            self.transcript.set_timed_out();
        }
        let soft = reason != Stop::Abandoned && self.with_ctx(|p, ctx| p.interrupt(ctx)).unwrap_or(false);
        let grace = if soft { self.settings.cancel_grace } else { Duration::ZERO };
        self.escalate_at = Some(deadline_after(grace));
    }

    /// Next step of termination: SIGTERM to the group (and stdin closed), then SIGKILL.
    fn escalate(&mut self) {
        self.stdin = None;
        if let Some(task) = &self.task_abort {
            task.abort();
        }
        if let Some(pgid) = self.pgid {
            let (signal, next) = match self.escalation_stage {
                0 => (libc::SIGTERM, Some(deadline_after(self.settings.term_grace))),
                _ => (libc::SIGKILL, None),
            };
            signal_group(pgid, signal);
            self.escalate_at = next;
        } else {
            self.escalate_at = None;
        }
        self.escalation_stage = self.escalation_stage.saturating_add(1);
    }

    fn kill_now(&mut self) {
        self.escalation_stage = 1;
        self.escalate();
    }

    fn handle(&mut self, item: SourceItem) {
        match item {
            SourceItem::Line(Line::Complete(bytes)) => self.handle_line(bytes),
            SourceItem::Line(Line::Oversize { bytes }) => {
                self.oversized_lines += 1;
                let detail =
                    format!("a native line of {bytes} bytes exceeded the {}-byte line cap and was skipped", self.settings.line_cap);
                self.transcript.daemon_status("native_line_skipped", Some(detail));
            }
            SourceItem::Sent(message) => {
                if self.wants_raw() {
                    self.transcript.set_raw(Some(Arc::new(message.clone())));
                }
                self.with_ctx(|p, ctx| p.on_recorded_send(message, ctx));
                self.transcript.set_raw(None);
            }
            SourceItem::Stderr(line) => self.replay_stderr.push(line.as_bytes()),
            SourceItem::Malformed(error) => self.transcript.unparsed(error, "recording", None),
        }
    }

    fn wants_raw(&self) -> bool {
        self.settings.include_raw && self.raw_wanted.load(Ordering::Relaxed)
    }

    fn handle_line(&mut self, bytes: Vec<u8>) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let bytes = match std::str::from_utf8(&bytes) {
            Ok(_) => bytes,
            Err(e) => {
                let detail =
                    format!("a native line had invalid UTF-8 at byte {}; invalid bytes were replaced with U+FFFD", e.valid_up_to());
                self.transcript.daemon_status("native_line_invalid_utf8", Some(detail));
                String::from_utf8_lossy(&bytes).into_owned().into_bytes()
            }
        };
        if self.wants_raw() {
            // One shared payload for every event of this line; only when the caller shows it.
            let raw = serde_json::from_slice(&bytes).ok().map(Arc::new);
            self.raw_bytes += raw.as_ref().map_or(0, |_| 2 * bytes.len());
            self.transcript.set_raw(raw);
        }
        let result = self.with_ctx(|p, ctx| p.on_line(&bytes, ctx));
        if let Some(Err(Unparsed(error))) = result {
            self.transcript.unparsed(error, self.protocol.name(), Some(raw_hash(&bytes)));
        }
        self.transcript.set_raw(None);
    }

    /// Handles `first` and the lines already waiting behind it, as one batch within the limits.
    fn handle_ready(&mut self, first: Option<std::io::Result<SourceItem>>, source: &mut LineSource) {
        let half_budget = self.settings.buffer_budget / 2;
        let mut next = Some(first);
        let (mut handled, mut bytes) = (0, 0);
        while let Some(item) = next.take() {
            match item {
                None => self.source_done = true,
                Some(Ok(item)) => {
                    bytes += match &item {
                        SourceItem::Line(Line::Complete(line)) => line.len(),
                        _ => 0,
                    };
                    if matches!(item, SourceItem::Line(_)) {
                        self.clock.on_output();
                    }
                    self.handle(item);
                }
                Some(Err(e)) => {
                    self.fatal.get_or_insert(AgentError::Io(e));
                    self.source_done = true;
                }
            }
            handled += 1;
            // A live agent's lone line still goes out at once: only what already waits joins it.
            let room = handled < EVENTS_PER_BATCH && self.transcript.pending_events() < EVENTS_PER_BATCH && bytes < half_budget;
            if !self.source_done && room {
                next = futures::FutureExt::now_or_never(source.next());
            }
        }
        if self.source_done && self.exit.is_none() && self.pgid.is_some() && self.stop.is_none() {
            self.closed_deadline = Some(deadline_after(self.settings.output_closed_grace));
        }
    }

    fn on_control(&mut self, message: Option<ControlMessage>, control_open: &mut bool) {
        match message {
            None => *control_open = false,
            Some(ControlMessage::Cancel) => self.begin_stop(Stop::Cancelled),
            Some(ControlMessage::Command(command, reply)) => {
                let result = self.with_ctx(|p, ctx| p.on_control(command, ctx)).unwrap_or(Err(AgentError::RunFinished));
                let _ = reply.send(result);
            }
        }
    }

    fn on_exit(&mut self, status: (Option<i32>, Option<i32>)) {
        self.exit = Some(status);
        self.closed_deadline = None;
        if self.pgid.is_some() {
            self.drain_deadline = Some(deadline_after(self.settings.drain_grace));
        }
    }

    fn on_timeout(&mut self, kind: crate::error::TimeoutKind) {
        self.clock.fire(kind);
        self.begin_stop(Stop::TimedOut);
    }

    /// The agent closed its output and outlived the grace period: a typed failure, group killed.
    fn on_output_closed_timeout(&mut self) {
        self.closed_deadline = None;
        if self.stop.is_none() {
            self.fail(AgentError::OutputClosed { grace: self.settings.output_closed_grace });
        }
    }

    async fn drive(mut self, mut inputs: Inputs, completion_tx: oneshot::Sender<Result<RunCompletion, AgentError>>) {
        if let Some(Err(error)) = self.with_ctx(|p, ctx| p.start(ctx)) {
            self.fail(error);
        }
        self.stage();
        self.clock.start();
        let mut control_open = true;
        while !(self.source_done && self.exit.is_some()) {
            let next_timeout = self.clock.next();
            tokio::select! {
                biased;
                _ = inputs.abandoned.cancelled(), if self.stop != Some(Stop::Abandoned) => {
                    self.stop = Some(Stop::Abandoned);
                    self.kill_now();
                }
                message = inputs.control_rx.recv(), if control_open => self.on_control(message, &mut control_open),
                kind = expiry(next_timeout), if self.stop.is_none() => self.on_timeout(kind),
                _ = sleep_until(self.escalate_at.unwrap_or_else(Instant::now)), if self.escalate_at.is_some() => self.escalate(),
                _ = sleep_until(self.closed_deadline.unwrap_or_else(Instant::now)), if self.closed_deadline.is_some() => {
                    self.on_output_closed_timeout();
                }
                _ = sleep_until(self.drain_deadline.unwrap_or_else(Instant::now)), if self.drain_deadline.is_some() && !self.source_done && self.may_read() => {
                    // The agent exited but something it started keeps its stdout open.
                    if let Some(pgid) = self.pgid {
                        signal_group(pgid, libc::SIGKILL);
                    }
                    self.source_done = true;
                }
                status = wait_exit(&mut inputs.io.lifecycle), if self.exit.is_none() => self.on_exit(status),
                room = self.room_for_pending(), if self.pending.is_some() => self.on_room(room),
                item = inputs.io.source.next(), if !self.source_done && self.may_read() => self.handle_ready(item, &mut inputs.io.source),
                _ = sleep_until(self.caller_waits.next().unwrap_or_else(Instant::now)), if self.caller_waits.next().is_some() => {
                    self.on_caller_wait_over();
                }
            }
            self.stage();
            self.track_caller_waits();
        }
        let result = self.finish(inputs).await;
        self.flush().await;
        drop(self.events_tx.take());
        let _ = completion_tx.send(result);
    }

    /// Reaps what is left, asks the protocol how the run went, and writes the transcript's end.
    async fn finish(&mut self, inputs: Inputs) -> Result<RunCompletion, AgentError> {
        let Inputs { io, cancel_requested, .. } = inputs;
        let info = self.reap(io).await;
        let mut result = match self.fatal.take() {
            Some(error) => Err(error),
            None => match self.with_ctx(|p, ctx| p.finish(&info, ctx)) {
                Some(result) => self.settings.limits.enforce(result),
                None => Err(self.fatal.take().expect("with_ctx records why it returned nothing")),
            },
        };
        if cancel_requested.load(Ordering::SeqCst) || self.stop == Some(Stop::Cancelled) {
            result = Err(AgentError::Cancelled);
        } else if self.stop == Some(Stop::TimedOut) {
            result = Err(self.clock.error());
        } else if self.stop == Some(Stop::Abandoned) && result.is_ok() {
            result = Err(AgentError::Cancelled);
        }
        self.transcript.set_raw(None);
        self.conclude(result, &info)
    }

    /// Kills what is left of the agent's group and gathers how it ended.
    async fn reap(&mut self, io: Io) -> ExitInfo {
        let Io { source, lifecycle, stderr_task } = io;
        drop(source);
        if let Some(pgid) = self.pgid {
            signal_group(pgid, libc::SIGKILL);
        }
        drop(lifecycle);
        let stderr = match stderr_task {
            Some(task) => tokio::time::timeout(Duration::from_secs(2), task).await.ok().and_then(Result::ok).unwrap_or_default(),
            None => std::mem::take(&mut self.replay_stderr),
        };
        let (exit_code, signal) = self.exit.unwrap_or((None, None));
        ExitInfo { exit_code, signal, stderr, oversized_lines: self.oversized_lines, stopped_by_daemon: self.stop.is_some() }
    }

    /// Fills what the protocol left empty from the transcript, and bounds the data.
    fn complete_fields(&self, mut completion: RunCompletion) -> RunCompletion {
        if completion.native_session_id.is_none() {
            completion.native_session_id = self.transcript.native_session_id().map(str::to_string);
        }
        if completion.final_text.is_none() {
            completion.final_text = self.transcript.last_assistant_text().map(str::to_string);
        }
        completion.data = completion.data.map(crate::bounds::bound_data);
        completion
    }

    /// Writes the end of the transcript for `result` and completes the completion's fields.
    fn conclude(&mut self, result: Result<RunCompletion, AgentError>, info: &ExitInfo) -> Result<RunCompletion, AgentError> {
        let result = match &self.settings.output_schema {
            Some(schema) => result.map(|c| self.complete_fields(c)).and_then(|c| crate::structured::conform(schema, c)),
            None => result,
        };
        match result {
            Ok(mut completion) => {
                let end = SessionEnd::completed();
                self.transcript.end(SessionEnd { exit_code: info.exit_code, ..end });
                completion.exit_code = completion.exit_code.or(info.exit_code);
                Ok(self.complete_fields(completion))
            }
            Err(error) => {
                // Nothing but the session's end may follow the terminal error.
                self.transcript.close_open();
                self.transcript.terminal_error(&error);
                let stopped = self.stop.is_some();
                self.transcript.end(SessionEnd {
                    reason: if stopped { SessionEndReason::Terminated } else { SessionEndReason::Error },
                    terminated_by: if stopped { TerminatedBy::Daemon } else { TerminatedBy::Agent },
                    message: Some(crate::bounds::truncate_message(&error.to_string(), crate::bounds::MESSAGE_BOUND)),
                    exit_code: info.exit_code,
                    stderr: (!stopped).then(|| info.stderr.output()),
                });
                Err(error)
            }
        }
    }
}

/// A short stable hash of a native line, to correlate `agent.unparsed` with a raw capture.
fn raw_hash(bytes: &[u8]) -> String {
    // FNV-1a: tiny, stable across runs and platforms, and not a security boundary here.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("fnv1a64:{hash:016x}")
}
