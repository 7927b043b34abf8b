//! The session mode of the driver (`spec/run-protocol.md` §8): one agent process, one
//! transcript, and a run-like handle per turn.
//!
//! The turn's events go out through the turn's own budgeted channel; between turns the
//! transcript holds what the agent writes until the next turn (or `close`) takes it, so the
//! session's events stay one gap-free sequence.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::{budget, cancel_on, deadline_after, Core, Io, Protocol, RunSettings, Stop, Transport};
use crate::contract::error::AgentError;
use crate::contract::request::Prompt;
use crate::contract::run::{ControlMessage, RunCompletion, RunControl, RunGuard, RunHandle, ViewNeeds};
use crate::contract::session::{lock, Engine, Session, SessionCommand, SessionShared, WarmSession};
use crate::contract::universal::{SessionEnd, SessionEndReason, TerminatedBy, UniversalEvent};
use crate::kit::process::signal_group;
use crate::kit::timeouts::expiry;
use crate::kit::transport::wait_exit;

/// Starts a session on the current tokio runtime: the agent of `transport` takes turns through
/// [`Protocol::send_turn`] and ends each with [`super::Ctx::end_turn`]. The request's timeouts
/// (in `settings`: total, turn, start-up, idle) apply to each turn; nothing is timed between turns.
pub fn start_session(settings: RunSettings, transport: Transport, protocol: Box<dyn Protocol>) -> Session {
    let agent_kind = settings.agent_kind.clone();
    let view = Arc::new(ViewNeeds::new(settings.include_raw));
    let (core, io) = Core::new(settings, transport, protocol, view);
    let process_id = core.pgid.and_then(|pgid| u32::try_from(pgid).ok());
    let launcher = core.launcher.clone();
    let (commands_tx, commands) = mpsc::unbounded_channel();
    let shared = Arc::new(Mutex::new(SessionShared::default()));
    let abandoned = CancellationToken::new();
    let driver = SessionDriver { core, commands, commands_open: true, turn: None, turns: 0, shared: shared.clone(), close: None };
    tokio::spawn(driver.drive(io, abandoned.clone()));
    let warm = WarmSession { commands: commands_tx, shared, abandoned, process_id, launcher };
    Session::new(agent_kind, Engine::Warm(warm))
}

/// The turn in progress.
struct Turn {
    completion_tx: oneshot::Sender<Result<RunCompletion, AgentError>>,
    control_rx: mpsc::UnboundedReceiver<ControlMessage>,
    control_open: bool,
    cancel_requested: Arc<AtomicBool>,
    /// Cancelled when the caller drops every part of the turn's handle.
    abandoned: CancellationToken,
    dropped: bool,
}

struct SessionDriver {
    core: Core,
    commands: mpsc::UnboundedReceiver<SessionCommand>,
    commands_open: bool,
    turn: Option<Turn>,
    turns: u32,
    shared: Arc<Mutex<SessionShared>>,
    /// `close` was asked: where its trailing events go.
    close: Option<oneshot::Sender<Vec<UniversalEvent>>>,
}

