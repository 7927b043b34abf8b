//! Discovery: which agent CLIs are installed, where, and at which version.
//!
//! Each backend crate describes its CLI with a [`BackendProbe`] (its `KIND`, the executable's name,
//! the versions it is tested with, and how to build a backend for a found binary) and exports a
//! `detect()` built on [`BackendProbe::detect`]. A binary is looked for in
//! `AGENT_API_<KIND>_BIN` first (a relative path is taken from this process's working directory),
//! then on `PATH`; its version is read by one shared probe, [`probe_version`].
//! [`crate::Gateway::with_installed`] registers a backend for every CLI found.
//!
//! For every built-in agent at once, `agent_api_builtin::discover()` (the crate that depends on
//! each built-in backend) is the one call: `agent-api doctor` and `agent-api run` use it too.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::kit::replay::Replay;
use crate::vocabulary::kind::AgentKind;

/// How long `<binary> --version` may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// Longest version text kept from a binary's output.
const VERSION_MAX: usize = 64;

/// What a backend crate tells discovery about its CLI.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BackendProbe {
    /// The backend's agent kind.
    pub kind: AgentKind,
    /// The executable's name on `PATH` (`my-agent`).
    pub executable: &'static str,
    /// CLI versions the backend is tested against.
    pub supported_versions: &'static [&'static str],
    /// Builds a backend that runs the CLI at this path (and replays its recordings).
    pub build: fn(PathBuf) -> Arc<dyn Replay>,
}

/// An agent CLI found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Installed {
    /// The backend's agent kind.
    pub kind: AgentKind,
    /// The executable, as an absolute path where it could be made one.
    pub binary: PathBuf,
    /// The version it reports (digits and dots, bounded), when `--version` answered.
    pub version: Option<String>,
    /// Whether that version is one the backend is tested against.
    pub supported: bool,
    /// Why this binary: where discovery found it.
    pub found_by: FoundBy,
}

/// Where discovery found a CLI ([`Installed::found_by`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FoundBy {
    /// The environment variable of that name (`AGENT_API_<KIND>_BIN`) names it.
    EnvVar(String),
    /// It is the executable's name on `PATH`.
    Path,
    /// The caller gave the path ([`BackendProbe::inspect`]).
    Given,
}

impl std::fmt::Display for FoundBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FoundBy::EnvVar(name) => write!(f, "named by ${name}"),
            FoundBy::Path => f.write_str("on PATH"),
            FoundBy::Given => f.write_str("given"),
        }
    }
}

impl BackendProbe {
    /// A probe for `kind`'s CLI named `executable`.
    pub const fn new(
        kind: AgentKind,
        executable: &'static str,
        supported_versions: &'static [&'static str],
        build: fn(PathBuf) -> Arc<dyn Replay>,
    ) -> Self {
        Self {
            kind,
            executable,
            supported_versions,
            build,
        }
    }

    /// The environment variable naming this CLI's binary: `AGENT_API_<KIND>_BIN`.
    pub fn binary_var(&self) -> String {
        format!("AGENT_API_{}_BIN", self.kind.as_str().to_ascii_uppercase())
    }

    /// The binary: `$AGENT_API_<KIND>_BIN` (relative to this process's working directory), else
    /// the executable on `PATH`.
    pub fn locate(&self) -> Option<PathBuf> {
        self.find().map(|(path, _)| path)
    }

    /// The binary, as [`BackendProbe::locate`] finds it, and why there.
    pub fn find(&self) -> Option<(PathBuf, FoundBy)> {
        let var = self.binary_var();
        if let Some(path) = std::env::var_os(&var).filter(|p| !p.is_empty()) {
            let path = PathBuf::from(path);
            return Some((
                std::path::absolute(&path).unwrap_or(path),
                FoundBy::EnvVar(var),
            ));
        }
        crate::kit::process::resolve_program(Path::new(self.executable))
            .map(|path| (path, FoundBy::Path))
    }

    /// The installed CLI and its version, or `None` when no binary is found.
    pub async fn detect(&self) -> Option<Installed> {
        let (binary, found_by) = self.find()?;
        Some(Installed {
            found_by,
            ..self.inspect(binary).await
        })
    }

    /// What discovery says about the binary at `binary`.
    pub async fn inspect(&self, binary: PathBuf) -> Installed {
        let version = probe_version(&binary).await;
        let supported = version
            .as_deref()
            .is_some_and(|v| self.supported_versions.contains(&v));
        Installed {
            kind: self.kind.clone(),
            binary,
            version,
            supported,
            found_by: FoundBy::Given,
        }
    }
}

/// The version `<binary> --version` prints: its first word starting with a digit, cut at the
/// first character that is not alphanumeric, `.` or `-`, and holding a dot (`my-agent-cli 0.169.0`
/// → `0.169.0`, `2.1.197 (My Agent)` → `2.1.197`). `None` when it cannot run, fails, takes
/// longer than [`PROBE_TIMEOUT`] or prints no version.
pub async fn probe_version(binary: &Path) -> Option<String> {
    let mut command = tokio::process::Command::new(binary);
    command
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(PROBE_TIMEOUT, command.output())
        .await
        .ok()?
        .ok()?;
    if !output.status.success() {
        return None;
    }
    parse_version(&String::from_utf8_lossy(&output.stdout))
}

/// The version number in a `--version` output (see [`probe_version`]).
///
/// ```
/// assert_eq!(agent_api::kit::detect::parse_version("my-agent-cli 0.169.0\n").as_deref(), Some("0.169.0"));
/// assert_eq!(agent_api::kit::detect::parse_version("2.1.197 (My Agent)").as_deref(), Some("2.1.197"));
/// assert_eq!(agent_api::kit::detect::parse_version("1.0\x1b]0;pwned\x07"), Some("1.0".into()));
/// ```
pub fn parse_version(text: &str) -> Option<String> {
    let word = text
        .split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?;
    let version: String = word
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
        .take(VERSION_MAX)
        .collect();
    version.contains('.').then_some(version)
}
