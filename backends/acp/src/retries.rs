//! Retries as CLIs of this family report them, one line per failed attempt
//! (`Attempt 2 failed with status 429. Retrying with backoff...`, `Attempt 1 failed: <message>.
//! Retrying after 5000ms...`), on stderr or in a debug log: the agent's crate says where
//! ([`crate::AgentCli::reads_stderr`], [`read_retries`] or its own reader). Each becomes an
//! `api_retry` status (attempt, HTTP status, delay; never the agent's text), and a rate limit or
//! overload also a `rate_limited` notice. The last attempt's line (`… Max attempts reached`) is
//! not a retry: the run's typed error reports it.

use std::time::Duration;

use agent_api::kit::rate_limit::{LimitWords, RateLimitNotice};
use agent_api::kit::transcript::Transcript;

/// A stderr line's retry, written to `transcript` ([`Retry::report`]): the
/// [`crate::StderrReader`] of an agent that reports its retries on stderr.
pub fn read_retries(line: &str, transcript: &mut Transcript) {
    Retry::report(line, transcript);
}

/// One retry read from a stderr line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// The attempt that failed, from 1.
    pub attempt: u32,
    /// The HTTP status the line names, if any.
    pub status: Option<u16>,
    /// The delay before the next attempt, where the line gives it.
    pub delay: Option<Duration>,
    /// Whether the failure was a rate limit (429, quota).
    pub limited: bool,
    /// Whether the model API was overloaded (503, 529, "overloaded").
    pub overloaded: bool,
}

impl Retry {
    /// The retry a line reports, if it reports one (the line starts with `Attempt`: a log's
    /// own prefix is its reader's to take off).
    pub fn in_line(line: &str) -> Option<Retry> {
        let rest = line.trim_start().strip_prefix("Attempt ")?;
        let failure = &line[..line.find(". Retrying")?];
        let attempt = rest
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()?;
        // "failed with status 429", "failed with 429 error", or a status named in the message.
        let after_with = failure
            .split_once("failed with ")
            .map(|(_, tail)| tail.trim_start_matches("status ").trim_start());
        let status = after_with
            .and_then(|tail| {
                tail.get(..3)
                    .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))
            })
            .and_then(|d| d.parse().ok())
            .or_else(|| crate::errors::status_in(failure));
        let words = LimitWords::in_text(failure);
        let overloaded = matches!(status, Some(503 | 529)) || words.overloaded;
        let limited = status == Some(429) || words.limited;
        // `Retrying after 5000ms`, `Retrying after explicit delay of 5000ms`, `Retrying in 30s`.
        let (_, retrying) = line.split_once(". Retrying")?;
        let digits = retrying.trim_start_matches(|c: char| !c.is_ascii_digit());
        let number = digits
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse::<u64>().ok());
        let unit = digits.trim_start_matches(|c: char| c.is_ascii_digit());
        let delay = number.and_then(|n| match () {
            _ if unit.starts_with("ms") => Some(Duration::from_millis(n)),
            _ if unit.starts_with('s') => Some(Duration::from_secs(n)),
            _ => None,
        });
        Some(Retry {
            attempt,
            status,
            delay,
            limited,
            overloaded,
        })
    }

    /// The retry `line` reports, if any, written to `transcript` ([`Retry::emit`]): what a
    /// protocol does with each stderr or debug-log line.
    pub fn report(line: &str, transcript: &mut Transcript) -> Option<Retry> {
        let retry = Retry::in_line(line)?;
        retry.emit(transcript);
        Some(retry)
    }

    /// Writes the `api_retry` status, and the `rate_limited` notice for a limit or overload.
    pub fn emit(&self, transcript: &mut Transcript) {
        let status = self
            .status
            .map_or("no HTTP status".to_string(), |s| format!("HTTP {s}"));
        let delay = self.delay.map_or(String::new(), |d| {
            format!(", retrying in {} ms", d.as_millis())
        });
        transcript.status(
            "api_retry",
            Some(format!("attempt {} failed: {status}{delay}", self.attempt)),
        );
        if self.limited || self.overloaded {
            let mut notice = RateLimitNotice::default();
            (
                notice.status,
                notice.overloaded,
                notice.attempt,
                notice.retry_after,
            ) = (self.status, self.overloaded, Some(self.attempt), self.delay);
            notice.emit(transcript);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_retry_line_shape_is_read_and_the_last_attempt_is_not_a_retry() {
        let overloaded = Retry::in_line(
            "Attempt 1 failed: The model is overloaded (mock). Retrying after 5123ms...",
        )
        .unwrap();
        assert_eq!(
            (overloaded.attempt, overloaded.status, overloaded.overloaded),
            (1, None, true)
        );
        assert_eq!(overloaded.delay, Some(Duration::from_millis(5123)));
        let limited =
            Retry::in_line("Attempt 2 failed with status 429. Retrying with backoff...").unwrap();
        assert_eq!(
            (
                limited.attempt,
                limited.status,
                limited.limited,
                limited.delay
            ),
            (2, Some(429), true, None)
        );
        let no_header = Retry::in_line(
            "Attempt 3 failed with 429 error (no Retry-After header). Retrying with backoff...",
        )
        .unwrap();
        assert_eq!((no_header.status, no_header.limited), (Some(429), true));
        let server =
            Retry::in_line("Attempt 1 failed with status 500. Retrying with backoff...").unwrap();
        assert!(!server.limited && !server.overloaded);
        assert_eq!(
            Retry::in_line(
                "Attempt 1 failed: The model is overloaded (mock). Max attempts reached"
            ),
            None
        );
        assert_eq!(Retry::in_line("YOLO mode is enabled."), None);
    }

    #[test]
    fn a_retry_is_an_api_retry_status_and_a_limit_also_rate_limited_without_the_agents_text() {
        let mut t = Transcript::new("sess_retry".into(), false);
        Retry::in_line(
            "Attempt 1 failed: The model is overloaded (secret detail). Retrying after 5000ms...",
        )
        .unwrap()
        .emit(&mut t);
        Retry::in_line("Attempt 1 failed with status 500. Retrying with backoff...")
            .unwrap()
            .emit(&mut t);
        let statuses: Vec<(String, String)> = t
            .drain()
            .filter_map(|e| e.completed_item().cloned())
            .flat_map(|i| i.content)
            .filter_map(|p| match p {
                agent_api::universal::ContentPart::Status { label, detail } => {
                    Some((label, detail.unwrap_or_default()))
                }
                _ => None,
            })
            .collect();
        let labels: Vec<&str> = statuses.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["api_retry", "rate_limited", "api_retry"]);
        assert!(
            statuses.iter().all(|(_, d)| !d.contains("secret detail")),
            "{statuses:?}"
        );
        assert!(
            statuses[1].1.starts_with("overloaded") && statuses[1].1.contains("retry after 5 s"),
            "{statuses:?}"
        );
    }
}
