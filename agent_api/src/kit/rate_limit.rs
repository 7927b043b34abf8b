//! Rate limits and overloads while a run goes on: [`RateLimitNotice`] becomes one `rate_limited`
//! status item (and so one wrapper `Status` event), saying when to retry where the agent or the
//! model API said so. The run's end, if the agent gives up, is the typed
//! [`AgentError::RateLimited`](crate::AgentError::RateLimited) or
//! [`AgentError::Overloaded`](crate::AgentError::Overloaded).

use std::fmt;
use std::time::Duration;

use crate::pipeline::transcript::Transcript;

/// The label of the status item a [`RateLimitNotice`] writes.
pub const RATE_LIMITED: &str = "rate_limited";

/// What an agent or its model API said about a rate limit or an overload.
///
/// ```
/// use agent_api::kit::rate_limit::RateLimitNotice;
/// use std::time::Duration;
/// let mut notice = RateLimitNotice::default();
/// (notice.status, notice.retry_after) = (Some(429), Some(Duration::from_millis(1500)));
/// assert_eq!(notice.to_string(), "rate limited (HTTP 429); retry after 1.5 s");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateLimitNotice {
    /// The HTTP status, when known (429, 503, 529).
    pub status: Option<u16>,
    /// Whether the service is overloaded for everyone rather than this caller limited.
    pub overloaded: bool,
    /// When to try again, where the agent or API said (`retry-after`, a retry delay).
    pub retry_after: Option<Duration>,
    /// When the limit resets, in seconds since the Unix epoch, where the agent said.
    pub resets_at: Option<u64>,
    /// Which retry this is, when the agent retries on its own.
    pub attempt: Option<u32>,
    /// How many retries the agent makes at most.
    pub max_attempts: Option<u32>,
}

impl RateLimitNotice {
    /// Writes the `rate_limited` status item.
    pub fn emit(&self, transcript: &mut Transcript) {
        transcript.status(RATE_LIMITED, Some(self.to_string()));
    }

    /// Whether an HTTP status is a rate limit or overload (429, 503, 529).
    pub fn is_limit_status(status: u16) -> bool {
        matches!(status, 429 | 503 | 529)
    }
}

impl fmt::Display for RateLimitNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.overloaded {
            "overloaded"
        } else {
            "rate limited"
        })?;
        if let Some(status) = self.status {
            write!(f, " (HTTP {status})")?;
        }
        match (self.attempt, self.max_attempts) {
            (Some(n), Some(max)) => write!(f, "; retry {n} of {max}")?,
            (Some(n), None) => write!(f, "; retry {n}")?,
            _ => {}
        }
        if let Some(after) = self.retry_after {
            write!(f, "; retry after {} s", after.as_millis() as f64 / 1000.0)?;
        }
        if let Some(at) = self.resets_at {
            write!(f, "; resets at {at} (Unix time)")?;
        }
        Ok(())
    }
}

/// What a failure's text says by its words alone, for a text that names no HTTP status: a rate
/// limit or quota, or an overloaded service. One list of words for every backend.
///
/// ```
/// use agent_api::kit::rate_limit::LimitWords;
/// assert!(LimitWords::in_text("You exceeded your current quota").limited);
/// assert!(LimitWords::in_text("The model is overloaded").overloaded);
/// assert_eq!(LimitWords::in_text("file not found"), LimitWords::default());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LimitWords {
    /// The text speaks of a rate limit, a usage limit or a quota.
    pub limited: bool,
    /// The text speaks of an overloaded or unavailable service.
    pub overloaded: bool,
}

impl LimitWords {
    /// The words `text` has (in any case).
    pub fn in_text(text: &str) -> Self {
        const LIMITED: &[&str] = &[
            "rate limit",
            "usage limit",
            "quota",
            "too many requests",
            "resource exhausted",
            "resource_exhausted",
        ];
        const OVERLOADED: &[&str] = &["overload", "unavailable"];
        let lower = text.to_ascii_lowercase();
        let said = |words: &[&str]| words.iter().any(|w| lower.contains(w));
        Self {
            limited: said(LIMITED),
            overloaded: said(OVERLOADED),
        }
    }
}

/// The `retry-after-ms` or `retry-after` (seconds) value in text an agent printed (a logged HTTP
/// header), the millisecond form first.
pub fn retry_after_in(text: &str) -> Option<Duration> {
    let lower = text.to_ascii_lowercase();
    let number_after = |key: &str| -> Option<f64> {
        let start = lower.find(key)? + key.len();
        let rest = lower[start..]
            .trim_start_matches(|c: char| c == '"' || c == ':' || c == '=' || c.is_whitespace());
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        rest[..end]
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite() && *n >= 0.0)
    };
    number_after("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| number_after("retry-after").map(Duration::from_secs_f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notice_says_what_was_given_and_retry_after_is_read_from_headers() {
        let full = RateLimitNotice {
            status: Some(529),
            overloaded: true,
            retry_after: Some(Duration::from_millis(500)),
            resets_at: Some(1_700_000_000),
            attempt: Some(1),
            max_attempts: Some(3),
        };
        assert_eq!(full.to_string(), "overloaded (HTTP 529); retry 1 of 3; retry after 0.5 s; resets at 1700000000 (Unix time)");
        assert_eq!(RateLimitNotice::default().to_string(), "rate limited");
        assert_eq!(
            retry_after_in("headers: {\"retry-after\": \"1\", \"x\": 2}"),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            retry_after_in("Retry-After-Ms: 10\nretry-after: 1"),
            Some(Duration::from_millis(10))
        );
        assert_eq!(retry_after_in("retry-after: soon"), None);
        assert_eq!(retry_after_in("nothing here"), None);
    }
}
