//! The run driver: pumps native lines through a [`Protocol`] into the transcript and out to the
//! caller, with backpressure, timeout, cancellation and process-group cleanup.
//!
//! The rules it guarantees (`spec/run-protocol.md`): every run resolves its completion exactly
//! once, after its last event; a failed run's stream ends with exactly one terminal error whose
//! message is the completion error's; cancel wins ties; nothing of the process group survives.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::lines::{BoundedLineReader, Line, DEFAULT_LINE_CAP};
use super::process::{signal_group, spawn, CommandSpec, ProcessGroupChild};
use super::stderr::StderrCapture;
use crate::capability::CapabilitySet;
use crate::error::AgentError;
use crate::kind::AgentKind;
use crate::request::RunRequest;
use crate::run::{ControlCommand, ControlMessage, RunCompletion, RunControl, RunGuard, RunHandle};
use crate::universal::{SessionEnd, SessionEndReason, TerminatedBy, Transcript, UniversalEvent};

/// Most native lines handled before their events are sent on as one batch.
const LINES_PER_BATCH: usize = 64;

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
        Category::Syntax => format!("JSON syntax error at line {} column {}", e.line(), e.column()),
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
    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let _ = ctx;
        Ok(())
    }

    /// One native JSON message from the agent's stdout.
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

/// What a [`Protocol`] method may do besides describing events.
pub struct Ctx<'a> {
    /// The run's transcript: describe what happened here.
    pub transcript: &'a mut Transcript,
    outbox: &'a mut Outbox,
}

#[derive(Default)]
struct Outbox {
    lines: Vec<Vec<u8>>,
    close_input: bool,
    shutdown: bool,
}

impl Ctx<'_> {
    /// Queues one JSON message, newline-terminated, for the agent's stdin.
    pub fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).expect("a Value always serializes");
        line.push(b'\n');
        self.outbox.lines.push(line);
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
}

/// Drives a [`Protocol`] by hand, for unit tests of a converter: hand it messages through
/// [`ProtocolHarness::ctx`], then read the transcript's events and what it sent to the agent.
///
/// ```
/// use agent_api::kit::driver::ProtocolHarness;
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
        Self { transcript: Transcript::new("sess_harness".into(), false), outbox: Outbox::default() }
    }

    /// A context to pass to the protocol's methods.
    pub fn ctx(&mut self) -> Ctx<'_> {
        Ctx { transcript: &mut self.transcript, outbox: &mut self.outbox }
    }

    /// The messages the protocol queued for the agent's stdin since the last call.
    pub fn take_sent(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.outbox.lines).iter().map(|line| serde_json::from_slice(line).expect("sent lines are JSON")).collect()
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
    /// Whether the driver stopped the run (cancel, timeout, drop).
    pub stopped_by_daemon: bool,
}

impl ExitInfo {
    /// Whether the process exited with code 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// The error for a process that ended before its protocol finished.
    pub fn early_exit_error(&self) -> AgentError {
        AgentError::ProcessExited { exit_code: self.exit_code, signal: self.signal }
    }
}

/// Tunables of one run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunSettings {
    /// The backend's kind.
    pub agent_kind: AgentKind,
    /// Fill `raw` in universal events.
    pub include_raw: bool,
    /// Overall timeout.
    pub timeout: Option<Duration>,
    /// Between the soft interrupt and SIGTERM to the group.
    pub cancel_grace: Duration,
    /// Between SIGTERM and SIGKILL.
    pub term_grace: Duration,
    /// Between [`Ctx::shutdown`] and SIGTERM, if the agent has not exited.
    pub shutdown_grace: Duration,
    /// After the process exits, how long its output may still drain.
    pub drain_grace: Duration,
    /// Whether tool events carry the tools facet.
    pub tools_structured: bool,
    /// Largest native line kept; longer ones are skipped and reported.
    pub line_cap: usize,
    /// Event batches (one per native line, or per run of lines already waiting) buffered before
    /// the run pushes back on the agent.
    pub channel_capacity: usize,
    /// The caller's token that cancels the run (see [`RunRequest::with_cancellation`]).
    pub cancellation: Option<CancellationToken>,
}

impl RunSettings {
    /// Defaults for a backend: 16 MiB line cap, 3 s cancel grace, 2 s term grace.
    pub fn new(agent_kind: AgentKind) -> Self {
        Self {
            agent_kind,
            include_raw: false,
            timeout: None,
            cancel_grace: Duration::from_secs(3),
            term_grace: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(5),
            drain_grace: Duration::from_secs(2),
            tools_structured: false,
            line_cap: DEFAULT_LINE_CAP,
            channel_capacity: 64,
            cancellation: None,
        }
    }

