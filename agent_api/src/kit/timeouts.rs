//! The run's separate timeouts (`spec/run-protocol.md` §4): total, start-up (until the agent's
//! first message), idle (no output) and per turn. The driver asks for the nearest deadline,
//! tells the clock about output, and asks it which timeout expired.

use tokio::time::{sleep_until, Instant};

use crate::vocabulary::error::{AgentError, TimeoutKind, TimeoutLimits};

/// The clock of one run (or session): which deadlines are armed and which one expired.
#[derive(Debug)]
pub(crate) struct Clock {
    limits: TimeoutLimits,
    /// When the run (or the current turn) began; `None` between a session's turns.
    started: Option<Instant>,
    last_output: Instant,
    seen_output: bool,
    /// Since when the agent has said nothing but that it retries (a retry notice, no progress
    /// since): it is starting again, so the start-up timeout counts from then.
    retrying_since: Option<Instant>,
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
            retrying_since: None,
            waiting: false,
            fired: None,
        }
    }

    /// A run or a turn begins: its deadlines count from now.
    pub(crate) fn start(&mut self) {
        let now = Instant::now();
        self.started = Some(now);
        self.last_output = now;
        self.retrying_since = None;
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
        self.retrying_since = None;
    }

    /// The agent wrote only that it retries (`api_retry`): no progress. An agent that only
    /// retries (waiting for a network that never comes, say) is not working: idle counts on
    /// from its last real output, and the start-up timeout from its first retry notice since.
    pub(crate) fn on_retry(&mut self) {
        self.retrying_since.get_or_insert_with(Instant::now);
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
                    TimeoutKind::Startup => match self.retrying_since {
                        Some(since) => since,
                        None if self.seen_output => return None,
                        None => started,
                    },
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

    /// An agent that only retries after its first lines is starting again: the start-up timeout
    /// counts from its first retry notice and ends at its next real output; idle is not reset by
    /// a retry notice.
    #[test]
    fn retry_notices_alone_are_no_progress_and_arm_the_startup_timeout_again() {
        let mut clock = Clock::new(limits(5, 600));
        clock.start();
        clock.on_output();
        assert_eq!(clock.next().map(|(_, k)| k), Some(TimeoutKind::Idle));
        let idle_at = clock.next().unwrap().0;
        clock.on_retry();
        let (at, kind) = clock.next().unwrap();
        assert_eq!(
            kind,
            TimeoutKind::Startup,
            "retrying: start-up counts again"
        );
        assert!(at <= Instant::now() + Duration::from_secs(5));
        clock.on_retry();
        assert_eq!(
            clock.next().unwrap().0,
            at,
            "from the first retry notice, not the last"
        );
        clock.on_output();
        let (at, kind) = clock.next().unwrap();
        assert_eq!(kind, TimeoutKind::Idle, "progress again: start-up is over");
        assert!(at >= idle_at);
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
