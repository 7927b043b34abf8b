//! Deadlines on the caller's answers ([`CallerWait`]): each permission request or question that
//! waits for the caller gets one when it is asked; past it, the request is decided as
//! [`OnCallerTimeout`] says, and its resolved event says `decided_by: timeout`.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::{deadline_after, Core, Stop};
use crate::vocabulary::request::{CallerWait, OnCallerTimeout};
use crate::vocabulary::run::{ControlCommand, PermissionDecision, QuestionAnswer};
use crate::vocabulary::universal::DecidedBy;

/// What is waiting: a permission request or a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Asked {
    Permission,
    Question,
}

/// The requests waiting for the caller under a limit, with their deadlines.
#[derive(Debug, Default)]
pub(super) struct CallerWaits {
    limits: CallerWait,
    deadlines: HashMap<String, (Instant, Asked)>,
    /// The transcript's [`Transcript::requests_changed`](crate::kit::transcript::Transcript::requests_changed) when last looked at.
    seen: u64,
}

impl CallerWaits {
    pub(super) fn new(limits: CallerWait) -> Self {
        Self {
            limits,
            deadlines: HashMap::new(),
            seen: 0,
        }
    }

    /// The earliest deadline, if any request waits under a limit.
    pub(super) fn next(&self) -> Option<Instant> {
        self.deadlines.values().map(|(at, _)| *at).min()
    }

    fn limit(&self, asked: Asked) -> Option<Duration> {
        match asked {
            Asked::Permission => self.limits.permission,
            Asked::Question => self.limits.question,
        }
    }
}

impl Core {
    /// Gives each newly waiting request its deadline and forgets the ones that were answered.
    pub(super) fn track_caller_waits(&mut self) {
        let waits = &mut self.caller_waits;
        if waits.limits.permission.is_none() && waits.limits.question.is_none() {
            return;
        }
        let changed = self.transcript.requests_changed();
        if changed == waits.seen {
            return;
        }
        waits.seen = changed;
        let asked = self
            .transcript
            .pending_permissions()
            .into_iter()
            .map(|id| (id, Asked::Permission));
        let asked = asked.chain(
            self.transcript
                .pending_questions()
                .into_iter()
                .map(|id| (id, Asked::Question)),
        );
        let mut still = HashMap::new();
        for (id, kind) in asked {
            let known = waits.deadlines.remove(&id);
            if let Some(entry) =
                known.or_else(|| waits.limit(kind).map(|limit| (deadline_after(limit), kind)))
            {
                still.insert(id, entry);
            }
        }
        waits.deadlines = still;
    }

    /// Decides every request whose deadline passed, as the caller's [`OnCallerTimeout`] says.
    pub(super) fn on_caller_wait_over(&mut self) {
        let now = Instant::now();
        let mut expired: Vec<(String, Asked)> = self
            .caller_waits
            .deadlines
            .iter()
            .filter(|(_, (at, _))| *at <= now)
            .map(|(id, (_, kind))| (id.clone(), *kind))
            .collect();
        expired.sort();
        for (id, _) in &expired {
            self.caller_waits.deadlines.remove(id);
        }
        if expired.is_empty() || self.stop.is_some() {
            return;
        }
        if self.caller_waits.limits.then == OnCallerTimeout::CancelRun {
            // The requests resolve when the run stops, decided by the timeout.
            self.transcript.set_timed_out();
            self.begin_stop(Stop::Cancelled);
            return;
        }
        for (id, asked) in expired {
            let command = match asked {
                Asked::Permission => {
                    let message =
                        "The caller did not answer in time; the request is denied.".to_string();
                    ControlCommand::Permission {
                        id,
                        decision: PermissionDecision::Deny {
                            message: Some(message),
                        },
                    }
                }
                Asked::Question => ControlCommand::Question {
                    id,
                    answer: QuestionAnswer::Reject,
                },
            };
            self.transcript.set_decider(Some(DecidedBy::Timeout));
            // An answer the agent no longer takes (it withdrew the request) is no error here.
            let _ = self.with_ctx(|p, ctx| p.on_control(command, ctx));
            self.transcript.set_decider(None);
        }
    }
}
