//! The session side of the driver (`spec/run-protocol.md` §8): one agent process, one
//! transcript, and a run-like handle per turn, opened by the caller's commands. The loop is the
//! run's ([`Core::drive`]); what is here is where a session's turns come from and how they end.
//!
//! The turn's events go out through the turn's own budgeted channel; between turns the
//! transcript holds what the agent writes until the next turn (or `close`) takes it, so the
//! session's events stay one gap-free sequence.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{deadline_after, Caller, Core, Io, Protocol, RunSettings, Stop, Transport, Turn};
use crate::contract::handle::RunHandle;
use crate::contract::session::{lock, Engine, Session, SessionCommand, SessionShared, WarmSession};
use crate::pipeline::transcript::SessionEnd;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::request::Prompt;
use crate::vocabulary::run::RunCompletion;
use crate::vocabulary::universal::UniversalEvent;

/// Starts a session on the current tokio runtime: the agent of `transport` takes turns through
/// [`Protocol::send_turn`] and ends each with [`super::Ctx::end_turn`]. The request's timeouts
/// (in `settings`: total, turn, start-up, idle) apply to each turn; nothing is timed between turns.
pub fn start_session(
    settings: RunSettings,
    transport: Transport,
    protocol: Box<dyn Protocol>,
) -> Session {
    let agent_kind = settings.agent_kind.clone();
    let (core, io) = Core::new(settings, transport, protocol);
    let process_id = core.pgid.and_then(|pgid| u32::try_from(pgid).ok());
    let launcher = core.launcher.clone();
    let (commands_tx, commands) = mpsc::unbounded_channel();
    let shared = Arc::new(Mutex::new(SessionShared::default()));
    let abandoned = CancellationToken::new();
    let commands = Commands {
        rx: commands,
        open: true,
        turns: 0,
        shared: shared.clone(),
        close: None,
    };
    let caller = Caller {
        abandoned: abandoned.clone(),
        turn: None,
        session: Some(commands),
    };
    tokio::spawn(core.drive(io, caller));
    let warm = WarmSession {
        commands: commands_tx,
        shared,
        abandoned,
        process_id,
        launcher,
    };
    Session::new(agent_kind, Engine::Warm(warm))
}

/// Where a session's turns come from: the caller's commands, and what the session keeps.
pub(super) struct Commands {
    rx: mpsc::UnboundedReceiver<SessionCommand>,
    open: bool,
    turns: u32,
    shared: Arc<Mutex<SessionShared>>,
    /// `close` was asked: where its trailing events go.
    close: Option<oneshot::Sender<Vec<UniversalEvent>>>,
}

impl Commands {
    pub(super) fn is_open(&self) -> bool {
        self.open
    }
}

/// The session's next command; never ready for a one-shot run.
pub(super) async fn next_command(session: &mut Option<Commands>) -> Option<SessionCommand> {
    match session {
        Some(session) => session.rx.recv().await,
        None => std::future::pending().await,
    }
}

impl Core {
    pub(super) fn on_command(&mut self, command: Option<SessionCommand>, caller: &mut Caller) {
        let Some(session) = caller.session.as_mut() else {
            return;
        };
        match command {
            None => session.open = false,
            Some(SessionCommand::Turn(prompt, reply)) => {
                let result = self.start_turn(&prompt, caller);
                let _ = reply.send(result);
            }
            Some(SessionCommand::SetMode(mode, reply)) => {
                let _ = reply.send(self.set_mode(
                    &mode,
                    session.close.is_some(),
                    caller.turn.is_some(),
                ));
            }
            Some(SessionCommand::Close(reply)) => {
                session.close = Some(reply);
                if let Some(turn) = &caller.turn {
                    turn.cancel_requested.store(true, Ordering::SeqCst);
                }
                self.stdin = None;
                if self.escalate_at.is_none() {
                    self.escalate_at = Some(deadline_after(self.settings.shutdown_grace));
                }
            }
        }
    }

