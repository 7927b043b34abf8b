//! The run driver: pumps native lines through a [`Protocol`] into the transcript and out to the
//! caller, within a byte budget, with timeout, cancellation and process-group cleanup.
//!
//! One loop ([`Core::drive`]) drives a one-shot run and a warm session alike: they differ only in
//! where turns come from ([`Caller`]: a run's one turn is open from the start; a session's come
//! from its commands). What it learns of the caller is the turn's controls and whether its handle
//! was dropped, never which view reads the events, so the transcript depends on the native input
//! alone.
//!
//! The rules it guarantees (`spec/run-protocol.md`): every run resolves its completion exactly
//! once, after its last event; a failed run's stream ends with exactly one terminal error whose
//! message is the completion error's; cancel wins ties; nothing of the process group survives.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::lines::{Line, LineChunk};
use super::process::signal_group;
use super::protocol::Outbox;
use super::stderr::{LogFollower, StderrCapture};
use super::timeouts::{expiry, Clock};
use super::transport::{wait_exit, Lifecycle, StdinQueue};
use crate::contract::handle::{RunGuard, RunHandle};
use crate::pipeline::budget::{self, BatchSender, EVENTS_PER_BATCH};
use crate::pipeline::transcript::Transcript;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::error::TimeoutLimits;
use crate::vocabulary::run::{ControlCommand, ControlMessage, RunCompletion, RunControl};
use crate::vocabulary::universal::UniversalEvent;
use output::Output;

pub(crate) use super::protocol::{Ctx, ExitInfo, Protocol, Unparsed};
pub(crate) use super::transport::{LineSource, SourceItem, Transport};
pub use session::start_session;
pub use settings::{RunSettings, DEFAULT_INPUT_LIMIT};

mod batches;
mod caller_wait;
mod drain;
mod finish;
mod output;
mod session;
mod settings;
mod steer;
#[cfg(test)]
mod tests;

/// `now + d`, saturating: a deadline past the clock's range is as good as none.
fn deadline_after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(10 * 365 * 24 * 3600))
}

/// Starts driving a run on the current tokio runtime and returns its handle.
///
/// A one-shot run is driven as a session of one turn that takes no more input: its turn is open
/// from the start and it ends when the agent's output does.
pub fn start_run(
    settings: RunSettings,
    transport: Transport,
    protocol: Box<dyn Protocol>,
) -> RunHandle {
    let (mut core, io) = Core::new(settings, transport, protocol);
    // Dropping the run's handle abandons the whole run.
    let abandoned = CancellationToken::new();
    let (turn, handle) = core.open_turn(abandoned.clone(), false);
    let caller = Caller {
        abandoned,
        turn: Some(turn),
        session: None,
    };
    tokio::spawn(core.drive(io, caller));
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
    source: Output,
    lifecycle: Lifecycle,
    stderr_task: Option<JoinHandle<StderrCapture>>,
    /// Stderr lines as they come, for a protocol that reads them.
    stderr_live: Option<mpsc::Receiver<String>>,
}

/// Most lines (and other output items) handled as one batch. More than the events a batch may
/// hold, since many lines make no event of their own (an answer's deltas that join one); few
/// enough that the loop is back to cancellation and control messages within about a millisecond.
const LINES_PER_BATCH: usize = 4 * EVENTS_PER_BATCH;

/// Stderr lines that may wait for a protocol that reads them; more are dropped from the live feed.
const LIVE_STDERR_LINES: usize = 64;