    /// Defaults plus what the request sets (raw payloads, timeout, cancellation) and, from the
    /// backend's capabilities, whether tool events carry the tools facet.
    pub fn for_request(agent_kind: AgentKind, request: &RunRequest, capabilities: &CapabilitySet) -> Self {
        let mut settings = Self::new(agent_kind);
        settings.include_raw = request.include_raw;
        settings.timeout = request.timeout;
        settings.tools_structured = capabilities.contains(agent_api_capabilities::TOOLS_STRUCTURED_V1);
        settings.cancellation = request.cancellation.clone();
        settings
    }
}

/// One item from a transport's output.
#[derive(Debug)]
#[non_exhaustive]
pub enum SourceItem {
    /// A line the agent wrote.
    Line(Line),
    /// A message the client sent, from a recording.
    Sent(Value),
    /// A stderr line, from a recording.
    Stderr(String),
    /// A recording line that is not in the recording format; becomes `agent.unparsed`.
    Malformed(String),
}

/// A stream of output items.
pub type LineSource = BoxStream<'static, std::io::Result<SourceItem>>;

enum Lifecycle {
    Process(ProcessGroupChild),
    Task(JoinHandle<i32>),
    /// No process: a recording, with the exit code it recorded (if known).
    Recorded(Option<i32>),
    Finished,
}

/// Where a run's native lines come from and its input goes to: a spawned process, an agent
/// running in this process, or a recording.
pub struct Transport {
    source: LineSource,
    stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    stderr: Option<Pin<Box<dyn AsyncRead + Send>>>,
    lifecycle: Lifecycle,
}

/// The agent's ends of an in-process transport.
pub struct AgentPipes {
    /// Write native lines here (the agent's stdout).
    pub stdout: tokio::io::DuplexStream,
    /// Read client messages here (the agent's stdin).
    pub stdin: BufReader<tokio::io::DuplexStream>,
}

impl Transport {
    /// Spawns the agent CLI (see [`super::process::spawn`]).
    pub fn spawn(spec: &CommandSpec, line_cap: usize) -> Result<Self, AgentError> {
        let mut process = spawn(spec)?;
        let stdout = process.child.stdout.take().expect("stdout is piped");
        let stderr = process.child.stderr.take().expect("stderr is piped");
        let stdin = process.child.stdin.take().map(|s| Box::pin(s) as Pin<Box<dyn AsyncWrite + Send>>);
        Ok(Self { source: line_source(stdout, line_cap), stdin, stderr: Some(Box::pin(stderr)), lifecycle: Lifecycle::Process(process) })
    }

    /// Runs `agent` as a task of this process, talking through in-memory pipes. Its return
    /// value is the run's exit code. Cancel and drop abort the task.
    pub fn in_process<F, Fut>(line_cap: usize, agent: F) -> Self
    where
        F: FnOnce(AgentPipes) -> Fut,
        Fut: Future<Output = i32> + Send + 'static,
    {
        let (agent_out, client_in) = tokio::io::duplex(64 * 1024);
        let (client_out, agent_in) = tokio::io::duplex(64 * 1024);
        let task = tokio::spawn(agent(AgentPipes { stdout: agent_out, stdin: BufReader::new(agent_in) }));
        Self { source: line_source(client_in, line_cap), stdin: Some(Box::pin(client_out)), stderr: None, lifecycle: Lifecycle::Task(task) }
    }

    /// A transport that only replays `source` (no process, input discarded); `exit_code` is
    /// what the recorded process exited with, when known.
    pub fn replay(source: LineSource, exit_code: Option<i32>) -> Self {
        Self { source, stdin: None, stderr: None, lifecycle: Lifecycle::Recorded(exit_code) }
    }
}

/// Reads `reader` as bounded lines.
pub fn line_source(reader: impl AsyncRead + Send + Unpin + 'static, cap: usize) -> LineSource {
    let lines = BoundedLineReader::new(BufReader::with_capacity(64 * 1024, reader), cap);
    futures::stream::unfold(lines, |mut lines| async move {
        match lines.next_line().await {
            Ok(Some(line)) => Some((Ok(SourceItem::Line(line)), lines)),
            Ok(None) => None,
            Err(e) => Some((Err(e), lines)),
        }
    })
    .boxed()
}

