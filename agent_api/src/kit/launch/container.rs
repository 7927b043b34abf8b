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

use super::far_prefix::FarPrefix;
use super::{Container, ContainerTarget};
use crate::kit::reap::RUN_MARKER_VAR;

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

/// How the run `run_id` reaches the container `settings` names, its agent getting `env`.
pub(crate) fn far_prefix(
    settings: &Container,
    env: &BTreeMap<String, String>,
    run_id: &str,
) -> FarPrefix {
    // The marker is set in the client's environment by the spawner; `-e` carries it across.
    let passed = env.keys().map(String::as_str).chain([RUN_MARKER_VAR]);
    let env_args: Vec<OsString> = passed
        .flat_map(|name| [OsString::from("-e"), OsString::from(name)])
        .collect();
    let (mut start, target): (Vec<OsString>, String) = match &settings.target {
        ContainerTarget::Exec(name) => (vec!["exec".into(), "-i".into()], name.clone()),
        ContainerTarget::Image(_) => {
            let name = run_container_name(run_id);
            (
                vec![
                    "run".into(),
                    "--rm".into(),
                    "-i".into(),
                    "--name".into(),
                    name.clone().into(),
                ],
                name,
            )
        }
    };
    // `exec` enters a container whose mounts are set: only a new one gets the caller's.
    let mounts = if matches!(settings.target, ContainerTarget::Image(_)) {
        settings.mounts.as_slice()
    } else {
        &[]
    };
    for mount in mounts {
        let mut spec = OsString::from(&mount.host);
        spec.push(":");
        spec.push(&mount.container);
        if mount.read_only {
            spec.push(":ro");
        }
        start.extend([OsString::from("-v"), spec]);
    }
    start.extend(env_args);
    start.extend(settings.extra_args.iter().cloned());
    start.push(match &settings.target {
        ContainerTarget::Exec(name) => name.into(),
        ContainerTarget::Image(image) => image.into(),
    });
    let client_env = with_client_env(env.clone());
    // The stop script finds the pidfile under the agent's TMPDIR: give it the same one.
    let mut stop: Vec<OsString> = vec!["exec".into()];
    if client_env.contains_key("TMPDIR") {
        stop.extend([OsString::from("-e"), "TMPDIR".into()]);
    }
    stop.push(target.into());
    let mut reach = FarPrefix::argv(PathBuf::from(settings.engine.program()), start, stop);
    reach.client_env = Some(client_env);
    reach
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
            env.insert(
                "DOCKER_CONFIG".into(),
                PathBuf::from(home)
                    .join(".docker")
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::launch::{far, plan};
    use crate::kit::CommandSpec;
    use crate::vocabulary::launcher::{Engine, Launcher};

    fn planned(
        launcher: Launcher,
        spec: CommandSpec,
        run_id: &str,
    ) -> (Vec<String>, plan::Planned) {
        let planned = plan(
            &spec.with_launcher(launcher),
            PathBuf::from("agent-cli"),
            run_id,
        )
        .unwrap();
        (
            planned
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            planned,
        )
    }

    #[test]
    fn exec_passes_env_names_only_and_the_argv_as_separate_elements() {
        let spec = CommandSpec::new("agent-cli")
            .args(["-p", "it's $(rm -rf ~)"])
            .env("API_KEY", "s3cret-sentinel")
            .cwd("/w");
        let (args, planned) = planned(
            Launcher::Container(Container::exec(Engine::Docker, "box")),
            spec,
            "r1",
        );
        assert_eq!(args[..4], ["exec", "-i", "-e", "API_KEY"]);
        let at = args.iter().position(|a| a == "box").unwrap();
        assert_eq!(args[at - 2..at], ["-e", RUN_MARKER_VAR]);
        assert_eq!(args[at + 1..at + 4], ["sh", "-c", far::START_SCRIPT]);
        assert_eq!(
            args[at + 4..],
            [
                "agent-api",
                "r1",
                "/w",
                "agent-cli",
                "-p",
                "it's $(rm -rf ~)"
            ]
        );
        assert!(!args.iter().any(|a| a.contains("s3cret-sentinel")));
        assert_eq!(planned.env["API_KEY"], "s3cret-sentinel");
        assert_eq!(planned.program, PathBuf::from("docker"));
        assert!(planned.far.is_some());
    }

    #[test]
    fn an_image_run_is_named_after_the_run_and_gets_the_mounts() {
        let settings = Container::image(Engine::Podman, "img:1")
            .with_mount("/h/clis", "/opt/clis", true)
            .with_mount("/h/w", "/w", false);
        let (args, planned) = planned(
            Launcher::Container(settings),
            CommandSpec::new("agent-cli"),
            "r2",
        );
        let expected = [
            "run",
            "--rm",
            "-i",
            "--name",
            "agent-api-r2",
            "-v",
            "/h/clis:/opt/clis:ro",
            "-v",
            "/h/w:/w",
            "-e",
        ];
        assert_eq!(args[..expected.len()], expected);
        let at = args.iter().position(|a| a == "img:1").unwrap();
        assert_eq!(args[at - 2..at], ["-e", RUN_MARKER_VAR]);
        assert_eq!(planned.program, PathBuf::from("podman"));
    }
}
