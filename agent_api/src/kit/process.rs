//! Spawning an agent CLI in its own process group, and terminating that group.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use tokio::process::{Child, Command};

use super::launch::{FarGroup, Launcher};
use crate::error::AgentError;

pub use super::reap::{descendants, kill_tree, RUN_MARKER_VAR};

/// What to spawn: a program and its argv (never a shell string), environment and directory.
///
/// ```
/// use agent_api::kit::CommandSpec;
/// let spec = CommandSpec::new("claude").arg("-p").env("DISABLE_AUTOUPDATER", "1");
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
    /// Variables naming directories the agent keeps its state in (`CLAUDE_CONFIG_DIR`,
    /// `CODEX_HOME`): read like [`CommandSpec::reads_env`], and a sandbox keeps what they name writable.
    pub state_vars: Vec<String>,
    /// Where in `HOME` the agent keeps its own state (`.claude`, `.codex`, `.config/opencode`),
    /// relative to it: when the agent's `HOME` is the caller's real home, a sandbox keeps the
    /// home read-only but for these (those that exist).
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
            .field("args", &crate::secrets::ArgsShown(&self.args_lossy()))
            .field("env", &crate::secrets::EnvNames(&self.env))
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
    /// inherits, and those of secret-named arguments (see [`crate::secrets::secret_values`]).
    pub fn secret_values(&self) -> Vec<String> {
        let inherited: Vec<(String, String)> = if self.clear_env {
            Vec::new()
        } else {
            std::env::vars().filter(|(k, _)| !self.env.contains_key(k) && !self.env_remove.contains(k)).collect()
        };
        let env = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).chain(inherited.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        crate::secrets::secret_values(env, &self.args_lossy())
    }

    fn args_lossy(&self) -> Vec<String> {
        self.args.iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    /// A spec for `program` with no arguments.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self { program: program.into(), ..Self::default() }
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
    pub fn for_request(mut self, request: &crate::RunRequest) -> Self {
        self.env.extend(request.env.iter().map(|(k, v)| (k.clone(), v.clone())));
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
        self.reads_env.extend(names.into_iter().map(|name| name.as_ref().to_string()));
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
        self.state_vars.extend(names.into_iter().map(|name| name.as_ref().to_string()));
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

/// A spawned agent: the child (leader of its own process group) and its group id. Dropping it
/// kills the group and every process the agent started, including those that left the group
/// (see [`kill_tree`]).
pub struct ProcessGroupChild {
    /// The child process.
    pub child: Child,
    /// The process group id (the child's pid).
    pub pgid: i32,
    /// The run's marker, the value of [`RUN_MARKER_VAR`] in the agent's environment.
    marker: u64,
    /// The agent's group on the far side of its launcher, if it has one.
    far: Option<Arc<FarGroup>>,
    /// Which launcher started it.
    launcher: Launcher,
    /// The spec's [`CommandSpec::keep_alive`]: dropped after the group is killed.
    _keep_alive: Vec<Arc<dyn std::any::Any + Send + Sync>>,
}

impl ProcessGroupChild {
    /// Sends `signal` to every process of the group. Errors (the group is gone) are ignored.
    pub fn signal_group(&self, signal: i32) {
        signal_group(self.pgid, signal);
    }

    /// SIGKILLs the group and every descendant of the agent, in its group or not, and reaps the
    /// orphans among them.
    pub fn kill_all(&self) {
        kill_tree(self.pgid, self.marker);
    }

    /// The pids of the agent's descendants still present (see [`descendants`]).
    pub fn descendants(&self) -> Vec<i32> {
        descendants(self.pgid, self.marker)
    }

    /// The agent's process group on the far side (Prefix, Container, Ssh launchers): stopping the
    /// local client does not stop it; [`FarGroup::stop`] does.
    pub fn far_group(&self) -> Option<&Arc<FarGroup>> {
        self.far.as_ref()
    }

    /// The launcher that started the agent.
    pub fn launcher(&self) -> &Launcher {
        &self.launcher
    }
}

impl Drop for ProcessGroupChild {
    fn drop(&mut self) {
        // Whatever happened to the run, nothing it started outlives it, here or on the far side.
        self.kill_all();
        if let Some(far) = &self.far {
            far.begin_stop();
        }
    }
}

/// Sends `signal` to process group `pgid`.
pub fn signal_group(pgid: i32, signal: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid only sends a signal; it touches no memory.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

/// Finds `program` the way `execvp` would: a path with a slash as is, else on `PATH`.
pub fn resolve_program(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// The most one argument of a command line may hold on Linux (`MAX_ARG_STRLEN`, 32 pages, with
/// its NUL).
pub const MAX_ARGUMENT_BYTES: usize = 32 * 4096 - 1;

/// [`AgentError::ArgumentTooLong`] for the first argument over [`MAX_ARGUMENT_BYTES`]: a typed
/// refusal naming its size before anything starts, instead of the kernel's `E2BIG`.
fn check_argument_sizes(args: &[OsString]) -> Result<(), AgentError> {
    match args.iter().position(|arg| arg.len() > MAX_ARGUMENT_BYTES) {
        Some(at) => Err(AgentError::ArgumentTooLong { index: at + 1, bytes: args[at].len(), max: MAX_ARGUMENT_BYTES }),
        None => Ok(()),
    }
}

/// Spawns the spec with piped stdout and stderr, in a new process group, with SIGINT, SIGTERM,
/// SIGPIPE and SIGQUIT at their default dispositions and no blocked signals (a parent that
/// ignores SIGINT would otherwise pass that on).
///
/// A relative program path is resolved against this process's working directory (and a bare name
/// on `PATH`) before the agent's working directory is entered, so a binary planted in the
/// repository the agent works on never runs instead. A working directory that cannot be entered
/// is a [`AgentError::WorkingDir`] error. On Linux the caller becomes a child subreaper and the
/// agent gets a [`RUN_MARKER_VAR`], so that [`ProcessGroupChild::kill_all`] finds everything it
/// started.
///
/// The spec's [`launcher`](CommandSpec::launcher) decides what is spawned locally (see
/// [`super::launch`]): a launcher whose program is missing is
/// [`AgentError::LauncherUnavailable`] before anything starts.
pub fn spawn(spec: &CommandSpec) -> Result<ProcessGroupChild, AgentError> {
    spec.launcher.check_available()?;
    check_argument_sizes(&spec.args)?;
    let local_fs = spec.launcher.is_local_filesystem();
    // A far side resolves the program on its own PATH, in its own filesystem.
    let program = if local_fs { absolute_program(&spec.program)? } else { spec.program.clone() };
    if let (true, Some(dir)) = (local_fs, &spec.cwd) {
        check_working_dir(dir)?;
    }
    super::reap::become_subreaper();
    let marker = super::reap::new_marker();
    let marker_value = super::reap::marker_value(marker);
    let mut preamble = Vec::new();
    let (mut cmd, far) = if spec.launcher == Launcher::Local {
        (local_command(spec, &program), None)
    } else {
        let planned = super::launch::plan(spec, program, &marker_value)?;
        let mut cmd = Command::new(&planned.program);
        cmd.args(&planned.args).env_clear().envs(&planned.env);
        if let Some(dir) = &planned.cwd {
            cmd.current_dir(dir);
        }
        preamble = planned.stdin_preamble;
        (cmd, planned.far.map(Arc::new))
    };
    cmd.stdin(if spec.stdin || !preamble.is_empty() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env(RUN_MARKER_VAR, marker_value)
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: the closure runs in the child between fork and exec and only calls
    // async-signal-safe functions (signal, sigemptyset, sigprocmask).
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGPIPE, libc::SIGQUIT, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => AgentError::BinaryNotFound { program: spec.program.clone() },
        _ => AgentError::Spawn { program: spec.program.clone(), source },
    })?;
    if !preamble.is_empty() {
        super::launch::write_preamble(&mut child, &preamble, spec.stdin)?;
    }
    let pgid = child.id().map(|id| id as i32).unwrap_or(0);
    Ok(ProcessGroupChild { child, pgid, marker, far, launcher: spec.launcher.clone(), _keep_alive: spec.keep_alive.clone() })
}

/// The command for [`Launcher::Local`]: the spec as it is, in this process's environment unless
/// it clears it.
fn local_command(spec: &CommandSpec, program: &Path) -> Command {
    let mut cmd = Command::new(program);
    if spec.clear_env {
        cmd.env_clear();
    }
    cmd.args(&spec.args).envs(&spec.env);
    for key in &spec.env_remove {
        cmd.env_remove(key);
    }
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    cmd
}

/// `program` as an absolute path: a bare name looked up on `PATH`, a relative path joined to this
/// process's working directory (never the agent's).
fn absolute_program(program: &Path) -> Result<PathBuf, AgentError> {
    let found = if program.components().count() > 1 {
        program.to_path_buf()
    } else {
        resolve_program(program).ok_or_else(|| AgentError::BinaryNotFound { program: program.to_path_buf() })?
    };
    if found.is_absolute() {
        return Ok(found);
    }
    std::path::absolute(&found).map_err(|source| AgentError::Spawn { program: program.to_path_buf(), source })
}

/// Checks that the agent's working directory exists, is a directory and can be entered; else a
/// [`AgentError::WorkingDir`] saying which and why.
pub fn check_working_dir(dir: &Path) -> Result<(), AgentError> {
    use std::os::unix::ffi::OsStrExt;
    let error = |source: std::io::Error| AgentError::WorkingDir { path: dir.to_path_buf(), source };
    let meta = std::fs::metadata(dir).map_err(error)?;
    if !meta.is_dir() {
        return Err(error(std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory")));
    }
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| error(std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path holds a NUL byte")))?;
    // SAFETY: access(2) reads the NUL-terminated path and touches no other memory.
    if unsafe { libc::access(path.as_ptr(), libc::X_OK) } != 0 {
        return Err(error(std::io::Error::last_os_error()));
    }
    Ok(())
}

impl std::fmt::Debug for ProcessGroupChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessGroupChild").field("pgid", &self.pgid).finish_non_exhaustive()
    }
}
