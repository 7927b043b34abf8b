//! The container launcher: `docker`/`podman` `exec -i NAME` into a running container, or `run --rm -i
//! IMAGE` with the caller's mounts, on the far-side protocol of [`super::far`].
//!
//! The agent's environment crosses as `-e NAME` (the value in the local client's own environment, so
//! `ps` never shows it), together with the run marker, so every process of the run inside the container
//! carries it too. A container started from an image is named `agent-api-<run id>`; the stop command
//! reaches it with `exec` like an existing one, and `--rm` removes it once the agent's group is gone.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use super::far::{self, FarGroup, LocalCommand};
use super::plan::{Planned, FAR_GRACE};
use super::{Container, ContainerTarget};
use crate::kit::process::RUN_MARKER_VAR;

/// Variables of this process the engine's client itself reads (which daemon, which config), passed to
/// the client but not into the container.
const CLIENT_ENV: &[&str] = &[
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "DOCKER_API_VERSION",
    "CONTAINER_HOST",
    "CONTAINER_CONNECTION",
    "CONTAINERS_CONF",
    "XDG_RUNTIME_DIR",
];

/// The name of the container a run started from an image gets.
pub(crate) fn run_container_name(run_id: &str) -> String {
    format!("agent-api-{run_id}")
}

/// Plans `agent_argv` (program first) in the container `settings` names, with `env` as the agent's
/// whole environment and `dir` as its working directory there.
pub(crate) fn plan(settings: &Container, agent_argv: Vec<OsString>, dir: OsString, run_id: &str, env: BTreeMap<String, String>) -> Planned {
    let program = PathBuf::from(settings.engine.program());
    // The marker is set in the client's environment by the spawner; `-e` carries it across.
    let passed = env.keys().map(String::as_str).chain([RUN_MARKER_VAR]);
    let env_args: Vec<OsString> = passed.flat_map(|name| [OsString::from("-e"), OsString::from(name)]).collect();
    let (mut args, target) = match &settings.target {
        ContainerTarget::Exec(name) => (vec![OsString::from("exec"), "-i".into()], name.clone()),
        ContainerTarget::Image(image) => {
            let name = run_container_name(run_id);
            let mut args: Vec<OsString> = vec!["run".into(), "--rm".into(), "-i".into(), "--name".into(), name.clone().into()];
            for mount in &settings.mounts {
                let mut spec = OsString::from(&mount.host);
                spec.push(":");
                spec.push(&mount.container);
                if mount.read_only {
                    spec.push(":ro");
                }
                args.extend([OsString::from("-v"), spec]);
            }
            args.extend(env_args.iter().cloned());
            args.extend(settings.extra_args.iter().cloned());
            args.push(image.into());
            (args, name)
        }
    };
    if let ContainerTarget::Exec(_) = &settings.target {
        args.extend(env_args);
        args.extend(settings.extra_args.iter().cloned());
        args.push(target.clone().into());
    }
    args.extend(far::sh_argv(far::START_SCRIPT, [OsString::from(run_id), dir].into_iter().chain(agent_argv)));

    let client_env = with_client_env(env);
    // The stop script finds the pidfile under the agent's TMPDIR: give it the same one.
    let mut stop_args: Vec<OsString> = vec!["exec".into()];
    if client_env.contains_key("TMPDIR") {
        stop_args.extend([OsString::from("-e"), "TMPDIR".into()]);
    }
    stop_args.push(target.into());
    stop_args.extend(far::sh_argv(far::STOP_SCRIPT, [OsString::from(run_id), (FAR_GRACE.as_millis() / 100).to_string().into()]));
    let stop = LocalCommand { program: program.clone(), args: stop_args, env: client_env.clone() };
    Planned { program, args, env: client_env, cwd: None, far: Some(FarGroup::new(stop, FAR_GRACE)), stdin_preamble: Vec::new() }
}

/// The agent's environment plus what the client needs from this process's (see [`CLIENT_ENV`]); the
/// client's config is found under this process's `HOME` even when the agent gets another one.
fn with_client_env(mut env: BTreeMap<String, String>) -> BTreeMap<String, String> {
    for name in CLIENT_ENV {
        if let (false, Ok(value)) = (env.contains_key(*name), std::env::var(name)) {
            env.insert(name.to_string(), value);
        }
    }
    if let (false, Some(home)) = (env.contains_key("DOCKER_CONFIG"), std::env::var_os("HOME")) {
        if env.get("HOME").map(OsString::from).as_ref() != Some(&home) {
            env.insert("DOCKER_CONFIG".into(), PathBuf::from(home).join(".docker").to_string_lossy().into_owned());
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::launch::Engine;

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn exec_passes_env_names_only_and_the_argv_as_separate_elements() {
        let env = BTreeMap::from([("API_KEY".to_string(), "s3cret-sentinel".to_string()), ("TMPDIR".into(), "/w/tmp".into())]);
        let argv = vec![OsString::from("claude"), "-p".into(), "it's $(rm -rf ~)".into()];
        let planned = plan(&Container::exec(Engine::Docker, "box"), argv, "/w".into(), "r1", env);
        let args = strings(&planned.args);
        assert_eq!(args[..8], ["exec", "-i", "-e", "API_KEY", "-e", "TMPDIR", "-e", RUN_MARKER_VAR]);
        assert_eq!(args[8..12], ["box", "sh", "-c", far::START_SCRIPT]);
        assert_eq!(args[12..], ["agent-api", "r1", "/w", "claude", "-p", "it's $(rm -rf ~)"]);
        assert!(!args.iter().any(|a| a.contains("s3cret-sentinel")));
        assert_eq!(planned.env["API_KEY"], "s3cret-sentinel");
        assert_eq!(planned.program, PathBuf::from("docker"));
        assert!(planned.far.is_some());
    }

    #[test]
    fn an_image_run_is_named_after_the_run_and_gets_the_mounts() {
        let settings = Container::image(Engine::Podman, "img:1").with_mount("/h/clis", "/opt/clis", true).with_mount("/h/w", "/w", false);
        let planned = plan(&settings, vec!["codex".into()], OsString::new(), "r2", BTreeMap::new());
        let args = strings(&planned.args);
        let expected =
            ["run", "--rm", "-i", "--name", "agent-api-r2", "-v", "/h/clis:/opt/clis:ro", "-v", "/h/w:/w", "-e", RUN_MARKER_VAR, "img:1"];
        assert_eq!(args[..expected.len()], expected);
        assert_eq!(planned.program, PathBuf::from("podman"));
    }
}
