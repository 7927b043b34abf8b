//! Typing an agent's failures. An agent's error text is never copied whole into an error: only
//! the JSON-RPC code, the HTTP status found in it, and a bounded explanation with anything that
//! looks like a credential or a URL query removed.

use agent_api::kit::ExitInfo;
use agent_api::AgentError;

/// JSON-RPC code ACP agents use for "authentication required".
pub(crate) const AUTH_REQUIRED: i64 = -32000;

/// Longest explanation copied from an agent's error.
const EXPLANATION_BOUND: usize = 256;

/// The HTTP status an error text mentions (`status 401`, `[500 Internal…]`, `"code":401`, `got status: 500`).
pub fn status_in(text: &str) -> Option<u16> {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(2)).find_map(|i| {
        let window = &bytes[i..i + 3];
        let before_ok = i == 0 || !bytes[i - 1].is_ascii_digit();
        let after_ok = bytes.get(i + 3).is_none_or(|b| !b.is_ascii_digit());
        if !(before_ok && after_ok && window.iter().all(u8::is_ascii_digit)) {
            return None;
        }
        let status: u16 = std::str::from_utf8(window).ok()?.parse().ok()?;
        // Up to 12 bytes before the number, from a char boundary (the text may hold any UTF-8).
        let start = (i.saturating_sub(12)..i)
            .find(|&s| text.is_char_boundary(s))
            .unwrap_or(i);
        let context = &text[start..i];
        let named = ["status", "code", "[", "HTTP", "error"]
            .iter()
            .any(|w| context.contains(w));
        ((400..=599).contains(&status) && named).then_some(status)
    })
}

/// A safe, bounded explanation: words that look like keys masked, URL queries dropped.
pub fn explanation(text: &str) -> String {
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| {
            let key_like = ["sk-", "sk_", "AIza", "Bearer", "ya29."].iter().any(|p| {
                w.trim_matches(|c: char| !c.is_ascii_alphanumeric())
                    .starts_with(p)
            });
            match (key_like, w.find('?')) {
                (true, _) => "[redacted]".to_string(),
                (false, Some(q)) if w.contains("://") => w[..q].to_string(),
                _ => w.to_string(),
            }
        })
        .collect();
    if words.is_empty() {
        // An empty explanation would end the error's text in `: ` (found by converter_props).
        return agent_api::kit::secrets::NO_EXPLANATION.to_string();
    }
    agent_api::kit::bounds::truncate_message(&words.join(" "), EXPLANATION_BOUND)
}

/// The typed error for an HTTP status of the model service.
pub(crate) fn of_status(status: u16, message: String) -> AgentError {
    AgentError::of_http_status(status, message)
}

/// The agent refused one of the session set-up requests.
pub(crate) fn refused(what: &str, code: i64, message: &str) -> AgentError {
    if code == AUTH_REQUIRED || message.to_ascii_lowercase().contains("auth") {
        return AgentError::Auth {
            message: format!("the agent refused {what}: {}", explanation(message)),
        };
    }
    AgentError::AgentFailed {
        message: format!(
            "the agent refused {what} (JSON-RPC error {code}): {}",
            explanation(message)
        ),
    }
}

/// A `session/prompt` that failed: typed by the HTTP status it names, when it names one.
pub(crate) fn prompt_failed(code: i64, message: &str) -> AgentError {
    let explained = explanation(message);
    match status_in(message) {
        Some(status) => of_status(status, explained),
        // An agent may pass the HTTP status through as the error code (JSON-RPC's own are negative).
        None if (400..=599).contains(&code) => of_status(code as u16, explained),
        None if code == AUTH_REQUIRED => AgentError::Auth { message: explained },
        None => AgentError::AgentFailed {
            message: format!("the prompt failed (JSON-RPC error {code}): {explained}"),
        },
    }
}

/// The agent process ended before its turn did.
pub(crate) fn early_exit(exit: &ExitInfo) -> AgentError {
    exit.early_exit_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_found_only_where_they_are_named() {
        assert_eq!(
            status_in("[API Error: got status: 401 Unauthorized]"),
            Some(401)
        );
        assert_eq!(
            status_in("{\"error\":{\"code\":500,\"message\":\"boom\"}}"),
            Some(500)
        );
        assert_eq!(status_in("wrote 404 lines"), None);
        assert_eq!(status_in("no digits"), None);
    }

    #[test]
    fn a_status_after_multibyte_text_is_read_without_panicking() {
        // Found by converter_props: 12 bytes before the number fell inside a three-byte char.
        assert_eq!(
            status_in("[API Error: {\"erro\u{fffd}\":{\"code\":401}}]"),
            Some(401)
        );
        assert_eq!(status_in("ééééééé code 500"), Some(500));
        assert_eq!(status_in("€€€€€404"), None);
    }

    #[test]
    fn explanations_hide_keys_and_queries() {
        let e = explanation("bad key sk-test at http://h/x?key=AIzaSecret please");
        assert!(!e.contains("sk-test") && !e.contains("AIzaSecret"), "{e}");
        assert!(matches!(
            prompt_failed(-32603, "got status: 500"),
            AgentError::ServerError {
                status: Some(500),
                ..
            }
        ));
        // An agent's answer to an HTTP 503 with the status as the JSON-RPC code.
        assert!(matches!(
            prompt_failed(503, "The model is overloaded"),
            AgentError::Overloaded {
                status: Some(503),
                ..
            }
        ));
        assert!(matches!(
            prompt_failed(-32603, "The model is overloaded"),
            AgentError::AgentFailed { .. }
        ));
        assert!(matches!(
            refused("session/new", AUTH_REQUIRED, "Authentication required"),
            AgentError::Auth { .. }
        ));
    }
}