/// The next live stderr line; never ready without a feed.
async fn next_stderr(live: &mut Option<mpsc::Receiver<String>>) -> Option<String> {
    match live {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The caller's side of a drive: where its turns come from and who follows them.
struct Caller {
    /// Cancelled when the caller dropped everything (a run's handle, a session): the agent's
    /// group is killed at once.
    abandoned: CancellationToken,
    /// The turn in progress: a run's one turn, open from the start; a session's current one.
    turn: Option<Turn>,
    /// A session's commands, which open its turns and close it; none for a one-shot run.
    session: Option<session::Commands>,
}

/// The turn in progress, as its caller holds it.
struct Turn {
    completion_tx: oneshot::Sender<Result<RunCompletion, AgentError>>,
    control_rx: mpsc::UnboundedReceiver<ControlMessage>,
    control_open: bool,
    cancel_requested: Arc<AtomicBool>,
    /// A session's turn: cancelled when the caller drops every part of the turn's handle, which
    /// stops the turn softly and keeps the session. (A run's handle abandons the whole run.)
    abandoned: Option<CancellationToken>,
    dropped: bool,
}

impl Turn {
    /// Whether the caller cancelled it (`RunControl::cancel`, its token, a session's `close`).
    fn cancel_requested(&self) -> bool {
        self.cancel_requested.load(Ordering::SeqCst)
    }
}

/// The turn's next control message; never ready without a turn.
async fn turn_control(turn: &mut Option<Turn>) -> Option<ControlMessage> {
    match turn {
        Some(turn) => turn.control_rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Resolves when `token` is cancelled; never without one.
async fn cancelled(token: Option<CancellationToken>) {
    match token {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
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
    /// Bytes of raw payloads in the batch being built (each counted once, however many events share it).
    raw_bytes: usize,
    pgid: Option<i32>,
    /// The agent's group on the far side of its launcher: stopped with the local one.
    far: Option<Arc<super::launch::FarGroup>>,
    /// The launcher that started the agent, for the completion.
    launcher: Option<String>,
    task_abort: Option<tokio::task::AbortHandle>,
    stop: Option<Stop>,
    escalate_at: Option<Instant>,
    escalation_stage: u8,
    oversized_lines: u64,
    /// The longest of them, in bytes.
    longest_oversized_line: u64,
    replay_stderr: StderrCapture,
    /// Why the run fails regardless of what the protocol says; once set, the protocol is not
    /// called again.
    fatal: Option<AgentError>,
    source_done: bool,
    exit: Option<(Option<i32>, Option<i32>)>,
    /// After the process exited: reading what it left in its pipe (`drain`).
    drain: Option<drain::Drain>,
    /// After the output closed: when to stop waiting for the process to exit.
    closed_deadline: Option<Instant>,
    /// The log the protocol follows, for a protocol that reads stderr ([`Ctx::follow_log`]).
    follower: Option<LogFollower>,
    /// In a session: how the protocol reported the end of the current turn.
    turn_end: Option<Result<RunCompletion, AgentError>>,
    /// Deadlines of the requests that wait for the caller.
    caller_waits: caller_wait::CallerWaits,
    /// Steering messages the agent has not acknowledged yet.
    steers: steer::PendingSteers,
    clock: Clock,
}

impl Core {
    /// A driver for `transport` and `protocol`, with no listener yet.
    fn new(settings: RunSettings, transport: Transport, protocol: Box<dyn Protocol>) -> (Self, Io) {
        let session_id = format!("sess_{}", uuid::Uuid::new_v4().simple());
        let transcript = Transcript::new(session_id, settings.include_raw);
        let Transport {
            source,
            stdin,
            stderr,
            lifecycle,
        } = transport;
        let stdin = stdin.map(|writer| StdinQueue::spawn(writer, settings.input_limit));
        let (live_tx, stderr_live) = protocol
            .reads_stderr()
            .then(|| mpsc::channel(LIVE_STDERR_LINES))
            .unzip();
        let follower = live_tx
            .clone()
            .zip(stderr.as_ref())
            .map(|(live, source)| LogFollower::new(live, source));
        let stderr_task = stderr.map(|s| tokio::spawn(StderrCapture::read_from(s, live_tx)));
        let (far, launcher) = match &lifecycle {
            Lifecycle::Process(p) => (p.far_group().cloned(), Some(p.launcher().to_string())),
            _ => (None, None),
        };
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
            raw_bytes: 0,
            pgid,
            far,
            launcher,
            task_abort,
            stop: None,
            escalate_at: None,
            escalation_stage: 0,
            oversized_lines: 0,
            longest_oversized_line: 0,
            replay_stderr: StderrCapture::default(),
            fatal: None,
            source_done: false,
            exit: None,
            drain: None,
            closed_deadline: None,
            turn_end: None,
            caller_waits,
            steers: Default::default(),
            follower,
        };
        (
            core,
            Io {
                source: Output::new(source),
                lifecycle,
                stderr_task,
                stderr_live,
            },
        )
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
        if self.outbox.is_empty() {
            return;
        }
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
        for (id, result) in outbox.steer_answers {
            self.steer_answered(id, result);
        }
        if let Some(end) = outbox.turn_end {
            self.turn_end.get_or_insert(end);
        }
        if let (Some(path), Some(follower)) = (outbox.follow_log, &mut self.follower) {
            follower.follow(path);
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
        let soft =
            reason != Stop::Abandoned && self.with_ctx(|p, ctx| p.interrupt(ctx)).unwrap_or(false);
        let grace = if soft {
            self.settings.cancel_grace
        } else {
            Duration::ZERO
        };
        self.escalate_at = Some(deadline_after(grace));
    }

    /// Next step of termination: SIGTERM to the group (and stdin closed), then SIGKILL.
    fn escalate(&mut self) {
        self.stdin = None;
        if let Some(task) = &self.task_abort {
            task.abort();
        }
        if let Some(far) = &self.far {
            // It runs its own TERM, grace, KILL there; the local client goes below.
            far.begin_stop();
        }
        if let Some(pgid) = self.pgid {
            let (signal, next) = match self.escalation_stage {
                0 => (
                    libc::SIGTERM,
                    Some(deadline_after(self.settings.term_grace)),
                ),
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

    /// Handles one output item, counted into `batch`. A chunk of lines is handled line by line
    /// while the batch has room; what is left of it is returned, to be read first next time.
    fn handle(&mut self, item: SourceItem, batch: &mut BatchSize) -> Option<LineChunk> {
        batch.saw_line |= matches!(item, SourceItem::Line(_) | SourceItem::Lines(_));
        // Every item counts once, a chunk once per line it hands out.
        if !matches!(item, SourceItem::Lines(_)) {
            batch.add(0);
        }
        match item {
            SourceItem::Lines(mut chunk) => {
                while let Some(line) = chunk.next_line() {
                    batch.add(line.len());
                    self.handle_line(line);
                    if !self.room_in(batch) {
                        break;
                    }
                }
                return Some(chunk);
            }
            SourceItem::Line(Line::Complete(bytes)) => {
                batch.bytes += bytes.len();
                self.handle_line(&bytes);
            }
            SourceItem::Line(Line::Oversize { bytes }) => {
                self.oversized_lines += 1;
                self.longest_oversized_line = self.longest_oversized_line.max(bytes);
                let detail = format!(
                    "a native line of {bytes} bytes exceeded the {}-byte line cap and was skipped",
                    self.settings.line_cap
                );
                self.transcript
                    .daemon_status("native_line_skipped", Some(detail));
            }
            SourceItem::Sent(message) => {
                if self.wants_raw() {
                    self.transcript.set_raw(Some(Arc::new(message.clone())));
                }
                self.with_ctx(|p, ctx| p.on_recorded_send(message, ctx));
                self.transcript.set_raw(None);
            }
            SourceItem::Stderr(line) => {
                self.replay_stderr.push(line.as_bytes());
                if self.protocol.reads_stderr() {
                    let kept = self.replay_stderr.last().to_string();
                    self.on_stderr(&kept);
                }
            }
            SourceItem::Malformed(error) => self.transcript.unparsed(error, "recording", None),
        }
        None
    }

    /// One stderr line for a protocol that reads them (live, left over at the end, or recorded).
    fn on_stderr(&mut self, line: &str) {
        self.with_ctx(|p, ctx| p.on_stderr(line, ctx));
    }

    /// Whether the caller of the current turn waits for its batches inside a task.
    fn caller_is_task(&self) -> bool {
        self.events_tx
            .as_ref()
            .is_some_and(BatchSender::caller_is_task)
    }

    fn wants_raw(&self) -> bool {
        self.settings.include_raw
    }

    fn handle_line(&mut self, bytes: &[u8]) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let bytes = match std::str::from_utf8(bytes) {
            Ok(_) => std::borrow::Cow::Borrowed(bytes),
            Err(e) => {
                let detail =
                    format!("a native line had invalid UTF-8 at byte {}; invalid bytes were replaced with U+FFFD", e.valid_up_to());
                self.transcript
                    .daemon_status("native_line_invalid_utf8", Some(detail));
                std::borrow::Cow::Owned(String::from_utf8_lossy(bytes).into_owned().into_bytes())
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
            self.transcript
                .unparsed(error, self.protocol.name(), Some(raw_hash(&bytes)));
        }
        self.transcript.set_raw(None);
    }

    /// Handles `first` and the lines already waiting behind it, as one batch within the limits.
    fn handle_ready(&mut self, first: Option<std::io::Result<SourceItem>>, source: &mut Output) {
        let mut next = Some(first);
        let mut batch = BatchSize::default();
        let events_before = self.transcript.pending_events();
        while let Some(item) = next.take() {
            match item {
                None => self.source_done = true,
                Some(Ok(item)) => {
                    if let Some(rest) = self.handle(item, &mut batch) {
                        source.put_back(rest);
                    }
                }
                Some(Err(e)) => {
                    self.fatal.get_or_insert(AgentError::Io(e));
                    self.source_done = true;
                }
            }
            // A live agent's lone line still goes out at once: only what already waits joins it.
            if !self.source_done && self.room_in(&batch) {
                next = source.ready();
            }
        }
        let saw_line = batch.saw_line;
        // Once per batch: reading the clock for every line cost more than the idle timer's
        // precision is worth (the batch is handled within microseconds).
        if saw_line {
            // A batch whose every event is a retry notice is no progress (`spec/run-protocol.md` §4).
            let retries = self.transcript.take_retry_events();
            let emitted = self
                .transcript
                .pending_events()
                .saturating_sub(events_before);
            if retries > 0 && emitted <= retries {
                self.clock.on_retry();
            } else {
                self.clock.on_output();
            }
        }
        if self.source_done && self.exit.is_none() && self.pgid.is_some() && self.stop.is_none() {
            self.closed_deadline = Some(deadline_after(self.settings.output_closed_grace));
        }
        if batch.items > 0 {
            if let Some(drain) = &mut self.drain {
                drain.on_output();
            }
        }
    }

    /// Whether the batch being handled may take another item.
    fn room_in(&self, batch: &BatchSize) -> bool {
        batch.items < LINES_PER_BATCH
            && self.transcript.pending_events() < EVENTS_PER_BATCH
            && batch.bytes < self.settings.buffer_budget / 2
    }

    fn on_control(&mut self, message: Option<ControlMessage>, turn: &mut Option<Turn>) {
        match message {
            None => {
                if let Some(turn) = turn {
                    turn.control_open = false;
                }
            }
            Some(ControlMessage::Cancel) => self.begin_stop(Stop::Cancelled),
            Some(ControlMessage::Command(ControlCommand::Steer { text, images }, reply)) => {
                let mut prompt = crate::vocabulary::request::Prompt::from(text);
                prompt.images = images;
                self.on_steer(prompt, reply)
            }
            Some(ControlMessage::Command(command, reply)) => {
                let result = self
                    .with_ctx(|p, ctx| p.on_control(command, ctx))
                    .unwrap_or(Err(AgentError::RunFinished));
                let _ = reply.send(result);
            }
        }
    }

    fn on_exit(&mut self, status: (Option<i32>, Option<i32>)) {
        self.exit = Some(status);
        self.closed_deadline = None;
        if self.pgid.is_some() {
            self.drain = Some(drain::Drain::start(self.settings.drain_grace));
        }
    }

    /// The drain's deadline passed: output still ready is read on; silence (or a writer that
    /// never stops) kills every process the agent started, and the pipe is read to its end.
    fn on_drain_expiry(&mut self, source: &mut Output, lifecycle: &Lifecycle) {
        let ready = source.ready();
        let flowing = ready.is_some();
        if let Some(item) = ready {
            self.handle_ready(item, source);
        }
        let Some(drain) = &mut self.drain else { return };
        match drain.on_expiry(flowing) {
            drain::Expiry::ReadOn => {}
            // A drain runs only for a spawned process (`on_exit`).
            drain::Expiry::KillWriters => {
                if let Lifecycle::Process(process) = lifecycle {
                    process.kill_all();
                }
            }
            drain::Expiry::GiveUp => self.source_done = true,
        }
    }

    fn on_timeout(&mut self, kind: crate::vocabulary::error::TimeoutKind) {
        self.clock.fire(kind);
        self.begin_stop(Stop::TimedOut);
    }

    /// The agent closed its output and outlived the grace period: a typed failure, group killed.
    fn on_output_closed_timeout(&mut self) {
        self.closed_deadline = None;
        if self.stop.is_none() {
            self.fail(AgentError::OutputClosed {
                grace: self.settings.output_closed_grace,
            });
        }
    }

    /// Opens a turn for the caller: its handle (with its budgeted event channel, its control
    /// and its completion) and the driver's side of it. `abandoned` is what dropping the handle
    /// cancels; `own_token` says whether it is the turn's own (a session's turn) rather than the
    /// whole drive's (a run).
    fn open_turn(&mut self, abandoned: CancellationToken, own_token: bool) -> (Turn, RunHandle) {
        let settings = &self.settings;
        let (events_tx, events_rx) = budget::channel(settings.buffer_budget);
        let (completion_tx, completion_rx) = oneshot::channel();
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let cancel_requested = Arc::new(AtomicBool::new(false));
        let guard = Arc::new(RunGuard {
            abandoned: abandoned.clone(),
        });
        let control = RunControl::new(control_tx, cancel_requested.clone());
        if let Some(token) = settings.cancellation.clone() {
            tokio::spawn(cancel_on(token, control.clone()));
        }
        let handle = RunHandle::new(
            settings.agent_kind.clone(),
            settings.tools_structured,
            events_rx,
            completion_rx,
            control,
            guard,
        );
        self.events_tx = Some(events_tx);
        self.clock.start();
        let abandoned = own_token.then_some(abandoned);
        let turn = Turn {
            completion_tx,
            control_rx,
            control_open: true,
            cancel_requested,
            abandoned,
            dropped: false,
        };
        (turn, handle)
    }

    /// The one loop of a run and a session: the agent's output, its stderr and its exit; the
    /// caller's controls, drops and (in a session) commands; the timeouts and graces. It ends
    /// when the agent's output has ended and its process exited.
    async fn drive(mut self, mut io: Io, mut caller: Caller) {
        if let Some(Err(error)) = self.with_ctx(|p, ctx| p.start(ctx)) {
            self.fail(error);
        }
        if caller.turn.is_some() {
            self.stage();
        }
        // On a current-thread runtime every caller, a task or the `block_on` future, runs on
        // this thread, and only after this task yields.
        let current_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
        while !(self.source_done && self.exit.is_some()) {
            let turn_abandoned = caller
                .turn
                .as_ref()
                .filter(|t| !t.dropped)
                .and_then(|t| t.abandoned.clone());
            let control_open = caller.turn.as_ref().is_some_and(|t| t.control_open);
            let commands_open = caller
                .session
                .as_ref()
                .is_some_and(session::Commands::is_open);
            self.clock.set_waiting(self.transcript.awaits_caller());
            let next_timeout = self.clock.next();
            tokio::select! {
                biased;
                _ = caller.abandoned.cancelled(), if self.stop != Some(Stop::Abandoned) => {
                    self.stop = Some(Stop::Abandoned);
                    self.kill_now();
                }
                _ = cancelled(turn_abandoned) => {
                    // Nobody follows this turn any more: stop it, softly; the session lives on.
                    if let Some(turn) = &mut caller.turn {
                        turn.dropped = true;
                    }
                    self.begin_stop(Stop::Cancelled);
                }
                message = turn_control(&mut caller.turn), if control_open => self.on_control(message, &mut caller.turn),
                command = session::next_command(&mut caller.session), if commands_open => self.on_command(command, &mut caller),
                kind = expiry(next_timeout), if self.stop.is_none() => self.on_timeout(kind),
                _ = sleep_until(self.escalate_at.unwrap_or_else(Instant::now)), if self.escalate_at.is_some() => self.escalate(),
                _ = sleep_until(self.closed_deadline.unwrap_or_else(Instant::now)), if self.closed_deadline.is_some() => {
                    self.on_output_closed_timeout();
                }
                _ = sleep_until(self.drain.as_ref().map_or_else(Instant::now, drain::Drain::deadline)), if self.drain.is_some() && !self.source_done && self.may_read() => {
                    self.on_drain_expiry(&mut io.source, &io.lifecycle);
                }
                status = wait_exit(&mut io.lifecycle), if self.exit.is_none() => self.on_exit(status),
                room = self.room_for_pending(), if self.pending.is_some() => self.on_room(room),
                item = io.source.next(), if !self.source_done && self.may_read() => self.handle_ready(item, &mut io.source),
                line = next_stderr(&mut io.stderr_live), if io.stderr_live.is_some() => match line {
                    Some(line) => self.on_stderr(&line),
                    None => io.stderr_live = None,
                },
                _ = sleep_until(self.caller_waits.next().unwrap_or_else(Instant::now)), if self.caller_waits.next().is_some() => {
                    self.on_caller_wait_over();
                }
            }
            self.transcript.next_moment();
            // Between a session's turns nobody takes events: they wait in the transcript for
            // the next turn (or `close`).
            let handed_over = caller.turn.is_some() && self.stage();
            self.track_caller_waits();
            if caller.session.is_some() {
                // A one-shot run ends with the agent's output, whatever turn ends it reports.
                if let Some(result) = self.turn_end.take() {
                    self.end_turn(result, &mut caller).await;
                }
            }
            if handed_over && (current_thread || self.caller_is_task()) {
                // The caller's task, woken by the batch, runs before this one reads on: a
                // caller that keeps up then takes each batch as it is made, where the driver
                // would otherwise fill the whole budget first (an agent's full pipe is always
                // ready) and hand the caller a burst's first line only with its last. A caller
                // waiting on a thread of its own on a multi-thread runtime runs there anyway:
                // for it the yield only woke the runtime's other worker, once per batch.
                tokio::task::yield_now().await;
            }
        }
        match caller.session.take() {
            Some(session) => self.finish_session(io, session, caller.turn).await,
            None => self.finish_run(io, caller.turn).await,
        }
    }
}

/// How much of the agent's output the batch being handled took.
#[derive(Default)]
struct BatchSize {
    /// Lines and other items.
    items: usize,
    /// Bytes of the lines.
    bytes: usize,
    saw_line: bool,
}

impl BatchSize {
    fn add(&mut self, line_bytes: usize) {
        self.items += 1;
        self.bytes += line_bytes;
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