    /// Switches the agent's mode between turns, through the protocol.
    fn set_mode(
        &mut self,
        mode: &crate::vocabulary::modes::AgentMode,
        closing: bool,
        in_turn: bool,
    ) -> Result<(), AgentError> {
        if closing || self.fatal.is_some() || self.exit.is_some() || self.source_done {
            return Err(AgentError::SessionClosed);
        }
        if in_turn {
            return Err(AgentError::TurnInProgress);
        }
        let switched = self
            .with_ctx(|p, ctx| p.set_mode(mode, ctx))
            .unwrap_or(Err(AgentError::SessionClosed));
        let default = crate::vocabulary::modes::AgentMode::Default;
        match switched {
            Ok(()) => {
                self.settings.mode = Some(mode.clone());
                Ok(())
            }
            // Every backend takes the default mode: a session already in it needs no switch,
            // whether or not the agent can switch modes.
            Err(AgentError::UnsupportedCapability { .. })
                if *mode == default
                    && self.settings.mode.as_ref().is_none_or(|m| *m == default) =>
            {
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Opens the next turn: its channels and handle, its opening delimiter, the prompt to the agent.
    fn start_turn(
        &mut self,
        prompt: &Prompt,
        caller: &mut Caller,
    ) -> Result<RunHandle, AgentError> {
        let Some(session) = caller.session.as_mut() else {
            return Err(AgentError::SessionClosed);
        };
        if session.close.is_some()
            || self.fatal.is_some()
            || self.exit.is_some()
            || self.source_done
        {
            return Err(AgentError::SessionClosed);
        }
        if caller.turn.is_some() {
            return Err(AgentError::TurnInProgress);
        }
        let settings = &self.settings;
        if !prompt.images.is_empty() && !settings.prompt_images {
            let capability = agent_api_capabilities::IMAGES.to_string();
            return Err(AgentError::UnsupportedCapability {
                kind: settings.agent_kind.to_string(),
                capability,
            });
        }
        crate::pipeline::images::ImageFile::check_all(prompt)?;
        let (turn, handle) = self.open_turn(CancellationToken::new(), true);
        session.turns += 1;
        self.transcript.begin_turn();
        self.transcript
            .daemon_status("turn_started", Some(format!("turn {}", session.turns)));
        caller.turn = Some(turn);
        if let Some(Err(error)) = self.with_ctx(|p, ctx| p.send_turn(prompt, ctx)) {
            self.turn_end.get_or_insert(Err(error));
        }
        Ok(handle)
    }

    /// What the turn's completion is: a stop the driver made wins over what the agent reported.
    fn turn_result(
        &mut self,
        turn: &Turn,
        reported: Result<RunCompletion, AgentError>,
    ) -> Result<RunCompletion, AgentError> {
        let cancelled =
            turn.cancel_requested() || matches!(self.stop, Some(Stop::Cancelled | Stop::Abandoned));
        let result = if cancelled {
            Err(AgentError::Cancelled)
        } else if self.stop == Some(Stop::TimedOut) {
            Err(self.clock.error())
        } else {
            let limits = self.settings.limits;
            limits
                .enforce(reported, &mut self.transcript)
                .map(|completion| self.complete_fields(completion))
        };
        // Whichever backend built the error, no key it quoted reaches the caller.
        result.map_err(AgentError::redacted)
    }

    /// The agent ended the turn: write the closing delimiter, send the turn's last events,
    /// then resolve its completion. A stop in progress is over: the session lives on.
    pub(super) async fn end_turn(
        &mut self,
        reported: Result<RunCompletion, AgentError>,
        caller: &mut Caller,
    ) {
        let (Some(turn), Some(session)) = (caller.turn.take(), caller.session.as_mut()) else {
            return;
        };
        let result = self.turn_result(&turn, reported);
        self.turn_ended_for_steers();
        self.clock.pause();
        self.close_turn(&result, session.turns);
        if session.close.is_none() && self.fatal.is_none() {
            self.stop = None;
            self.escalate_at = None;
            self.escalation_stage = 0;
        }
        self.flush().await;
        self.events_tx = None;
        lock(&session.shared).native_session_id =
            self.transcript.native_session_id().map(str::to_string);
        let _ = turn.completion_tx.send(result);
    }

    /// Writes the turn's closing delimiter: `turn_completed`, or `turn_failed` and the terminal error.
    fn close_turn(&mut self, result: &Result<RunCompletion, AgentError>, turns: u32) {
        let transcript = &mut self.transcript;
        transcript.set_raw(None);
        match result {
            Ok(_) => {
                transcript.daemon_status("turn_completed", Some(format!("turn {turns}")));
            }
            Err(error) => {
                transcript.close_open();
                transcript.daemon_status("turn_failed", Some(format!("turn {turns}")));
                transcript.terminal_error(error);
            }
        }
    }

    /// The agent is gone: the turn in progress fails, the session ends, and what follows the
    /// last turn waits for `close`.
    pub(super) async fn finish_session(
        mut self,
        io: Io,
        mut session: Commands,
        turn: Option<Turn>,
    ) {
        session.open = false;
        let info = self.reap(io).await;
        let closing = session.close.is_some() || self.stop == Some(Stop::Abandoned);
        let error = self.fatal.take().unwrap_or_else(|| info.early_exit_error());
        let stopped = self.stop.is_some() || closing;
        let end = if closing && turn.is_none() {
            SessionEnd {
                exit_code: info.exit_code,
                ..SessionEnd::completed()
            }
        } else {
            super::finish::failed_end(&error, stopped, &info)
        };
        // An agent that died in its first turn had reported its session (and recorded it, as a
        // CLI does before it answers): the session's snapshot can still be taken. Set before the
        // turn's completion, which a caller takes the snapshot after.
        if let Some(id) = self.transcript.native_session_id() {
            lock(&session.shared)
                .native_session_id
                .get_or_insert_with(|| id.to_string());
        }
        self.turn_ended_for_steers();
        if let Some(turn) = turn {
            let result = self.turn_result(&turn, Err(error));
            self.close_turn(&result, session.turns);
            self.transcript.end(end);
            self.flush().await;
            self.events_tx = None;
            lock(&session.shared).closed = true;
            let _ = turn.completion_tx.send(result);
        } else {
            self.transcript.end(end);
        }
        let trailing: Vec<UniversalEvent> = self.transcript.drain().collect();
        let mut shared = lock(&session.shared);
        shared.closed = true;
        match session.close.take() {
            Some(reply) => {
                if let Err(events) = reply.send(trailing) {
                    shared.trailing = events;
                }
            }
            None => shared.trailing = trailing,
        }
        drop(shared);
        // Only now may a late `close` find the channel gone: the trailing events are in place.
        drop(session.rx);
    }
}
