//! Spawning an agent CLI in its own process group, and terminating that group.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::error::AgentError;

/// What to spawn: a program and its argv (never a shell string), environment and directory.
///
/// ```
/// use agent_api::kit::CommandSpec;
/// let spec = CommandSpec::new("claude").arg("-p").env("DISABLE_AUTOUPDATER", "1");
/// assert_eq!(spec.args, ["-p"]);
/// ```
#[derive(Debug, Clone, Default)]
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
}

impl CommandSpec {
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
        self
    }

    /// Keeps stdin open as a pipe for a two-way protocol.
    pub fn with_stdin(mut self) -> Self {
        self.stdin = true;
        self
    }
}

/// A spawned agent: the child (leader of its own process group) and its group id.
pub struct ProcessGroupChild {
    /// The child process.
    pub child: Child,
    /// The process group id (the child's pid).
    pub pgid: i32,
}

impl ProcessGroupChild {
    /// Sends `signal` to every process of the group. Errors (the group is gone) are ignored.
    pub fn signal_group(&self, signal: i32) {
        signal_group(self.pgid, signal);
    }
}

impl Drop for ProcessGroupChild {
    fn drop(&mut self) {
        // Whatever happened to the run, nothing of its group outlives it.
        signal_group(self.pgid, libc::SIGKILL);
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

/// Spawns the spec with piped stdout and stderr, in a new process group, with SIGINT, SIGTERM,
/// SIGPIPE and SIGQUIT at their default dispositions and no blocked signals (a parent that
/// ignores SIGINT would otherwise pass that on).
pub fn spawn(spec: &CommandSpec) -> Result<ProcessGroupChild, AgentError> {
    let mut cmd = Command::new(&spec.program);
    if spec.clear_env {
        cmd.env_clear();
    }
    cmd.args(&spec.args)
        .envs(&spec.env)
        .stdin(if spec.stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for key in &spec.env_remove {
        cmd.env_remove(key);
    }
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
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
    let child = cmd.spawn().map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => AgentError::BinaryNotFound { program: spec.program.clone() },
        _ => AgentError::Spawn { program: spec.program.clone(), source },
    })?;
    let pgid = child.id().map(|id| id as i32).unwrap_or(0);
    Ok(ProcessGroupChild { child, pgid })
}
