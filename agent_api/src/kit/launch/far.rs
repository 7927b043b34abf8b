//! The far-side protocol shared by the launchers that run the agent where this process cannot
//! signal it (Prefix, Container, Ssh).
//!
//! The agent is started by [`START_SCRIPT`], run by `sh -c` on the far side with the arguments
//! `RUN_ID DIR PROGRAM ARGS...`: it enters `DIR` (when not empty), starts `PROGRAM ARGS...` with
//! `setsid` in the background (its own session and process group, whose id is its pid), keeping
//! its stdin, writes that id to `${TMPDIR:-/tmp}/agent-api-RUN_ID.pid`, and waits for it, exiting
//! with its status.
//!
//! [`STOP_SCRIPT`], run the same way with `RUN_ID GRACE_TENTHS`, first leaves a stop mark
//! (`…RUN_ID.stop`), then reads the pidfile and sends the group SIGTERM, waits up to the grace
//! period for it to go, and sends SIGKILL. The start script checks the stop mark after writing the
//! pidfile; since each side writes before it reads, a stop that races the start is never missed:
//! either the stop sees the pidfile or the start sees the mark and kills its own group.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use tokio::sync::watch;

/// The far-side wrapper that starts the agent (see the module docs for its arguments).
pub const START_SCRIPT: &str = r#"run=$1; dir=$2; shift 2
mark="${TMPDIR:-/tmp}/agent-api-$run"
if [ -n "$dir" ]; then cd "$dir" || exit 126; fi
exec 3<&0
setsid "$@" <&3 3<&- &
pg=$!
exec 3<&-
printf '%s\n' "$pg" > "$mark.pid.tmp" && mv -f "$mark.pid.tmp" "$mark.pid"
if [ -e "$mark.stop" ]; then kill -KILL "-$pg" 2>/dev/null; kill -KILL "$pg" 2>/dev/null; rm -f "$mark.stop"; fi
wait "$pg""#;

/// The far-side command that stops the agent's group (see the module docs for its arguments).
pub const STOP_SCRIPT: &str = r#"run=$1; tenths=$2
mark="${TMPDIR:-/tmp}/agent-api-$run"
: > "$mark.stop"
[ -s "$mark.pid" ] || exit 0
pg=$(cat "$mark.pid")
if kill -TERM "-$pg" 2>/dev/null || kill -TERM "$pg" 2>/dev/null; then
  i=0
  while [ "$i" -lt "$tenths" ] && { kill -0 "-$pg" 2>/dev/null || kill -0 "$pg" 2>/dev/null; }; do sleep 0.1; i=$((i+1)); done
  kill -KILL "-$pg" 2>/dev/null; kill -KILL "$pg" 2>/dev/null
fi
rm -f "$mark.pid" "$mark.stop""#;

/// The `sh -c` argv that runs `script` with `args` on the far side (`$0` is `agent-api`).
pub fn sh_argv(script: &str, args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["sh".into(), "-c".into(), script.into(), "agent-api".into()];
    argv.extend(args);
    argv
}

/// A local command that reaches the far side: program, argv and environment.
#[derive(Clone)]
#[non_exhaustive]
pub struct LocalCommand {
    /// The local program (`docker`, `ssh`, the prefix's first element).
    pub program: PathBuf,
    /// Its arguments, the far-side command included.
    pub args: Vec<OsString>,
    /// Its whole environment (nothing else is inherited).
    pub env: BTreeMap<String, String>,
}

/// Shows the variable names of `env`, never their values.
impl std::fmt::Debug for LocalCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCommand")
            .field("program", &self.program)
            .field("args", &self.args.len())
            .field("env", &crate::guards::secrets::EnvNames(&self.env))
            .finish()
    }
}

/// The agent's process group on the far side of a launcher, and the command that stops it.
///
/// Stopping runs once, on a thread of its own (so a drop can start it without a runtime), and is
/// bounded: the stop command gets the grace period plus [`FarGroup::CONNECT_ALLOWANCE`], then is killed.
#[derive(Debug)]
pub struct FarGroup {
    stop: LocalCommand,
    grace: Duration,
    done: OnceLock<watch::Receiver<bool>>,
}

impl FarGroup {
    /// How long the stop command may take on top of the grace period (to connect, for ssh).
    pub const CONNECT_ALLOWANCE: Duration = Duration::from_secs(15);

    /// A far group stopped by `stop` (built with [`STOP_SCRIPT`]) within `grace` after SIGTERM.
    pub fn new(stop: LocalCommand, grace: Duration) -> Self {
        Self {
            stop,
            grace,
            done: OnceLock::new(),
        }
    }

    /// Starts stopping the far group (SIGTERM, grace, SIGKILL there), once; returns at once.
    pub fn begin_stop(&self) {
        self.done.get_or_init(|| {
            let (tx, rx) = watch::channel(false);
            let stop = self.stop.clone();
            let allowed = self.grace + Self::CONNECT_ALLOWANCE;
            std::thread::spawn(move || {
                run_bounded(&stop, allowed);
                let _ = tx.send(true);
            });
            rx
        });
    }

    /// Stops the far group (see [`FarGroup::begin_stop`]) and waits until the stop command is done.
    pub async fn stop(&self) {
        self.begin_stop();
        let mut done = self.done.get().expect("begin_stop sets it").clone();
        let _ = done.wait_for(|finished| *finished).await;
    }
}

/// Runs `command` to completion, killing it after `allowed`. Errors are only logged: a stop that
/// cannot run (the host is down) has nothing else to try.
fn run_bounded(command: &LocalCommand, allowed: Duration) {
    use std::os::unix::process::CommandExt;
    let spawned = std::process::Command::new(&command.program)
        .args(&command.args)
        .env_clear()
        .envs(&command.env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            tracing::warn!(%error, program = %command.program.display(), "cannot run the far-side stop command");
            return;
        }
    };
    let until = Instant::now() + allowed;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) if Instant::now() >= until => {
                tracing::warn!(program = %command.program.display(), "the far-side stop command did not finish in time");
                crate::kit::reap::signal_group(child.id() as i32, libc::SIGKILL);
                let _ = child.wait();
                return;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
