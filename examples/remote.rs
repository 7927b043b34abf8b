//! Running an agent's process somewhere else: in a docker container and on a host over ssh, through the
//! same launcher seam every backend spawns through. A backend gets it from the request:
//!
//! ```no_run
//! # use agent_api::request::Launcher;
//! let in_container = agent_api::RunRequest::new("fix the tests").with_launcher("docker:dev-box".parse::<Launcher>().unwrap());
//! let on_host = agent_api::RunRequest::new("fix the tests").with_launcher("ssh:dev@build-3:2222".parse::<Launcher>().unwrap());
//! # let _ = (in_container, on_host);
//! ```
//!
//! This example runs `id -un` and `readlink /proc/self/ns/mnt` through each launcher and prints as whom and
//! in which mount namespace they ran (a container's differs from this machine's).
//!
//! `cargo run -p agent_api_examples --example remote -- docker:NAME ssh:[user@]host[:port]`
//!
//! Without arguments it uses the test container and sshd that `bash tests/launchers/setup.sh` starts
//! (`tests/run.sh` runs it first), and fails saying so when they are missing.

use std::ffi::OsString;
use std::path::PathBuf;

use agent_api::kit::process::spawn;
use agent_api::kit::CommandSpec;
use agent_api::request::{Launcher, Ssh};
use agent_api::AgentError;
use tokio::io::AsyncReadExt;

/// The launchers of `tests/launchers/setup.sh`, from the state file it writes.
fn test_launchers() -> Result<Vec<Launcher>, String> {
    let dir = std::env::var_os("AGENT_API_LAUNCHERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/agent_api/launchers")
        });
    let state = std::fs::read_to_string(dir.join("launchers.env"))
        .map_err(|_| "no launchers given and no test infrastructure: run `bash tests/launchers/setup.sh` first".to_string())?;
    let value = |key: &str| {
        state
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or_default()
            .to_string()
    };
    for part in ["DOCKER", "SSH"] {
        if value(part) != "ok" {
            return Err(format!(
                "{part} is not set up: {} (run `bash tests/launchers/setup.sh`)",
                value(part)
            ));
        }
    }
    let container = value("DOCKER_CONTAINERS")
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    let docker: Launcher = format!("docker:{container}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    // The test sshd has a client config of its own; a real host needs only `ssh:host` and ~/.ssh/config.
    let mut ssh = Ssh::new(value("SSH_HOST"));
    ssh.options = vec![OsString::from("-F"), value("SSH_CONFIG").into()];
    Ok(vec![docker, Launcher::Ssh(ssh)])
}

/// Runs `program` through `launcher` and returns what it printed.
async fn run(launcher: &Launcher, program: &str, arg: &str) -> Result<String, AgentError> {
    let mut child = spawn(
        &CommandSpec::new(program)
            .arg(arg)
            .with_launcher(launcher.clone()),
    )?;
    let mut out = String::new();
    if let Some(mut stdout) = child.child.stdout.take() {
        stdout.read_to_string(&mut out).await?;
    }
    child.child.wait().await?;
    Ok(out.trim().to_string())
}

#[tokio::main]
async fn main() {
    let given: Vec<String> = std::env::args().skip(1).collect();
    let launchers = if given.is_empty() {
        test_launchers().unwrap_or_else(|reason| {
            eprintln!("remote example: {reason}");
            std::process::exit(1);
        })
    } else {
        given
            .iter()
            .map(|via| {
                via.parse::<Launcher>()
                    .unwrap_or_else(|e| panic!("{via}: {e}"))
            })
            .collect()
    };
    let namespace = ("readlink", "/proc/self/ns/mnt");
    println!(
        "here: {}",
        run(&Launcher::Local, namespace.0, namespace.1)
            .await
            .unwrap_or_else(|e| e.to_string())
    );
    for launcher in &launchers {
        let place = run(launcher, namespace.0, namespace.1).await;
        let user = run(launcher, "id", "-un").await;
        match (place, user) {
            (Ok(place), Ok(user)) => println!("{launcher}: as {user} in {place}"),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("{launcher}: {e}");
                std::process::exit(1);
            }
        }
    }
}
