//! Typing Codex's errors: `codexErrorInfo` (app-server) or the message's HTTP status (exec)
//! becomes Auth, RateLimited, ServerError or AgentFailed; messages are bounded and redacted first.

use agent_api::AgentError;
use serde_json::Value;

/// Longest explanation copied from a Codex error into an `AgentError` or error event.
const EXPLANATION_BOUND: usize = 512;

/// What kind of failure an error is, before it becomes an [`AgentError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Credentials refused (401, 403, `unauthorized`).
    Auth,
    /// Rate limited or out of quota (429, `rateLimitExceeded`, …).
    RateLimited,
    /// The service is overloaded (503, 529, `serverOverloaded`).
    Overloaded(Option<u16>),
    /// The model service failed (5xx, `internalServerError`).
    Server(Option<u16>),
    /// Anything else.
    Other,
}

impl ErrorClass {
    /// The stable code used in non-terminal universal error events.
    pub fn code(self) -> &'static str {
        match self {
            ErrorClass::Auth => "auth",
            ErrorClass::RateLimited => "rate_limited",
            ErrorClass::Overloaded(_) => "overloaded",
            ErrorClass::Server(_) => "server_error",
            ErrorClass::Other => "agent_failed",
        }
    }

    /// The typed error for a failed run, with a bounded, redacted explanation.
    pub fn into_error(self, message: &str) -> AgentError {
        let message = explanation(message);
        match self {
            ErrorClass::Auth => AgentError::Auth { message },
            ErrorClass::RateLimited => AgentError::RateLimited { message },
            ErrorClass::Overloaded(status) => AgentError::Overloaded { status, message },
            ErrorClass::Server(status) => AgentError::ServerError { status, message },
            ErrorClass::Other => AgentError::AgentFailed { message },
        }
    }
}

/// The `SessionNotFound` for Codex's answer to resuming or forking a thread it has no rollout
/// file for (`thread/resume failed: no rollout found for thread id <id>`, the app server's error
/// and `exec`'s stderr alike); only the id is kept.
pub fn missing_thread(message: &str) -> Option<AgentError> {
    let (_, rest) = message.split_once("no rollout found for thread id ")?;
    let id = rest
        .split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .filter(|id| !id.is_empty())?;
    Some(AgentError::SessionNotFound {
        id: agent_api::kit::bounds::utf8_prefix(id, 64).to_string(),
    })
}

/// Classifies by HTTP status.
pub fn class_of_status(status: u16) -> ErrorClass {
    match status {
        401 | 403 => ErrorClass::Auth,
        429 => ErrorClass::RateLimited,
        503 | 529 => ErrorClass::Overloaded(Some(status)),
        500..=599 => ErrorClass::Server(Some(status)),
        _ => ErrorClass::Other,
    }
}

/// Classifies an app-server `TurnError` from its `codexErrorInfo`, falling back to its message.
pub fn classify(info: Option<&Value>, message: &str) -> ErrorClass {
    match info {
        Some(Value::String(kind)) => match kind.as_str() {
            "unauthorized" => ErrorClass::Auth,
            "serverOverloaded" => ErrorClass::Overloaded(status_in_message(message)),
            "rateLimitExceeded"
            | "usageLimitExceeded"
            | "sessionBudgetExceeded"
            | "flexUnavailable"
            | "policyCapacityUnavailable" => ErrorClass::RateLimited,
            "internalServerError" => ErrorClass::Server(status_in_message(message)),
            _ => classify_message(message),
        },
        // `{"httpConnectionFailed": {"httpStatusCode": 401}}` and its stream siblings.
        Some(Value::Object(obj)) => {
            let status = obj
                .values()
                .find_map(|v| v.get("httpStatusCode"))
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok());
            match status {
                Some(status) => class_of_status(status),
                None => classify_message(message),
            }
        }
        _ => classify_message(message),
    }
}

/// Classifies a bare message (exec mode has no `codexErrorInfo`): `unexpected status 401 …`, or
/// Codex's fixed wording for server errors ("We're currently experiencing high demand").
pub fn classify_message(message: &str) -> ErrorClass {
    if let Some(status) = status_in_message(message) {
        return class_of_status(status);
    }
    let lower = message.to_ascii_lowercase();
    let words = agent_api::kit::rate_limit::LimitWords::in_text(message);
    if words.limited {
        ErrorClass::RateLimited
    } else if words.overloaded {
        ErrorClass::Overloaded(None)
    } else if lower.contains("high demand") || lower.contains("internal server error") {
        // Codex 0.169.0 prints this sentence for 5xx answers without their status.
        ErrorClass::Server(None)
    } else if lower.contains("unauthorized") || lower.contains("invalid api key") {
        ErrorClass::Auth
    } else {
        ErrorClass::Other
    }
}

