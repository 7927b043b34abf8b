//! Turning a spec and its launcher into the local command to spawn (and, for a far side, the
//! command that stops it).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::far::{self, FarGroup, LocalCommand};
use super::far_prefix::FarPrefix;
use super::{agent_env, Launcher};
use crate::kit::command::CommandSpec;
use crate::vocabulary::error::AgentError;

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
pub(crate) fn plan(
    spec: &CommandSpec,
    program: PathBuf,
    run_id: &str,
) -> Result<Planned, AgentError> {
    let env = agent_env(spec);
    let agent_argv =
        || std::iter::once(program.clone().into_os_string()).chain(spec.args.iter().cloned());
    match &spec.launcher {
        Launcher::Local => Err(AgentError::InvalidRequest {
            reason: "the local launcher is not planned".into(),
        }),
        Launcher::Sandbox(settings) => {
            let cwd = match &spec.cwd {
                Some(dir) => dir.clone(),
                None => std::env::current_dir()?,
            };
            let mut args = super::bwrap::args(settings, &cwd, &env, spec, &program);
            args.extend(agent_argv());
            Ok(Planned {
                program: settings.program.clone(),
                args,
                env,
                cwd: None,
                far: None,
                stdin_preamble: Vec::new(),
            })
        }
        Launcher::Prefix(_) | Launcher::Container(_) | Launcher::Ssh(_) => {
            if let Some(file) = spec.local_files.first() {
                return Err(AgentError::InvalidRequest {
                    reason: format!(
                        "this run gives its agent a file written on this machine ({}), which the {} launcher cannot carry to the agent",
                        file.display(),
                        spec.launcher
                    ),
                });
            }
            let reach = far_prefix(&spec.launcher, &env, run_id)?;
            let dir = spec
                .cwd
                .clone()
                .map(PathBuf::into_os_string)
                .unwrap_or_default();
            let script = format!("{}{}", reach.script_preamble, far::START_SCRIPT);
            let start = far::sh_argv(
                &script,
                [run_id.into(), dir].into_iter().chain(agent_argv()),
            );
            let tenths = (FAR_GRACE.as_millis() / 100).to_string();
            let stop = far::sh_argv(far::STOP_SCRIPT, [run_id.into(), tenths.into()]);
            let far_stop = reach.far_stop.iter().cloned().chain(stop).collect();
            let client_env = reach.client_env.clone().unwrap_or(env);
            let stop = LocalCommand {
                program: reach.program.clone(),
                args: reach.join(reach.stop.clone(), far_stop)?,
                env: client_env.clone(),
            };
            let args = reach.join(
                reach.start.clone(),
                reach.far_start.iter().cloned().chain(start).collect(),
            )?;
            let far = Some(FarGroup::new(stop, FAR_GRACE));
            Ok(Planned {
                program: reach.program,
                args,
                env: client_env,
                cwd: None,
                far,
                stdin_preamble: reach.stdin_preamble,
            })
        }
    }
}

/// The far-side prefix of `launcher`, whose agent gets `env`, for the run `run_id` (see [`FarPrefix`]).
fn far_prefix(
    launcher: &Launcher,
    env: &BTreeMap<String, String>,
    run_id: &str,
) -> Result<FarPrefix, AgentError> {
    match launcher {
        Launcher::Prefix(prefix) => {
            let (first, rest) = prefix.split_first().ok_or(AgentError::InvalidRequest {
                reason: "the launcher prefix is empty".into(),
            })?;
            Ok(FarPrefix::argv(first.into(), rest.to_vec(), rest.to_vec()))
        }
        Launcher::Container(settings) => Ok(super::container::far_prefix(settings, env, run_id)),
        Launcher::Ssh(settings) => super::ssh::far_prefix(settings, env, run_id),
        other => Err(AgentError::InvalidRequest {
            reason: format!("the {other} launcher has no far side"),
        }),
    }
}
