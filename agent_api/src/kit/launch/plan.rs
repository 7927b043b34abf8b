//! Turning a spec and its launcher into the local command to spawn (and, for a far side, the
//! command that stops it).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::far::{self, FarGroup, LocalCommand};
use super::{agent_env, Launcher};
use crate::error::AgentError;
use crate::kit::process::CommandSpec;

/// How long the far side's agent has between SIGTERM and SIGKILL when a run stops.
pub(crate) const FAR_GRACE: Duration = Duration::from_secs(3);

/// What to spawn locally for a spec whose launcher is not Local.
pub(crate) struct Planned {
    /// The local program.
    pub(crate) program: PathBuf,
    /// Its arguments.
    pub(crate) args: Vec<OsString>,
    /// Its whole environment (the run marker is added by the spawner).
    pub(crate) env: BTreeMap<String, String>,
    /// Its working directory (`None`: this process's).
    pub(crate) cwd: Option<PathBuf>,
    /// The agent's group on the far side, for the launchers that have one.
    pub(crate) far: Option<FarGroup>,
    /// Bytes to write to the local process's stdin before anything else (the ssh launcher's
    /// environment); empty for none.
    pub(crate) stdin_preamble: Vec<u8>,
}

/// Plans `spec` (whose `program` is already resolved, for a local filesystem) through its launcher.
/// `run_id` names the run's files on the far side.
pub(crate) fn plan(spec: &CommandSpec, program: PathBuf, run_id: &str) -> Result<Planned, AgentError> {
    let env = agent_env(spec);
    let agent_argv = || std::iter::once(program.clone().into_os_string()).chain(spec.args.iter().cloned());
    match &spec.launcher {
        Launcher::Local => Err(AgentError::InvalidRequest { reason: "the local launcher is not planned".into() }),
        Launcher::Sandbox(settings) => {
            let cwd = match &spec.cwd {
                Some(dir) => dir.clone(),
                None => std::env::current_dir()?,
            };
            let mut args = super::bwrap::args(settings, &cwd, &env, spec);
            args.extend(agent_argv());
            Ok(Planned { program: settings.program.clone(), args, env, cwd: None, far: None, stdin_preamble: Vec::new() })
        }
        Launcher::Prefix(prefix) => {
            let (first, rest) = prefix.split_first().ok_or(AgentError::InvalidRequest { reason: "the launcher prefix is empty".into() })?;
            let dir = spec.cwd.clone().map(PathBuf::into_os_string).unwrap_or_default();
            let start_args = [run_id.into(), dir].into_iter().chain(agent_argv());
            let mut args = rest.to_vec();
            args.extend(far::sh_argv(far::START_SCRIPT, start_args));
            let mut stop_args = rest.to_vec();
            stop_args.extend(far::sh_argv(far::STOP_SCRIPT, [run_id.into(), (FAR_GRACE.as_millis() / 100).to_string().into()]));
            let stop = LocalCommand { program: first.into(), args: stop_args, env: env.clone() };
            Ok(Planned {
                program: first.into(),
                args,
                env,
                cwd: None,
                far: Some(FarGroup::new(stop, FAR_GRACE)),
                stdin_preamble: Vec::new(),
            })
        }
        Launcher::Container(settings) => {
            let dir = spec.cwd.clone().map(PathBuf::into_os_string).unwrap_or_default();
            Ok(super::container::plan(settings, agent_argv().collect(), dir, run_id, env))
        }
        Launcher::Ssh(settings) => {
            let dir = spec.cwd.clone().map(PathBuf::into_os_string).unwrap_or_default();
            super::ssh::plan(settings, agent_argv().collect(), dir, run_id, env)
        }
    }
}
