//! [`CliConfig`]: where and how to run an agent's CLI, the same for every agent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::kit::command::CommandSpec;

/// Where and how to run an agent's CLI: its executable, the arguments and variables every run
/// gets, whether it inherits this process's environment, and the working directory when a
/// request names none. What differs per run (the home, the launcher, the timeouts, the request's
/// own variables) is the request's. Its `Debug` shows the names of `env`, never the values.
///
/// ```
/// use agent_api::kit::cli::CliConfig;
/// let config = CliConfig::with_binary("/opt/greeter/bin/greeter")
///     .args(["--quiet"])
///     .env("GREETER_TOKEN", "secret")
///     .working_dir("/srv/project");
/// assert_eq!(config.program("greeter"), std::path::Path::new("/opt/greeter/bin/greeter"));
/// assert!(!format!("{config:?}").contains("secret"));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct CliConfig {
    /// The executable: a path, or a name looked up on `PATH` (unset: the agent's own program).
    pub binary: Option<PathBuf>,
    /// Arguments every run gets (where the agent puts them: before its own flags for most).
    pub args: Vec<String>,
    /// Variables added to the CLI's environment (a request's `env` is added after these).
    pub env: BTreeMap<String, String>,
    /// Whether the CLI inherits this process's environment (default true). When false it sees
    /// only `env` and the request's `env`.
    pub inherit_env: bool,
    /// The working directory when the request names none (default: this process's).
    pub working_dir: Option<PathBuf>,
}

impl Default for CliConfig {
    fn default() -> Self {
        Self {
            binary: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            inherit_env: true,
            working_dir: None,
        }
    }
}

/// Shows variable names and masked arguments, never the values of keys.
impl std::fmt::Debug for CliConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CliConfig")
            .field("binary", &self.binary)
            .field("args", &crate::kit::secrets::ArgsShown(&self.args))
            .field("env", &crate::kit::secrets::EnvNames(&self.env))
            .field("inherit_env", &self.inherit_env)
            .field("working_dir", &self.working_dir)
            .finish()
    }
}

impl CliConfig {
    /// A configuration running `binary`.
    pub fn with_binary(binary: impl Into<PathBuf>) -> Self {
        Self {
            binary: Some(binary.into()),
            ..Self::default()
        }
    }

    /// Adds arguments every run gets.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets whether the CLI inherits this process's environment.
    pub fn inherit_env(mut self, inherit: bool) -> Self {
        self.inherit_env = inherit;
        self
    }

    /// Sets the default working directory.
    pub fn working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }

    /// The executable: the configured one, else `default` (the agent's program, on `PATH`).
    pub fn program<'a>(&'a self, default: &'a str) -> &'a Path {
        self.binary.as_deref().unwrap_or(Path::new(default))
    }

    /// The command every run of the agent starts from: its program (`default` unless
    /// configured), the configured arguments and variables, the environment inherited or not,
    /// then the request's variables, working directory and launcher.
    pub fn command(&self, default: &str, request: &crate::RunRequest) -> CommandSpec {
        let mut spec = CommandSpec::new(self.program(default)).args(self.args.iter().cloned());
        spec.clear_env = !self.inherit_env;
        for (key, value) in &self.env {
            spec = spec.env(key.clone(), value.clone());
        }
        if let Some(dir) = &self.working_dir {
            spec = spec.cwd(dir.clone());
        }
        spec.for_request(request)
    }

    /// `$HOME/<dir>` as the agent would see it: `HOME` from [`CliConfig::env`], else this
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

/// What the shared backend needs of an agent's configuration ([`super::CliAgent::Config`]):
/// [`CliConfig`] for most; an agent with settings of its own has its own type.
pub trait CliSettings: Clone + std::fmt::Debug + Default + Send + Sync + 'static {
    /// The default configuration running `binary` (what discovery builds for a found CLI).
    fn for_binary(binary: PathBuf) -> Self;

    /// The working directory when the request names none.
    fn default_working_dir(&self) -> Option<&Path>;
}

impl CliSettings for CliConfig {
    fn for_binary(binary: PathBuf) -> Self {
        Self::with_binary(binary)
    }

    fn default_working_dir(&self) -> Option<&Path> {
        self.working_dir.as_deref()
    }
}
