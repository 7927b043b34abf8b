//! What to spawn ([`CommandSpec`]): a program and its argv (never a shell string), its environment,
//! directory and launcher. Spawning it is [`crate::kit::process::spawn`]'s.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use crate::vocabulary::launcher::Launcher;

/// What to spawn: a program and its argv (never a shell string), environment and directory.
///
/// ```
/// use agent_api::kit::CommandSpec;
/// let spec = CommandSpec::new("my-agent").arg("-p").env("DISABLE_AUTOUPDATER", "1");
/// assert_eq!(spec.args, ["-p"]);
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct CommandSpec {
    /// The program: a path, or a name looked up on `PATH`.
    pub program: PathBuf,
    /// Arguments, one element each.
    pub args: Vec<OsString>,
    /// Variables added to (or replacing in) the inherited environment.
    pub env: BTreeMap<String, String>,
    /// Variables removed from the inherited environment.
    pub env_remove: Vec<String>,
    /// Start from an empty environment instead of inheriting this process's (then only `env` is set).
    pub clear_env: bool,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// Whether the agent reads stdin (two-way protocols); otherwise stdin is /dev/null.
    pub stdin: bool,
    /// Held until the agent's process group is gone (a run's own home directory, for example).
    pub keep_alive: Vec<Arc<dyn std::any::Any + Send + Sync>>,
    /// How the process is started (see [`super::launch`]); taken from the request by
    /// [`CommandSpec::for_request`].
    pub launcher: Launcher,
    /// The environment variables the agent CLI reads for its endpoint, credentials and config.
    /// Through any launcher but Local the agent's environment is exactly these (from this process's
    /// environment), `env` and the launcher's own (see [`super::launch::agent_env`]).
    pub reads_env: Vec<String>,
    /// Directories the agent writes its state to besides its working directory and `HOME` (a
    /// sandbox keeps them writable).
    pub writable_dirs: Vec<PathBuf>,
    /// Variables naming directories the agent keeps its state in (`MY_AGENT_HOME`): read like
    /// [`CommandSpec::reads_env`], and a sandbox keeps what they name writable.
    pub state_vars: Vec<String>,
    /// Where in `HOME` the agent keeps its own state (`.my-agent`, `.config/my-agent`),
    /// relative to it: when the agent's `HOME` is the caller's real home, a sandbox keeps the
    /// home read-only but for these: a folder not there yet is made first (private), a file is
    /// bound when it exists.
    pub home_state: Vec<PathBuf>,
    /// Files on this machine the agent reads by path (a config or prompt file the SDK wrote for the
    /// run): a sandbox binds them read-only; a launcher whose agent runs elsewhere cannot carry
    /// them, and such a run is refused before anything starts.
    pub local_files: Vec<PathBuf>,
}

/// Shows the variable names of `env`, never their values (they are often API keys).
impl std::fmt::Debug for CommandSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandSpec")
            .field("program", &self.program)
            .field(
                "args",
                &crate::guards::secrets::ArgsShown(&self.args_lossy()),
            )
            .field("env", &crate::guards::secrets::EnvNames(&self.env))
            .field("env_remove", &self.env_remove)
            .field("clear_env", &self.clear_env)
            .field("cwd", &self.cwd)
            .field("stdin", &self.stdin)
            .field("keep_alive", &self.keep_alive.len())
            .field("launcher", &self.launcher)
            .field("reads_env", &self.reads_env)
            .field("writable_dirs", &self.writable_dirs)
            .field("state_vars", &self.state_vars)
            .field("local_files", &self.local_files)
            .finish()
    }
}

impl CommandSpec {
    /// The value of `name` in the agent's environment as this spec sets it: from `env`, else
    /// inherited from this process unless the spec clears or removes it.
    pub fn env_value(&self, name: &str) -> Option<String> {
        if let Some(value) = self.env.get(name) {
            return Some(value.clone());
        }
        if self.clear_env || self.env_remove.iter().any(|removed| removed == name) {
            return None;
        }
        std::env::var(name).ok()
    }

    /// The secret values this command hands its agent: those of secret-named variables it sets or
    /// inherits, and those of secret-named arguments (see [`crate::kit::secrets::secret_values`]).
    pub fn secret_values(&self) -> Vec<String> {
        let inherited: Vec<(String, String)> = if self.clear_env {
            Vec::new()
        } else {
            std::env::vars()
                .filter(|(k, _)| !self.env.contains_key(k) && !self.env_remove.contains(k))
                .collect()
        };
        let env = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(inherited.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        crate::guards::secrets::secret_values(env, &self.args_lossy())
    }

    fn args_lossy(&self) -> Vec<String> {
        self.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// A spec for `program` with no arguments.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            ..Self::default()
        }
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends several arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets the working directory.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Takes what the request says about the process: its working directory (when set) and its
    /// environment variables (added to what the spec has).
    ///
    /// ```
    /// use agent_api::kit::CommandSpec;
    /// use agent_api::RunRequest;
    /// let request = RunRequest::new("hi").with_working_dir("/tmp").with_env("LANG", "C");
    /// let spec = CommandSpec::new("my-agent").for_request(&request);
    /// assert_eq!(spec.cwd.as_deref(), Some(std::path::Path::new("/tmp")));
    /// assert_eq!(spec.env["LANG"], "C");
    /// ```
    pub fn for_request(mut self, request: &crate::vocabulary::request::RunRequest) -> Self {
        self.env
            .extend(request.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(dir) = &request.working_dir {
            self.cwd = Some(dir.clone());
        }
        if let Some(launcher) = &request.launcher {
            self.launcher = launcher.clone();
        }
        self
    }

    /// Declares environment variables the agent CLI reads (see [`CommandSpec::reads_env`]).
    pub fn reads_env<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.reads_env
            .extend(names.into_iter().map(|name| name.as_ref().to_string()));
        self
    }

    /// Declares where in `HOME` the agent keeps its state (see [`CommandSpec::home_state`]).
    pub fn home_state<I, S>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<PathBuf>,
    {
        self.home_state.extend(paths.into_iter().map(Into::into));
        self
    }

    /// Declares variables naming the agent's state directories (see [`CommandSpec::state_vars`]).
    pub fn state_vars<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.state_vars
            .extend(names.into_iter().map(|name| name.as_ref().to_string()));
        self
    }

    /// Adds a directory the agent keeps state in (see [`CommandSpec::writable_dirs`]).
    pub fn writable_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.writable_dirs.push(dir.into());
        self
    }

    /// Adds a file on this machine the agent reads by path (see [`CommandSpec::local_files`]).
    pub fn local_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.local_files.push(path.into());
        self
    }

    /// Sets how the process is started.
    pub fn with_launcher(mut self, launcher: Launcher) -> Self {
        self.launcher = launcher;
        self
    }

    /// Keeps stdin open as a pipe for a two-way protocol.
    pub fn with_stdin(mut self) -> Self {
        self.stdin = true;
        self
    }
}
