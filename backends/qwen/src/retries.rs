//! Qwen Code's retries: only in its debug log (`<time> [WARN] [RETRY] [Persistent] Attempt 1
//! failed with status 429. Retrying in 30s... Error: …`), followed on both its interfaces. Past
//! its prefix, a line is the family's attempt line ([`agent_api_acp::Retry`]).

use agent_api::kit::transcript::Transcript;
use agent_api_acp::Retry;

/// The attempt line inside a debug-log line: past `[RETRY] ` and `[Persistent] `, when there.
fn attempt_line(line: &str) -> &str {
    let line = line.split_once("[RETRY] ").map_or(line, |(_, tail)| tail);
    line.strip_prefix("[Persistent] ").unwrap_or(line)
}

/// The retry a debug-log line reports, if any.
#[cfg(test)]
fn retry_in(line: &str) -> Option<Retry> {
    Retry::in_line(attempt_line(line))
}

/// A line of Qwen's debug log (or stderr): a retry line becomes its statuses.
pub(crate) fn read_log_line(line: &str, transcript: &mut Transcript) {
    Retry::report(attempt_line(line), transcript);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn debug_log_lines_are_read_with_their_delays() {
        let backoff = "2026-11-25T19:00:00.000Z [WARN] [RETRY] Attempt 1 failed with status 429. Retrying with backoff... Error: 429 quota";
        let limited = retry_in(backoff).unwrap();
        assert_eq!(
            (
                limited.attempt,
                limited.status,
                limited.limited,
                limited.delay
            ),
            (1, Some(429), true, None)
        );
        let server = retry_in(
            "2026-11-25T19:00:01.000Z [ERROR] [RETRY] Attempt 2 failed with status 500. Retrying with backoff... Error: overloaded?",
        )
        .unwrap();
        assert_eq!(
            (server.attempt, server.status, server.overloaded),
            (2, Some(500), false),
            "words after the retry are the error's, not read"
        );
        let explicit = "… [WARN] [RETRY] Attempt 3 failed with status 429. Retrying after explicit delay of 5000ms... Error";
        assert_eq!(
            retry_in(explicit).unwrap().delay,
            Some(Duration::from_millis(5000))
        );
        let persistent = "… [WARN] [RETRY] [Persistent] Attempt 4 failed with status 429. Retrying in 30s... Error";
        let persistent = retry_in(persistent).unwrap();
        assert_eq!(
            (persistent.attempt, persistent.delay),
            (4, Some(Duration::from_secs(30)))
        );
        assert_eq!(
            retry_in("2026-11-25T19:00:00.000Z [DEBUG] [CONFIG] Attempt nothing"),
            None
        );
    }
}