/// Starts driving a run on the current tokio runtime and returns its handle.
pub fn start_run(settings: RunSettings, transport: Transport, protocol: Box<dyn Protocol>) -> RunHandle {
    let (events_tx, events_rx) = mpsc::channel(settings.channel_capacity);
    let (completion_tx, completion_rx) = oneshot::channel();
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let cancel_requested = Arc::new(AtomicBool::new(false));
    let abandoned = CancellationToken::new();
    let guard = Arc::new(RunGuard { abandoned: abandoned.clone() });
    let control = RunControl::new(control_tx, cancel_requested.clone());
    let session_id = format!("sess_{}", uuid::Uuid::new_v4().simple());
    let transcript = Transcript::new(session_id, settings.include_raw);
    if let Some(token) = settings.cancellation.clone() {
        tokio::spawn(cancel_on(token, control.clone()));
    }
    let handle = RunHandle::new(settings.agent_kind.clone(), settings.tools_structured, events_rx, completion_rx, control, guard);

    let Transport { source, stdin, stderr, lifecycle } = transport;
    let stdin_tx = stdin.map(spawn_stdin_writer);
    let stderr_task = stderr.map(|s| tokio::spawn(StderrCapture::read_from(s)));
    let (pgid, task_abort) = match &lifecycle {
        Lifecycle::Process(p) => (Some(p.pgid), None),
        Lifecycle::Task(t) => (None, Some(t.abort_handle())),
        Lifecycle::Recorded(_) | Lifecycle::Finished => (None, None),
    };
    let core = Core {
        settings,
        protocol,
        transcript,
        outbox: Outbox::default(),
        stdin_tx,
        events_tx: Some(events_tx),
        pgid,
        task_abort,
        stop: None,
        escalate_at: None,
        escalation_stage: 0,
        oversized_lines: 0,
        replay_stderr: StderrCapture::default(),
        converter_panic: None,
    };
    tokio::spawn(core.drive(source, lifecycle, stderr_task, control_rx, cancel_requested, abandoned, completion_tx));
    handle
}

/// Cancels the run when the caller's token is cancelled; gone once the run has finished.
async fn cancel_on(token: CancellationToken, control: RunControl) {
    tokio::select! {
        _ = token.cancelled() => control.cancel(),
        _ = control.finished() => {}
    }
}

fn spawn_stdin_writer(mut writer: Pin<Box<dyn AsyncWrite + Send>>) -> mpsc::UnboundedSender<Vec<u8>> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if writer.write_all(&line).await.is_err() || writer.flush().await.is_err() {
                break;
            }
        }
        let _ = writer.shutdown().await;
    });
    tx
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Cancelled,
    TimedOut,
    Abandoned,
}

struct Core {
    settings: RunSettings,
    protocol: Box<dyn Protocol>,
    transcript: Transcript,
    outbox: Outbox,
    stdin_tx: Option<mpsc::UnboundedSender<Vec<u8>>>,
    events_tx: Option<mpsc::Sender<Vec<UniversalEvent>>>,
    pgid: Option<i32>,
    task_abort: Option<tokio::task::AbortHandle>,
    stop: Option<Stop>,
    escalate_at: Option<Instant>,
    escalation_stage: u8,
    oversized_lines: u64,
    replay_stderr: StderrCapture,
    converter_panic: Option<AgentError>,
}

