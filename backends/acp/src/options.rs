//! How an ACP agent is started ([`AcpConfig`], for the `acp` kind and the agents built on this
//! client) and the `acp` kind's typed per-run options (`backend.acp.*`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agent_api::request::BackendOptions;
use serde::{Deserialize, Serialize};

/// How a backend on this client starts its agent; the `acp` kind's per-run choices are in
/// [`AcpOptions`] (Gemini CLI's and Qwen Code's in their crates).
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct AcpConfig {
    /// The agent program (`gemini`, `qwen`: found on `PATH` when unset; `acp`: used when the run gives no
    /// [`AcpOptions::command`]).
    pub binary: Option<PathBuf>,
    /// Arguments put before the backend's own.
    pub args: Vec<String>,
    /// Environment variables for the agent.
    pub env: BTreeMap<String, String>,
    /// Working directory when the request sets none.
    pub working_dir: Option<PathBuf>,
}

/// Shows variable names and masked arguments, never the values of keys.
impl std::fmt::Debug for AcpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpConfig")
            .field("binary", &self.binary)
            .field("args", &agent_api::kit::secrets::ArgsShown(&self.args))
            .field("env", &agent_api::kit::secrets::EnvNames(&self.env))
            .field("working_dir", &self.working_dir)
            .finish()
    }
}

impl AcpConfig {
    /// A configuration running `binary`.
    pub fn with_binary(binary: impl Into<PathBuf>) -> Self {
        Self {
            binary: Some(binary.into()),
            ..Self::default()
        }
    }

    /// Adds arguments before the backend's own.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets the default working directory.
    pub fn working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }

    /// `$HOME/<dir>` as the agent would see it: `HOME` from [`AcpConfig::env`], else this
    /// process's (where an agent's own session store lives).
    pub fn home_dir(&self, dir: &str) -> Option<PathBuf> {
        let home = self
            .env
            .get("HOME")
            .cloned()
            .or_else(|| std::env::var("HOME").ok())
            .filter(|h| !h.is_empty())?;
        Some(PathBuf::from(home).join(dir))
    }
}

/// Typed options of the generic `acp` backend (`backend.acp.*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct AcpOptions {
    /// The agent's command line, program first, one element per argument (never a shell string).
    pub command: Vec<String>,
    /// Serve `fs/*` confined to the working directory (default true).
    pub fs: Option<bool>,
}

impl BackendOptions for AcpOptions {
    const KIND: &'static str = "acp";
}

impl AcpOptions {
    /// Sets the agent's command line.
    pub fn command<I: IntoIterator<Item = S>, S: Into<String>>(mut self, argv: I) -> Self {
        self.command = argv.into_iter().map(Into::into).collect();
        self
    }

    /// Serves (or not) the file system to the agent.
    pub fn fs(mut self, serve: bool) -> Self {
        self.fs = Some(serve);
        self
    }
}

/// `path` made absolute against the current directory.
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}
