//! Spawning an agent CLI in its own process group, and terminating that group.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use tokio::process::{Child, Command};

use super::launch::{FarGroup, Launcher};
use crate::vocabulary::error::AgentError;

pub(crate) use super::command::CommandSpec;
pub use super::reap::{
    descendants, kill_tree, owner_alive, owner_token, signal_group, stop_orphans, stop_orphans_of,
    OWNER_VAR, RUN_MARKER_VAR,
};
pub(crate) use crate::contract::backend::check_working_dir;
pub(crate) use crate::guards::files::resolve_program;

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
    /// The `agent_process` span, from the spawn to the group's end.
    span: tracing::Span,
}

/// Agent process groups this process holds now (spawned, not yet dropped).
static RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many agent process groups this process holds now: spawned by [`spawn`] and not yet
/// dropped (each is killed when dropped). A server reports it as a gauge.
pub fn running() -> usize {
    RUNNING.load(std::sync::atomic::Ordering::Relaxed)
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
        if let Ok(Some(status)) = self.child.try_wait() {
            if let Some(code) = status.code() {
                self.span.record("process.exit.code", code);
            }
        }
        RUNNING.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The most one argument of a command line may hold on Linux (`MAX_ARG_STRLEN`, 32 pages, with
/// its NUL).
pub const MAX_ARGUMENT_BYTES: usize = 32 * 4096 - 1;

/// [`AgentError::ArgumentTooLong`] for the first argument over [`MAX_ARGUMENT_BYTES`]: a typed
/// refusal naming its size before anything starts, instead of the kernel's `E2BIG`.
fn check_argument_sizes(args: &[OsString]) -> Result<(), AgentError> {
    match args.iter().position(|arg| arg.len() > MAX_ARGUMENT_BYTES) {
        Some(at) => Err(AgentError::ArgumentTooLong {
            index: at + 1,
            bytes: args[at].len(),
            max: MAX_ARGUMENT_BYTES,
        }),
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
    let program = if local_fs {
        absolute_program(&spec.program)?
    } else {
        spec.program.clone()
    };
    if let (true, Some(dir)) = (local_fs, &spec.cwd) {
        check_working_dir(dir)?;
    }
    super::reap::become_subreaper();
    super::reap::reap_left_orphans();
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
    cmd.stdin(if spec.stdin || !preamble.is_empty() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .env(RUN_MARKER_VAR, marker_value)
    .env(OWNER_VAR, owner_token())
    .process_group(0)
    .kill_on_drop(true);
    // SAFETY: the closure runs in the child between fork and exec and only calls
    // async-signal-safe functions (signal, sigemptyset, sigprocmask).
    unsafe {
        cmd.pre_exec(|| {
            for sig in [
                libc::SIGINT,
                libc::SIGTERM,
                libc::SIGPIPE,
                libc::SIGQUIT,
                libc::SIGHUP,
            ] {
                libc::signal(sig, libc::SIG_DFL);
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => AgentError::BinaryNotFound {
            program: spec.program.clone(),
        },
        _ => AgentError::Spawn {
            program: spec.program.clone(),
            source,
        },
    })?;
    if !preamble.is_empty() {
        super::launch::write_preamble(&mut child, &preamble, spec.stdin)?;
    }
    let pgid = child.id().map(|id| id as i32).unwrap_or(0);
    // The program's name only: its arguments may hold a prompt, its path a user's name.
    let name = Path::new(&spec.program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let span = tracing::info_span!(
        target: "agent_api::process",
        "agent_process",
        otel.name = %format_args!("agent process {name}"),
        process.executable.name = %name,
        process.pid = pgid,
        process.exit.code = tracing::field::Empty,
        agent_api.launcher = %spec.launcher,
    );
    RUNNING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(ProcessGroupChild {
        child,
        pgid,
        marker,
        far,
        launcher: spec.launcher.clone(),
        _keep_alive: spec.keep_alive.clone(),
        span,
    })
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
        resolve_program(program).ok_or_else(|| AgentError::BinaryNotFound {
            program: program.to_path_buf(),
        })?
    };
    if found.is_absolute() {
        return Ok(found);
    }
    std::path::absolute(&found).map_err(|source| AgentError::Spawn {
        program: program.to_path_buf(),
        source,
    })
}

impl std::fmt::Debug for ProcessGroupChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessGroupChild")
            .field("pgid", &self.pgid)
            .finish_non_exhaustive()
    }
}
