//! Finding the pinned CLIs that `tests/bench/install-clis.sh` installed.
//!
//! The script installs into `${AGENT_API_CLI_DIR:-$HOME/.cache/agent_api/clis}/<hash of the lock file>/`
//! and, last, copies the lock file there as `.pinned-lock.json`. The bench uses the folder whose copy equals
//! the checkout's `tests/bench/clis/package-lock.json`, so a stale install is never picked up.

use std::path::{Path, PathBuf};

use crate::{BenchError, Cli};

/// The lock file that pins the CLIs, as checked in.
const LOCK_FILE: &str = include_str!("../clis/package-lock.json");

/// The install root: `$AGENT_API_CLI_DIR`, else `$HOME/.cache/agent_api/clis`.
pub fn install_root() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("AGENT_API_CLI_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cache/agent_api/clis"))
}

/// The install folder of the current lock file (holding `node_modules/`), if it is installed.
pub fn install_dir() -> Option<PathBuf> {
    let root = install_root()?;
    let entries = std::fs::read_dir(&root).ok()?;
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|dir| {
            std::fs::read_to_string(dir.join(".pinned-lock.json"))
                .is_ok_and(|lock| lock == LOCK_FILE)
        })
}

/// The folder holding the CLIs' executables (`.../node_modules/.bin`), if installed.
pub fn cli_dir() -> Option<PathBuf> {
    install_dir().map(|d| d.join("node_modules/.bin"))
}

/// The executable of `cli`, or an error that says how to install it.
pub fn find_cli(cli: Cli) -> Result<PathBuf, BenchError> {
    let searched = install_root().map_or_else(
        || "$HOME/.cache/agent_api/clis (HOME unset)".into(),
        |r| r.display().to_string(),
    );
    cli_dir()
        .map(|bin| bin.join(cli.executable()))
        .filter(|exe| is_executable(exe))
        .ok_or(BenchError::CliNotInstalled {
            cli: cli.name(),
            searched,
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The installed version of `cli` (from its npm package), if installed.
pub fn cli_version(cli: Cli) -> Option<String> {
    let manifest = install_dir()?
        .join("node_modules")
        .join(cli.npm_package())
        .join("package.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("version")
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

/// The version `tests/bench/clis/package.json` pins for `cli`.
pub fn pinned_version(cli: Cli) -> Option<String> {
    let lock: serde_json::Value = serde_json::from_str(LOCK_FILE).ok()?;
    let key = format!("node_modules/{}", cli.npm_package());
    lock.pointer("/packages")?
        .get(&key)?
        .get("version")?
        .as_str()
        .map(str::to_string)
}

/// The gate of every end-to-end test: the CLI's path when it is installed. When it is not, this panics
/// with the install command, unless `AGENT_API_E2E=skip` is set; then it prints a loud
/// `SKIPPED (AGENT_API_E2E=skip): ...` line to stderr and returns `None`. Never a silent skip.
pub fn e2e_enabled_or_explain(cli: Cli) -> Option<PathBuf> {
    match find_cli(cli) {
        Ok(path) => Some(path),
        Err(err) if skip_requested() => {
            eprintln!("SKIPPED (AGENT_API_E2E=skip): {cli} end-to-end test not run: {err}");
            None
        }
        Err(err) => panic!("{err}"),
    }
}

fn skip_requested() -> bool {
    std::env::var("AGENT_API_E2E").is_ok_and(|v| v == "skip")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cli_has_a_pinned_version_in_the_lock_file() {
        for cli in Cli::ALL {
            let v = pinned_version(cli).unwrap_or_else(|| panic!("{cli} not pinned"));
            assert!(
                v.chars().all(|c| c.is_ascii_digit() || c == '.'),
                "{cli}: {v}"
            );
        }
    }

    #[test]
    fn missing_cli_error_says_how_to_install() {
        let err = BenchError::CliNotInstalled {
            cli: "codex",
            searched: "/x".into(),
        }
        .to_string();
        assert!(
            err.contains("bash tests/bench/install-clis.sh") && err.contains("AGENT_API_E2E=skip"),
            "{err}"
        );
    }
}
