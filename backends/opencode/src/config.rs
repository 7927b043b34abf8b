//! Backend configuration ([`OpenCodeConfig`]) and the typed per-run options ([`OpenCodeOptions`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which OpenCode interface a run uses (`backend.opencode.interface`: `"serve"`, `"run"` or `"acp"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Interface {
    /// `opencode serve`: HTTP plus a server-sent event stream; deltas, permissions, abort, and
    /// one server shared by the backend's runs.
    #[default]
    Serve,
    /// `opencode run --format json`: one way, whole parts only; a permission set to "ask" is
    /// rejected by OpenCode itself.
    Run,
    /// `opencode acp`: the Agent Client Protocol over stdio (deltas, permissions, the file
    /// system served confined to the working directory, cancel); the model comes from OpenCode's
    /// configuration.
    Acp,
}

/// The backend's own options (`backend.opencode.*`), attached with
/// [`agent_api::RunRequest::with_options`]; each field is the extension key of the same name.
///
/// ```
/// use agent_api::RunRequest;
/// use agent_api_opencode::{Interface, OpenCodeOptions};
/// let request = RunRequest::new("hi").with_options(&OpenCodeOptions::default().interface(Interface::Run));
/// assert_eq!(request.extensions["backend.opencode.interface"], "run");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct OpenCodeOptions {
    /// The interface; the config's `default_interface` when absent.
    pub interface: Option<Interface>,
    /// `run` only: pass `--thinking`, so reasoning parts are printed. Default on.
    pub thinking: Option<bool>,
    /// `acp` only: serve `fs/read_text_file` and `fs/write_text_file`, confined to the working
    /// directory. Default on.
    pub fs: Option<bool>,
}

impl OpenCodeOptions {
    /// Sets the interface.
    pub fn interface(mut self, interface: Interface) -> Self {
        self.interface = Some(interface);
        self
    }

    /// Sets whether `run` prints reasoning (`--thinking`).
    pub fn thinking(mut self, thinking: bool) -> Self {
        self.thinking = Some(thinking);
        self
    }

    /// Sets whether `acp` serves the file system to OpenCode.
    pub fn fs(mut self, serve: bool) -> Self {
        self.fs = Some(serve);
        self
    }
}

impl agent_api::request::BackendOptions for OpenCodeOptions {
    const KIND: &'static str = "opencode";
}

/// How the backend starts OpenCode. Its `Debug` shows the names of `env`, never the values.
#[derive(Clone)]
#[non_exhaustive]
pub struct OpenCodeConfig {
    /// The `opencode` executable (a path, or a name looked up on `PATH`).
    pub binary: PathBuf,
    /// Environment added to every run (for example `OPENCODE_CONFIG_CONTENT`).
    pub env: BTreeMap<String, String>,
    /// The interface when the request does not choose one.
    pub default_interface: Interface,
    /// Working directory when the request has none.
    pub working_dir: Option<PathBuf>,
    /// How long `opencode serve` may take to start listening.
    pub startup_timeout: Duration,
}

impl Default for OpenCodeConfig {
    fn default() -> Self {
        Self {
            binary: PathBuf::from("opencode"),
            env: BTreeMap::new(),
            default_interface: Interface::Serve,
            working_dir: None,
            startup_timeout: Duration::from_secs(30),
        }
    }
}

impl std::fmt::Debug for OpenCodeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenCodeConfig")
            .field("binary", &self.binary)
            .field("env", &agent_api::kit::secrets::EnvNames(&self.env))
            .field("default_interface", &self.default_interface)
            .field("working_dir", &self.working_dir)
            .field("startup_timeout", &self.startup_timeout)
            .finish()
    }
}

impl OpenCodeConfig {
    /// A config that runs `binary`.
    pub fn with_binary(binary: impl Into<PathBuf>) -> Self {
        Self {
            binary: binary.into(),
            ..Self::default()
        }
    }

    /// Adds an environment variable to every run.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets how long `opencode serve` may take to start listening.
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Sets the interface used when a request does not choose one.
    pub fn default_interface(mut self, interface: Interface) -> Self {
        self.default_interface = interface;
        self
    }
}