async fn turn_control(turn: &mut Option<Turn>) -> Option<ControlMessage> {
    match turn {
        Some(turn) => turn.control_rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn cancelled(token: Option<CancellationToken>) {
    match token {
        Some(token) => token.cancelled().await,
        None => std::future::pending().await,
    }
}

impl SessionDriver {
    async fn drive(mut self, mut io: Io, abandoned: CancellationToken) {
        if let Some(Err(error)) = self.core.with_ctx(|p, ctx| p.start(ctx)) {
            self.core.fail(error);
        }
        while !(self.core.source_done && self.core.exit.is_some()) {
            let turn_abandoned = self.turn.as_ref().filter(|t| !t.dropped).map(|t| t.abandoned.clone());
            self.core.clock.set_waiting(self.core.transcript.awaits_caller());
            let next_timeout = self.core.clock.next();
            let control_open = self.turn.as_ref().is_some_and(|t| t.control_open);
            let core = &mut self.core;
            tokio::select! {
                biased;
                _ = abandoned.cancelled(), if core.stop != Some(Stop::Abandoned) => {
                    core.stop = Some(Stop::Abandoned);
                    core.kill_now();
                }
                _ = cancelled(turn_abandoned) => {
                    // Nobody follows this turn any more: stop it, softly; the session lives on.
                    if let Some(turn) = &mut self.turn {
                        turn.dropped = true;
                    }
                    core.begin_stop(Stop::Cancelled);
                }
                message = turn_control(&mut self.turn), if control_open => {
                    let mut open = true;
                    core.on_control(message, &mut open);
                    if let Some(turn) = self.turn.as_mut().filter(|_| !open) {
                        turn.control_open = false;
                    }
                }
                command = self.commands.recv(), if self.commands_open => self.on_command(command),
                kind = expiry(next_timeout), if core.stop.is_none() => core.on_timeout(kind),
                _ = sleep_until(core.escalate_at.unwrap_or_else(Instant::now)), if core.escalate_at.is_some() => core.escalate(),
                _ = sleep_until(core.closed_deadline.unwrap_or_else(Instant::now)), if core.closed_deadline.is_some() => {
                    core.on_output_closed_timeout();
                }
                _ = sleep_until(core.drain_deadline.unwrap_or_else(Instant::now)), if core.drain_deadline.is_some() && !core.source_done && core.may_read() => {
                    if let Some(pgid) = core.pgid {
                        signal_group(pgid, libc::SIGKILL);
                    }
                    core.source_done = true;
                }
                status = wait_exit(&mut io.lifecycle), if core.exit.is_none() => core.on_exit(status),
                room = core.room_for_pending(), if core.pending.is_some() => core.on_room(room),
                item = io.source.next(), if !core.source_done && core.may_read() => core.handle_ready(item, &mut io.source),
                _ = sleep_until(core.caller_waits.next().unwrap_or_else(Instant::now)), if core.caller_waits.next().is_some() => {
                    core.on_caller_wait_over();
                }
            }
            if self.turn.is_some() {
                self.core.stage();
            }
            self.core.track_caller_waits();
            if let Some(result) = self.core.turn_end.take() {
                self.end_turn(result).await;
            }
        }
        self.finish(io).await;
    }

    fn on_command(&mut self, command: Option<SessionCommand>) {
        match command {
            None => self.commands_open = false,
            Some(SessionCommand::Turn(prompt, reply)) => {
                let result = self.start_turn(&prompt);
                let _ = reply.send(result);
            }
            Some(SessionCommand::SetMode(mode, reply)) => {
                let _ = reply.send(self.set_mode(&mode));
            }
            Some(SessionCommand::Close(reply)) => {
                self.close = Some(reply);
                if let Some(turn) = &self.turn {
                    turn.cancel_requested.store(true, Ordering::SeqCst);
                }
                self.core.stdin = None;
                if self.core.escalate_at.is_none() {
                    self.core.escalate_at = Some(deadline_after(self.core.settings.shutdown_grace));
                }
            }
        }
    }

    /// Switches the agent's mode between turns, through the protocol.
    fn set_mode(&mut self, mode: &crate::contract::modes::AgentMode) -> Result<(), AgentError> {
        if self.close.is_some() || self.core.fatal.is_some() || self.core.exit.is_some() || self.core.source_done {
            return Err(AgentError::SessionClosed);
        }
        if self.turn.is_some() {
            return Err(AgentError::TurnInProgress);
        }
        self.core.with_ctx(|p, ctx| p.set_mode(mode, ctx)).unwrap_or(Err(AgentError::SessionClosed))
    }

    /// Opens the next turn: its channels and handle, its opening delimiter, the prompt to the agent.
    fn start_turn(&mut self, prompt: &Prompt) -> Result<RunHandle, AgentError> {
        if self.close.is_some() || self.core.fatal.is_some() || self.core.exit.is_some() || self.core.source_done {
            return Err(AgentError::SessionClosed);
        }
        if self.turn.is_some() {
            return Err(AgentError::TurnInProgress);
        }
        let settings = &self.core.settings;
        if !prompt.images.is_empty() && !settings.prompt_images {
            let capability = agent_api_capabilities::IMAGES.to_string();
            return Err(AgentError::UnsupportedCapability { kind: settings.agent_kind.to_string(), capability });
        }
        crate::contract::images::ImageFile::check_all(prompt)?;
        let (events_tx, events_rx) = budget::channel(settings.buffer_budget);
        let (completion_tx, completion_rx) = oneshot::channel();
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let cancel_requested = Arc::new(AtomicBool::new(false));
        let abandoned = CancellationToken::new();
        let guard = Arc::new(RunGuard { abandoned: abandoned.clone(), view: self.core.view.clone() });
        let control = RunControl::new(control_tx, cancel_requested.clone());
        if let Some(token) = settings.cancellation.clone() {
            tokio::spawn(cancel_on(token, control.clone()));
        }
        let handle = RunHandle::new(settings.agent_kind.clone(), settings.tools_structured, events_rx, completion_rx, control, guard);
        self.core.view.reset(settings.include_raw);
        self.turns += 1;
        self.core.clock.start();
        self.core.events_tx = Some(events_tx);
        self.core.transcript.begin_turn();
        self.core.transcript.daemon_status("turn_started", Some(format!("turn {}", self.turns)));
        self.turn = Some(Turn { completion_tx, control_rx, control_open: true, cancel_requested, abandoned, dropped: false });
        if let Some(Err(error)) = self.core.with_ctx(|p, ctx| p.send_turn(prompt, ctx)) {
            self.core.turn_end.get_or_insert(Err(error));
        }
        Ok(handle)
    }

    /// What the turn's completion is: a stop the driver made wins over what the agent reported.
    fn turn_result(&mut self, turn: &Turn, reported: Result<RunCompletion, AgentError>) -> Result<RunCompletion, AgentError> {
        let cancelled = turn.cancel_requested.load(Ordering::SeqCst) || matches!(self.core.stop, Some(Stop::Cancelled | Stop::Abandoned));
        let result = if cancelled {
            Err(AgentError::Cancelled)
        } else if self.core.stop == Some(Stop::TimedOut) {
            Err(self.core.clock.error())
        } else {
            let limits = self.core.settings.limits;
            limits.enforce(reported, &mut self.core.transcript).map(|completion| self.core.complete_fields(completion))
        };
        // Whichever backend built the error, no key it quoted reaches the caller.
        result.map_err(AgentError::redacted)
    }

    /// The agent ended the turn: write the closing delimiter, send the turn's last events,
    /// then resolve its completion. A stop in progress is over: the session lives on.
    async fn end_turn(&mut self, reported: Result<RunCompletion, AgentError>) {
        let Some(turn) = self.turn.take() else { return };
        let result = self.turn_result(&turn, reported);
        self.core.clock.pause();
        self.close_turn(&result);
        if self.close.is_none() && self.core.fatal.is_none() {
            self.core.stop = None;
            self.core.escalate_at = None;
            self.core.escalation_stage = 0;
        }
        self.core.flush().await;
        self.core.events_tx = None;
        lock(&self.shared).native_session_id = self.core.transcript.native_session_id().map(str::to_string);
        let _ = turn.completion_tx.send(result);
    }

    /// Writes the turn's closing delimiter: `turn_completed`, or `turn_failed` and the terminal error.
    fn close_turn(&mut self, result: &Result<RunCompletion, AgentError>) {
        let transcript = &mut self.core.transcript;
        transcript.set_raw(None);
        match result {
            Ok(_) => {
                transcript.daemon_status("turn_completed", Some(format!("turn {}", self.turns)));
            }
            Err(error) => {
                transcript.close_open();
                transcript.daemon_status("turn_failed", Some(format!("turn {}", self.turns)));
                transcript.terminal_error(error);
            }
        }
    }

    /// The agent is gone: the turn in progress fails, the session ends, and what follows the
    /// last turn waits for `close`.
    async fn finish(mut self, io: Io) {
        self.commands_open = false;
        let info = self.core.reap(io).await;
        let closing = self.close.is_some() || self.core.stop == Some(Stop::Abandoned);
        let error = self.core.fatal.take().unwrap_or_else(|| info.early_exit_error());
        let stopped = self.core.stop.is_some() || closing;
        let end = if closing && self.turn.is_none() {
            SessionEnd { exit_code: info.exit_code, ..SessionEnd::completed() }
        } else {
            SessionEnd {
                reason: if stopped { SessionEndReason::Terminated } else { SessionEndReason::Error },
                terminated_by: if stopped { TerminatedBy::Daemon } else { TerminatedBy::Agent },
                message: Some(crate::contract::bounds::truncate_message(&error.to_string(), crate::contract::bounds::MESSAGE_BOUND)),
                exit_code: info.exit_code,
                stderr: (!stopped).then(|| info.stderr.output()),
            }
        };
        if let Some(turn) = self.turn.take() {
            let result = self.turn_result(&turn, Err(error));
            self.close_turn(&result);
            self.core.transcript.end(end);
            self.core.flush().await;
            self.core.events_tx = None;
            let mut shared = lock(&self.shared);
            shared.closed = true;
            drop(shared);
            let _ = turn.completion_tx.send(result);
        } else {
            self.core.transcript.end(end);
        }
        let trailing: Vec<UniversalEvent> = self.core.transcript.drain().collect();
        let mut shared = lock(&self.shared);
        shared.closed = true;
        match self.close.take() {
            Some(reply) => {
                if let Err(events) = reply.send(trailing) {
                    shared.trailing = events;
                }
            }
            None => shared.trailing = trailing,
        }
        drop(shared);
        // Only now may a late `close` find the channel gone: the trailing events are in place.
        drop(self.commands);
    }
}
