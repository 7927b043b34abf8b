//! The end of a run: what is left of the agent is reaped, the protocol says how the run went,
//! and the transcript's end is written.

use std::time::Duration;

use super::{signal_group, Core, ExitInfo, Io, Stop, Turn};
use crate::pipeline::transcript::SessionEnd;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::run::RunCompletion;
use crate::vocabulary::universal::{SessionEndReason, TerminatedBy};

impl Core {
    /// The end of a one-shot run: how it went, its last events, then its completion.
    pub(super) async fn finish_run(mut self, io: Io, turn: Option<Turn>) {
        let result = self.finish(io, turn.as_ref()).await;
        self.turn_ended_for_steers();
        self.flush().await;
        drop(self.events_tx.take());
        if let Some(turn) = turn {
            let _ = turn.completion_tx.send(result);
        }
    }

    /// Reaps what is left, asks the protocol how the run went, and writes the transcript's end.
    async fn finish(&mut self, io: Io, turn: Option<&Turn>) -> Result<RunCompletion, AgentError> {
        let info = self.reap(io).await;
        let mut result = match self.fatal.take() {
            Some(error) => Err(error),
            None => match self.with_ctx(|p, ctx| p.finish(&info, ctx)) {
                Some(result) => self.settings.limits.enforce(result, &mut self.transcript),
                None => Err(self
                    .fatal
                    .take()
                    .expect("with_ctx records why it returned nothing")),
            },
        };
        // Read only now: a cancel requested before the completion is decided wins (cancel wins ties).
        if turn.is_some_and(Turn::cancel_requested) || self.stop == Some(Stop::Cancelled) {
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
    pub(super) async fn reap(&mut self, io: Io) -> ExitInfo {
        let Io {
            source,
            lifecycle,
            stderr_task,
            mut stderr_live,
        } = io;
        drop(source);
        if let Some(pgid) = self.pgid {
            signal_group(pgid, libc::SIGKILL);
        }
        // Whatever ended the run (the agent's exit, a dead connection), nothing of it stays on
        // the far side: the completion comes only once the far group is stopped.
        if let Some(far) = &self.far {
            far.stop().await;
        }
        drop(lifecycle);
        let stderr = match stderr_task {
            Some(task) => tokio::time::timeout(Duration::from_secs(2), task)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default(),
            None => std::mem::take(&mut self.replay_stderr),
        };
        if let Some(follower) = &mut self.follower {
            follower.stop();
        }
        // The stderr read to its end: lines the loop had not taken yet still reach the protocol,
        // before it finishes the run.
        while let Some(line) = stderr_live.as_mut().and_then(|rx| rx.try_recv().ok()) {
            self.on_stderr(&line);
        }
        let (exit_code, signal) = self.exit.unwrap_or((None, None));
        ExitInfo {
            exit_code,
            signal,
            stderr,
            oversized_lines: self.oversized_lines,
            longest_oversized_line: self.longest_oversized_line,
            line_cap: self.settings.line_cap,
            stopped_by_daemon: self.stop.is_some(),
        }
    }

    /// Fills what the protocol left empty from the transcript, and bounds the data.
    pub(super) fn complete_fields(&self, mut completion: RunCompletion) -> RunCompletion {
        if completion.native_session_id.is_none() {
            completion.native_session_id = self.transcript.native_session_id().map(str::to_string);
        }
        if completion.final_text.is_none() {
            completion.final_text = self.transcript.last_assistant_text().map(str::to_string);
        }
        if completion.session.is_none() {
            completion.session = completion.native_session_id.as_ref().map(|id| {
                crate::vocabulary::session_ref::ran(
                    &self.settings.agent_kind,
                    id,
                    self.settings.working_dir.as_deref(),
                )
            });
        }
        completion.data = completion.data.map(crate::guards::bounds::bound_data);
        completion.launcher = completion.launcher.or_else(|| self.launcher.clone());
        completion
    }

    /// Writes the end of the transcript for `result` and completes the completion's fields.
    pub(super) fn conclude(
        &mut self,
        result: Result<RunCompletion, AgentError>,
        info: &ExitInfo,
    ) -> Result<RunCompletion, AgentError> {
        let result = match &self.settings.output_schema {
            Some(schema) => result
                .map(|c| self.complete_fields(c))
                .and_then(|c| crate::pipeline::structured::conform(schema, c)),
            None => result,
        };
        // Whichever backend built the error, no key it quoted reaches the caller.
        match result.map_err(AgentError::redacted) {
            Ok(mut completion) => {
                let end = SessionEnd::completed();
                self.transcript.end(SessionEnd {
                    exit_code: info.exit_code,
                    ..end
                });
                completion.exit_code = completion.exit_code.or(info.exit_code);
                Ok(self.complete_fields(completion))
            }
            Err(error) => {
                // Nothing but the session's end may follow the terminal error.
                self.transcript.close_open();
                self.transcript.terminal_error(&error);
                self.transcript
                    .end(failed_end(&error, self.stop.is_some(), info));
                Err(error)
            }
        }
    }
}

/// The end of a session its agent failed: `stopped`, the daemon ended it (terminated, the
/// agent's stderr not kept); else the agent did (an error, with its stderr). The run's and a
/// warm session's driver both end this way.
pub(super) fn failed_end(error: &AgentError, stopped: bool, info: &ExitInfo) -> SessionEnd {
    SessionEnd {
        reason: if stopped {
            SessionEndReason::Terminated
        } else {
            SessionEndReason::Error
        },
        terminated_by: if stopped {
            TerminatedBy::Daemon
        } else {
            TerminatedBy::Agent
        },
        message: Some(crate::guards::bounds::truncate_message(
            &error.to_string(),
            crate::guards::bounds::MESSAGE_BOUND,
        )),
        exit_code: info.exit_code,
        stderr: (!stopped).then(|| info.stderr.output()),
    }
}
