//! Amp's failures before any stream-json line, told apart by what amp printed on stderr. Stderr
//! is only matched here, never copied into an error or event.

use agent_api::kit::ExitInfo;
use agent_api::AgentError;

/// What amp prints when it cannot reach its server (`AMP_URL`, default ampcode.com): for a new
/// thread, and for `threads continue`.
const UNREACHABLE: [&str; 2] = [
    "Couldn't connect to the Amp server",
    "Cannot reach Amp servers",
];
/// What amp prints when it has no credentials and starts its interactive login.
const NO_KEY: &str = "No API key found";

/// The typed error for a run that ended without a result, when stderr says why.
pub(crate) fn from_exit(exit: &ExitInfo) -> Option<AgentError> {
    let stderr = exit.stderr.output();
    let said = |needle: &str| {
        [&stderr.head, &stderr.tail]
            .iter()
            .any(|part| part.as_deref().is_some_and(|t| t.contains(needle)))
    };
    if UNREACHABLE.iter().any(|needle| said(needle)) {
        return Some(AgentError::ServiceUnreachable {
            service: "the Amp server".into(),
        });
    }
    if said(NO_KEY) {
        return Some(AgentError::Auth {
            message: "amp has no API key (set AMP_API_KEY)".into(),
        });
    }
    None
}
