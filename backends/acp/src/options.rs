//! How an ACP agent is started ([`AcpConfig`], for the `acp` kind and the agents built on this
//! client) and the `acp` kind's typed per-run options (`backend.acp.*`).

use std::path::{Path, PathBuf};

use agent_api::kit::cli::CliConfig;
use agent_api::request::BackendOptions;
use serde::{Deserialize, Serialize};

/// How a backend on this client starts its agent: the kit's one CLI configuration
/// ([`CliConfig`]: program, arguments put before the backend's own, variables, working
/// directory). An agent with a CLI of its own finds its program on `PATH` when `binary` is unset
/// ([`AgentCli::program`](crate::AgentCli::program)); `acp` uses it when the run gives no
/// [`AcpOptions::command`]. The `acp` kind's per-run choices are in [`AcpOptions`] (each other
/// agent's in its crate).
pub type AcpConfig = CliConfig;

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
