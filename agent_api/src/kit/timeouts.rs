//! The run's separate timeouts (`spec/run-protocol.md` §4): total, start-up (until the agent's
//! first message), idle (no output) and per turn. The driver asks for the nearest deadline,
//! tells the clock about output, and asks it which timeout expired.

use tokio::time::{sleep_until, Instant};

use crate::contract::error::{AgentError, TimeoutKind, TimeoutLimits};

/// The clock of one run (or session): which deadlines are armed and which one expired.
#[derive(Debug)]
pub(crate) struct Clock {
    limits: TimeoutLimits,
    /// When the run (or the current turn) began; `None` between a session's turns.
    started: Option<Instant>,
    last_output: Instant,
    seen_output: bool,
    /// Whether the run waits for its caller (a permission or a question): the agent waits too,
    /// so it is not idle.
    waiting: bool,
    fired: Option<TimeoutKind>,
}

impl Clock {
    pub(crate) fn new(limits: TimeoutLimits) -> Self {
        Self {
            limits,
            started: None,
            last_output: Instant::now(),
            seen_output: false,
            waiting: false,
            fired: None,
        }
    }

    /// A run or a turn begins: its deadlines count from now.
    pub(crate) fn start(&mut self) {
        let now = Instant::now();
        self.started = Some(now);
        self.last_output = now;
        self.fired = None;
    }

    /// Between a session's turns nothing is timed.
    pub(crate) fn pause(&mut self) {
        self.started = None;
    }

    /// The agent wrote something.
    pub(crate) fn on_output(&mut self) {
        self.last_output = Instant::now();
        self.seen_output = true;
    }

    /// Whether the run now waits for its caller; idle counts again from when it stops waiting.
    pub(crate) fn set_waiting(&mut self, waiting: bool) {
        if self.waiting && !waiting {
            self.last_output = Instant::now();
        }
        self.waiting = waiting;
    }

    /// The nearest armed deadline and its kind.
    pub(crate) fn next(&self) -> Option<(Instant, TimeoutKind)> {
        let started = self.started?;
        self.limits
            .each()
            .into_iter()
            .filter_map(|(kind, limit)| {
                let from = match kind {
                    TimeoutKind::Idle | TimeoutKind::Startup if self.waiting => return None,
                    TimeoutKind::Idle => self.last_output,
                    TimeoutKind::Startup if self.seen_output => return None,
                    _ => started,
                };
                // Past the clock's range is as good as no deadline.
                Some((from.checked_add(limit?)?, kind))
            })
            .min_by_key(|(at, _)| *at)
    }

    /// Records that `kind` expired (the first one counts).
    pub(crate) fn fire(&mut self, kind: TimeoutKind) {
        self.fired.get_or_insert(kind);
    }

    /// The typed error for the timeout that expired.
    pub(crate) fn error(&self) -> AgentError {
        let which = self.fired.unwrap_or(TimeoutKind::Total);
        let after = match which {
            TimeoutKind::Startup => self.limits.startup,
            TimeoutKind::Idle => self.limits.idle,
            TimeoutKind::Turn => self.limits.turn,
            _ => self.limits.total,
        };
        AgentError::Timeout {
            which,
            after: after.unwrap_or_default(),
        }
    }
}

/// Waits for `next` (from [`Clock::next`]) and says which timeout it was; never, for `None`.
pub(crate) async fn expiry(next: Option<(Instant, TimeoutKind)>) -> TimeoutKind {
    match next {
        Some((at, kind)) => {
            sleep_until(at).await;
            kind
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(startup: u64, idle: u64) -> TimeoutLimits {
        TimeoutLimits {
            startup: Some(Duration::from_secs(startup)),
            idle: Some(Duration::from_secs(idle)),
            ..Default::default()
        }
    }

    #[test]
    fn startup_counts_until_the_first_output_then_idle_takes_over() {
        let mut clock = Clock::new(limits(5, 10));
        assert_eq!(clock.next(), None, "nothing is timed before the run starts");
        clock.start();
        assert_eq!(clock.next().map(|(_, k)| k), Some(TimeoutKind::Startup));
        clock.on_output();
        let (at, kind) = clock.next().unwrap();
        assert_eq!(kind, TimeoutKind::Idle);
        assert!(at > Instant::now() + Duration::from_secs(9));
        clock.pause();
        assert_eq!(clock.next(), None);
    }

    /// A run waiting for its caller's answer (a permission, a question) is not idle: the agent is
    /// waiting too. Idle counts again from the answer.
    #[test]
    fn idle_does_not_count_while_the_run_waits_for_its_caller() {
        let mut clock = Clock::new(limits(5, 10));
        clock.start();
        clock.on_output();
        clock.set_waiting(true);
        assert_eq!(
            clock.next(),
            None,
            "only idle and startup were armed, and neither counts now"
        );
        clock.set_waiting(false);
        let (at, kind) = clock.next().unwrap();
        assert_eq!(kind, TimeoutKind::Idle);
        assert!(
            at > Instant::now() + Duration::from_secs(9),
            "idle counts from the answer"
        );
    }

    #[test]
    fn the_error_names_the_kind_and_its_limit() {
        let mut clock = Clock::new(limits(5, 10));
        clock.fire(TimeoutKind::Idle);
        clock.fire(TimeoutKind::Startup);
        assert!(
            matches!(clock.error(), AgentError::Timeout { which: TimeoutKind::Idle, after } if after == Duration::from_secs(10))
        );
    }
}