impl Core {
    /// Calls the protocol. A panicking protocol fails the run (typed `Protocol`, with its one
    /// terminal error) instead of taking the driver down; it is not called again.
    fn with_ctx<T>(&mut self, f: impl FnOnce(&mut dyn Protocol, &mut Ctx<'_>) -> T) -> Option<T> {
        if self.converter_panic.is_some() {
            return None;
        }
        let mut ctx = Ctx { transcript: &mut self.transcript, outbox: &mut self.outbox };
        let protocol = self.protocol.as_mut();
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(protocol, &mut ctx)));
        self.flush_outbox();
        match out {
            Ok(out) => Some(out),
            Err(_) => {
                let reason = format!("the {} converter panicked", self.protocol.name());
                tracing::error!(%reason, "failing the run");
                self.converter_panic = Some(AgentError::Protocol { reason });
                self.kill_now();
                None
            }
        }
    }

    fn flush_outbox(&mut self) {
        let outbox = std::mem::take(&mut self.outbox);
        if let Some(tx) = &self.stdin_tx {
            for line in outbox.lines {
                let _ = tx.send(line);
            }
        }
        if outbox.close_input {
            self.stdin_tx = None;
        }
        if outbox.shutdown && self.escalate_at.is_none() {
            self.escalate_at = Some(Instant::now() + self.settings.shutdown_grace);
        }
    }

    /// Sends the events the transcript holds as one batch (one hand-off per batch, not per event).
    async fn emit(&mut self) {
        let events: Vec<UniversalEvent> = self.transcript.drain().collect();
        if events.is_empty() {
            return;
        }
        if let Some(tx) = &self.events_tx {
            if tx.send(events).await.is_err() {
                // Nobody listens any more; the run goes on to reap its process.
                self.events_tx = None;
            }
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
        self.escalate_at = Some(Instant::now() + grace);
    }

    /// Next step of termination: SIGTERM to the group (and stdin closed), then SIGKILL.
    fn escalate(&mut self) {
        self.stdin_tx = None;
        if let Some(task) = &self.task_abort {
            task.abort();
        }
        if let Some(pgid) = self.pgid {
            let (signal, next) = match self.escalation_stage {
                0 => (libc::SIGTERM, Some(Instant::now() + self.settings.term_grace)),
                _ => (libc::SIGKILL, None),
            };
            signal_group(pgid, signal);
            self.escalate_at = next;
        } else {
            self.escalate_at = None;
        }
        self.escalation_stage += 1;
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
                self.set_raw(&message);
                self.with_ctx(|p, ctx| p.on_recorded_send(message, ctx));
                self.transcript.set_raw(None);
            }
            SourceItem::Stderr(line) => self.replay_stderr.push(line.as_bytes()),
            SourceItem::Malformed(error) => self.transcript.unparsed(error, "recording", None),
        }
    }

    fn set_raw(&mut self, message: &Value) {
        if self.settings.include_raw {
            self.transcript.set_raw(Some(message.clone()));
        }
    }

    fn handle_line(&mut self, bytes: Vec<u8>) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let location = self.protocol.name();
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let detail = format!("a native line had invalid UTF-8 at byte {at}; invalid bytes were replaced with U+FFFD");
                self.transcript.daemon_status("native_line_invalid_utf8", Some(detail));
                String::from_utf8_lossy(e.as_bytes()).into_owned()
            }
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(message) => {
                self.set_raw(&message);
                let result = self.with_ctx(|p, ctx| p.on_message(message, ctx));
                if let Some(Err(Unparsed(error))) = result {
                    self.transcript.unparsed(error, location, Some(raw_hash(text.as_bytes())));
                }
                self.transcript.set_raw(None);
            }
            Err(e) => {
                self.transcript.unparsed(format!("not a JSON line: {}", describe_json_error(&e)), location, Some(raw_hash(text.as_bytes())))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn drive(
        mut self,
        mut source: LineSource,
        mut lifecycle: Lifecycle,
        stderr_task: Option<JoinHandle<StderrCapture>>,
        mut control_rx: mpsc::UnboundedReceiver<ControlMessage>,
        cancel_requested: Arc<AtomicBool>,
        abandoned: CancellationToken,
        completion_tx: oneshot::Sender<Result<RunCompletion, AgentError>>,
    ) {
        let mut failure = self.with_ctx(|p, ctx| p.start(ctx)).and_then(Result::err);
        if failure.is_some() {
            self.kill_now();
        }
        self.emit().await;
        let deadline = self.settings.timeout.map(|t| Instant::now() + t);
        let mut source_done = false;
        let mut control_open = true;
        let mut exit: Option<(Option<i32>, Option<i32>)> = None;
        let mut drain_deadline: Option<Instant> = None;
        loop {
            if source_done && exit.is_some() {
                break;
            }
            tokio::select! {
                biased;
                _ = abandoned.cancelled(), if self.stop != Some(Stop::Abandoned) => {
                    self.stop = Some(Stop::Abandoned);
                    self.kill_now();
                }
                message = control_rx.recv(), if control_open => match message {
                    None => control_open = false,
                    Some(ControlMessage::Cancel) => self.begin_stop(Stop::Cancelled),
                    Some(ControlMessage::Command(command, reply)) => {
                        let result = self.with_ctx(|p, ctx| p.on_control(command, ctx)).unwrap_or(Err(AgentError::RunFinished));
                        let _ = reply.send(result);
                    }
                },
                _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() && self.stop.is_none() => {
                    self.begin_stop(Stop::TimedOut);
                }
                _ = sleep_until(self.escalate_at.unwrap_or_else(Instant::now)), if self.escalate_at.is_some() => self.escalate(),
                _ = sleep_until(drain_deadline.unwrap_or_else(Instant::now)), if drain_deadline.is_some() && !source_done => {
                    // The agent exited but something it started keeps its stdout open.
                    if let Some(pgid) = self.pgid {
                        signal_group(pgid, libc::SIGKILL);
                    }
                    source_done = true;
                }
                status = wait_exit(&mut lifecycle), if exit.is_none() => {
                    exit = Some(status);
                    if self.pgid.is_some() {
                        drain_deadline = Some(Instant::now() + self.settings.drain_grace);
                    }
                }
                item = source.next(), if !source_done => {
                    let mut next = Some(item);
                    let mut handled = 0;
                    // Lines already waiting are handled before the batch goes out; a live agent's
                    // lone line still goes out at once.
                    while let Some(item) = next.take() {
                        match item {
                            None => source_done = true,
                            Some(Ok(item)) => self.handle(item),
                            Some(Err(e)) => {
                                failure.get_or_insert(AgentError::Io(e));
                                source_done = true;
                            }
                        }
                        handled += 1;
                        if !source_done && handled < LINES_PER_BATCH {
                            next = futures::FutureExt::now_or_never(source.next());
                        }
                    }
                }
            }
            self.emit().await;
        }
        drop(source);
        if let Some(pgid) = self.pgid {
            signal_group(pgid, libc::SIGKILL);
        }
        drop(lifecycle);
        let stderr = match stderr_task {
            Some(task) => tokio::time::timeout(Duration::from_secs(2), task).await.ok().and_then(Result::ok).unwrap_or_default(),
            None => std::mem::take(&mut self.replay_stderr),
        };
        let (exit_code, signal) = exit.unwrap_or((None, None));
        let info = ExitInfo { exit_code, signal, stderr, oversized_lines: self.oversized_lines, stopped_by_daemon: self.stop.is_some() };
        let mut result = match failure.or_else(|| self.converter_panic.take()) {
            Some(error) => Err(error),
            None => match self.with_ctx(|p, ctx| p.finish(&info, ctx)) {
                Some(result) => result,
                None => Err(self.converter_panic.take().expect("with_ctx records why it returned nothing")),
            },
        };
        if cancel_requested.load(Ordering::SeqCst) || self.stop == Some(Stop::Cancelled) {
            result = Err(AgentError::Cancelled);
        } else if self.stop == Some(Stop::TimedOut) {
            result = Err(AgentError::Timeout { after: self.settings.timeout.unwrap_or_default() });
        } else if self.stop == Some(Stop::Abandoned) && result.is_ok() {
            result = Err(AgentError::Cancelled);
        }
        self.transcript.set_raw(None);
        let result = self.conclude(result, &info);
        self.emit().await;
        drop(self.events_tx.take());
        let _ = completion_tx.send(result);
    }

    /// Writes the end of the transcript for `result` and completes the completion's fields.
    fn conclude(&mut self, result: Result<RunCompletion, AgentError>, info: &ExitInfo) -> Result<RunCompletion, AgentError> {
        match result {
            Ok(mut completion) => {
                let end = SessionEnd::completed();
                self.transcript.end(SessionEnd { exit_code: info.exit_code, ..end });
                completion.exit_code = completion.exit_code.or(info.exit_code);
                if completion.native_session_id.is_none() {
                    completion.native_session_id = self.transcript.native_session_id().map(str::to_string);
                }
                if completion.final_text.is_none() {
                    completion.final_text = self.transcript.last_assistant_text().map(str::to_string);
                }
                completion.data = completion.data.map(crate::bounds::bound_data);
                Ok(completion)
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

async fn wait_exit(lifecycle: &mut Lifecycle) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match lifecycle {
        Lifecycle::Process(p) => match p.child.wait().await {
            Ok(status) => (status.code(), status.signal()),
            Err(_) => (None, None),
        },
        Lifecycle::Task(task) => {
            let result = task.await;
            *lifecycle = Lifecycle::Finished;
            match result {
                Ok(code) => (Some(code), None),
                Err(_) => (None, Some(libc::SIGKILL)),
            }
        }
        Lifecycle::Recorded(code) => {
            let code = *code;
            *lifecycle = Lifecycle::Finished;
            (code, None)
        }
        Lifecycle::Finished => std::future::pending().await,
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