/// The HTTP status in `unexpected status 401 Unauthorized: …`.
pub fn status_in_message(message: &str) -> Option<u16> {
    let rest = &message[message.find("status ")? + "status ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|s| (100..=599).contains(s))
}

/// The `rate_limited` notice for an error Codex reports while it works (a retry, or the turn's
/// failure): for a rate limit or overload only, with the status and any `retry-after` it quotes.
pub fn rate_limit_notice(
    class: ErrorClass,
    message: &str,
) -> Option<agent_api::kit::rate_limit::RateLimitNotice> {
    let mut notice = agent_api::kit::rate_limit::RateLimitNotice::default();
    match class {
        ErrorClass::RateLimited => notice.status = status_in_message(message),
        ErrorClass::Overloaded(status) => {
            (notice.status, notice.overloaded) = (status.or(status_in_message(message)), true)
        }
        _ => return None,
    }
    notice.retry_after = agent_api::kit::rate_limit::retry_after_in(message);
    Some(notice)
}

/// A Codex explanation made safe to show: secrets and URL query strings masked
/// ([`agent_api::kit::secrets::redact`]), bounded to 512 bytes on a character boundary.
pub fn explanation(message: &str) -> String {
    agent_api::kit::secrets::redact_bounded(message, EXPLANATION_BOUND)
}

/// The `api_retry` status detail of Codex's "Reconnecting... 2/5 (why)" notice, or of its
/// uncounted "Reconnecting... waiting for network (why)" (it retries for ever, so the run's
/// start-up timeout ends it): a retry it makes by itself, not a failure (`None` for any other
/// message).
pub fn reconnect_detail(message: &str) -> Option<String> {
    let rest = message.strip_prefix("Reconnecting...")?.trim_start();
    let (count, why) = rest.split_once(' ').unwrap_or((rest, ""));
    let counted = count
        .split_once('/')
        .and_then(|(attempt, of)| Some((attempt.parse::<u32>().ok()?, of.parse::<u32>().ok()?)));
    let Some((attempt, of)) = counted else {
        return rest
            .starts_with("waiting for network")
            .then(|| explanation(rest));
    };
    let why = why.trim().trim_start_matches('(').trim_end_matches(')');
    Some(match why {
        "" => format!("attempt {attempt} of {of}"),
        why => format!("attempt {attempt} of {of}: {}", explanation(why)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn http_status_in_error_info_picks_the_class() {
        let info = json!({"httpConnectionFailed": {"httpStatusCode": 401}});
        assert_eq!(classify(Some(&info), "x"), ErrorClass::Auth);
        let info = json!({"responseStreamDisconnected": {"httpStatusCode": 503}});
        assert_eq!(
            classify(Some(&info), "x"),
            ErrorClass::Overloaded(Some(503))
        );
        let info = json!({"responseStreamDisconnected": {"httpStatusCode": 502}});
        assert_eq!(classify(Some(&info), "x"), ErrorClass::Server(Some(502)));
        let info = json!({"responseTooManyFailedAttempts": {"httpStatusCode": 429}});
        assert_eq!(classify(Some(&info), "x"), ErrorClass::RateLimited);
        assert_eq!(
            classify(Some(&json!("unauthorized")), "x"),
            ErrorClass::Auth
        );
        assert_eq!(
            classify(Some(&json!("serverOverloaded")), "x"),
            ErrorClass::Overloaded(None)
        );
        assert_eq!(
            classify(Some(&json!("internalServerError")), "x"),
            ErrorClass::Server(None)
        );
        assert_eq!(
            classify(Some(&json!("contextWindowExceeded")), "x"),
            ErrorClass::Other
        );
    }

    #[test]
    fn exec_messages_are_typed_by_their_status_or_wording() {
        assert_eq!(
            classify_message("unexpected status 401 Unauthorized: Incorrect API key provided"),
            ErrorClass::Auth
        );
        assert_eq!(
            classify_message("unexpected status 500 Internal Server Error"),
            ErrorClass::Server(Some(500))
        );
        assert_eq!(
            classify_message(
                "We’re currently experiencing high demand, which may cause temporary errors."
            ),
            ErrorClass::Server(None)
        );
        assert_eq!(classify_message("something else"), ErrorClass::Other);
    }

    #[test]
    fn reconnect_notices_read_as_retries_and_nothing_else_does() {
        assert_eq!(
            reconnect_detail("Reconnecting... 2/5 (stream disconnected)").as_deref(),
            Some("attempt 2 of 5: stream disconnected")
        );
        assert_eq!(
            reconnect_detail("Reconnecting... 1/3").as_deref(),
            Some("attempt 1 of 3")
        );
        assert_eq!(reconnect_detail("Reconnecting... soon"), None);
        assert_eq!(
            reconnect_detail(
                "Reconnecting... waiting for network (Connection failed: error sending request)"
            )
            .as_deref(),
            Some("waiting for network (Connection failed: error sending request)")
        );
        assert_eq!(reconnect_detail("stream disconnected"), None);
    }

    #[test]
    fn explanations_mask_keys_and_query_strings_and_are_bounded() {
        let e =
            explanation("Incorrect API key provided: sk-test. url: http://h/v1/responses?key=abc");
        assert!(!e.contains("sk-test") && !e.contains("key=abc"), "{e}");
        assert!(e.contains("[redacted]"));
        assert!(explanation(&"x".repeat(10_000)).len() <= 512);
    }
}
