//! The Codex CLI versions the backend is tested with, and how to read the installed one (for
//! `agent-api doctor`).

use std::path::Path;
use std::time::Duration;

/// codex-cli versions whose protocol the backend was written from and tested against.
pub const SUPPORTED_VERSIONS: &[&str] = &["0.169.0"];

/// The version `binary --version` prints (`codex-cli 0.169.0` → `0.169.0`), or `None` when it
/// cannot be run, takes longer than 10 s, or prints something else.
pub async fn installed_version(binary: &Path) -> Option<String> {
    let mut command = tokio::process::Command::new(binary);
    command.arg("--version").stdin(std::process::Stdio::null()).kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(10), command.output()).await.ok()?.ok()?;
    if !output.status.success() {
        return None;
    }
    parse_version(&String::from_utf8_lossy(&output.stdout))
}

/// The version number in `codex --version` output.
pub fn parse_version(text: &str) -> Option<String> {
    let word = text.split_whitespace().find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let version: String = word.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-').collect();
    version.contains('.').then_some(version)
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
