//! Typing OpenCode's errors (`{"name": …, "data": {"message", "statusCode"}}`, the same shape in
//! `run`'s `error` lines and `serve`'s `session.error` events): the model's HTTP 401/403 is an
//! authentication error, 429 a rate limit, 5xx a server error with its status; an abort is a
//! cancellation. Messages are redacted and bounded before they reach an error.

use agent_api::AgentError;
use serde::Deserialize;

/// Longest explanation copied from an OpenCode error.
const EXPLANATION_BOUND: usize = 512;

/// An OpenCode error object.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct NativeError {
    /// Its class name (`APIError`, `ProviderAuthError`, `MessageAbortedError`, `UnknownError`, …).
    pub name: String,
    /// Its details.
    pub data: NativeErrorData,
}

/// The `data` of an OpenCode error.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct NativeErrorData {
    /// What went wrong.
    pub message: String,
    /// The model API's HTTP status, for `APIError`.
    #[serde(rename = "statusCode")]
    pub status_code: Option<u16>,
}

impl NativeError {
    /// Whether this is OpenCode's report of an aborted turn.
    pub fn is_abort(&self) -> bool {
        self.name == "MessageAbortedError"
    }

    /// The typed error for a run that failed with this error.
    pub fn to_agent_error(&self) -> AgentError {
        let message =
            agent_api::kit::secrets::redact_bounded(&self.data.message, EXPLANATION_BOUND);
        if self.is_abort() {
            return AgentError::Cancelled;
        }
        if self.name == "ProviderAuthError" {
            return AgentError::Auth { message };
        }
        match self.data.status_code {
            Some(status) => AgentError::of_http_status(status, message),
            None => AgentError::AgentFailed { message },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(name: &str, status: Option<u16>) -> AgentError {
        let value =
            serde_json::json!({"name": name, "data": {"message": "boom", "statusCode": status}});
        serde_json::from_value::<NativeError>(value)
            .unwrap()
            .to_agent_error()
    }

    #[test]
    fn statuses_and_names_become_typed_errors() {
        assert!(matches!(
            error("APIError", Some(401)),
            AgentError::Auth { .. }
        ));
        assert!(matches!(
            error("APIError", Some(429)),
            AgentError::RateLimited { .. }
        ));
        assert!(matches!(
            error("APIError", Some(500)),
            AgentError::ServerError {
                status: Some(500),
                ..
            }
        ));
        assert!(matches!(
            error("ProviderAuthError", None),
            AgentError::Auth { .. }
        ));
        assert!(matches!(
            error("MessageAbortedError", None),
            AgentError::Cancelled
        ));
        assert!(matches!(
            error("UnknownError", None),
            AgentError::AgentFailed { .. }
        ));
    }
}
