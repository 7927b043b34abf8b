//! The Codex CLI versions the backend is tested with, and how to read the installed one (for
//! `agent-api doctor`).

use std::path::Path;

/// codex-cli versions whose protocol the backend was written from and tested against.
pub const SUPPORTED_VERSIONS: &[&str] = &["0.169.0"];

/// The version `binary --version` prints (`codex-cli 0.169.0` → `0.169.0`), or `None` when it
/// cannot be run, fails, or prints something else (see [`agent_api::kit::detect::probe_version`]).
pub async fn installed_version(binary: &Path) -> Option<String> {
    agent_api::kit::detect::probe_version(binary).await
}

/// The version number in `codex --version` output.
pub fn parse_version(text: &str) -> Option<String> {
    agent_api::kit::detect::parse_version(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_lines_parse() {
        assert_eq!(parse_version("codex-cli 0.169.0\n").as_deref(), Some("0.169.0"));
        assert_eq!(parse_version("nonsense"), None);
    }

    #[tokio::test]
    async fn a_missing_binary_has_no_version() {
        assert_eq!(installed_version(Path::new("/nonexistent/codex")).await, None);
    }
}
