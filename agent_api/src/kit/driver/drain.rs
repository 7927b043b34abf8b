//! After the agent exits: reading what it left in its pipe, and what a process it started
//! (a shell's background child holding its stdout) still writes.
//!
//! Nothing already in the pipe is ever cut: the drain reads on while output is ready, its grace
//! counting from the last output read, and when the grace runs out it does not stop reading but
//! kills every process the agent started (the writers, in its group or not) and reads the pipe
//! to its end. Only a writer that escaped the kill (outside the agent's group, marker and
//! descendants) can hold the pipe open after that; it is given [`TO_THE_END`]. Silence is only
//! a guess on a loaded machine (output the runtime has not seen ready yet looks like silence),
//! and so is any bound in time on reading a pipe-full: they decide when to kill, never what of
//! the agent's own output is read.

use std::time::Duration;

use tokio::time::Instant;

use super::deadline_after;

/// How many graces an exited agent's output may flow on at most before its writers are killed.
pub(super) const MAX_GRACES: u32 = 15;

/// After the kill, how long the pipe has to reach its end: what is left is at most a pipe-full,
/// read within microseconds unless the machine is loaded; only a writer that escaped the kill
/// makes the drain wait this long. Not a multiple of the grace, which a caller may make as short
/// as it likes.
pub(super) const TO_THE_END: Duration = Duration::from_secs(5);

/// The state of one drain.
pub(super) struct Drain {
    grace: Duration,
    /// When the drain's current stage runs out (unless more output is read first, before the
    /// kill).
    deadline: Instant,
    /// The latest `deadline` may move to, however the output flows.
    cap: Instant,
    /// Whether the agent's writers were killed (the drain's second stage: read to the end).
    writers_killed: bool,
}

/// What to do when the drain's deadline passed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Expiry {
    /// Output was still ready: read on.
    ReadOn,
    /// Kill every process the agent started, then read the pipe to its end.
    KillWriters,
    /// The pipe stayed open past every bound, its writers killed: stop reading.
    GiveUp,
}

impl Drain {
    /// A drain starting now, when the agent exited.
    pub(super) fn start(grace: Duration) -> Self {
        Self {
            grace,
            deadline: deadline_after(grace),
            cap: deadline_after(grace * MAX_GRACES),
            writers_killed: false,
        }
    }

    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Output was read: before the kill, the grace starts again (no later than the cap).
    pub(super) fn on_output(&mut self) {
        if !self.writers_killed {
            self.deadline = deadline_after(self.grace).min(self.cap);
        }
    }

    /// The deadline passed; `flowing` says whether output was ready when it did (and was read).
    pub(super) fn on_expiry(&mut self, flowing: bool) -> Expiry {
        if self.writers_killed {
            return Expiry::GiveUp;
        }
        if flowing && Instant::now() < self.cap {
            return Expiry::ReadOn;
        }
        self.writers_killed = true;
        self.deadline = deadline_after(TO_THE_END);
        Expiry::KillWriters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn output_ready_at_the_deadline_is_read_on_and_silence_kills_the_writers() {
        let grace = Duration::from_millis(10);
        let mut drain = Drain::start(grace);
        tokio::time::sleep(grace).await;
        assert_eq!(drain.on_expiry(true), Expiry::ReadOn);
        drain.on_output();
        assert!(
            drain.deadline() > Instant::now(),
            "output starts the grace again"
        );
        assert_eq!(drain.on_expiry(false), Expiry::KillWriters);
        let to_the_end = drain.deadline();
        assert!(to_the_end >= Instant::now() + TO_THE_END - grace);
        drain.on_output();
        assert_eq!(
            drain.deadline(),
            to_the_end,
            "after the kill only the pipe's end or the bound ends the drain"
        );
        assert_eq!(drain.on_expiry(true), Expiry::GiveUp);
    }

    #[tokio::test]
    async fn a_writer_that_never_falls_silent_is_killed_at_the_cap() {
        let grace = Duration::from_millis(10);
        let mut drain = Drain::start(grace);
        tokio::time::sleep(grace * MAX_GRACES).await;
        drain.on_output();
        assert!(
            drain.deadline() <= Instant::now(),
            "the deadline never moves past the cap"
        );
        assert_eq!(drain.on_expiry(true), Expiry::KillWriters);
    }
}
