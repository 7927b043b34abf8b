//! The test infrastructure of the container and ssh launchers, as `tests/launchers/setup.sh` left it, and
//! the process listings that prove a run left nothing behind: inside a container (through `docker exec`)
//! and on this machine (the ssh tests' host is this machine, so one `/proc` scan covers the local clients
//! and the far side).
//!
//! Processes are found by an environment entry the test gives the agent (a fresh [`tag`] per test), so
//! tests running at the same time in the same container or on the same host do not see each other's.
//!
//! ```no_run
//! let infra = agent_api_conformance::launchers::Infra::load().unwrap();
//! let docker = infra.docker().unwrap();
//! let (name, value) = agent_api_conformance::launchers::tag();
//! let entry = format!("{name}={value}");
//! assert!(docker.processes_carrying(&docker.containers[0], &entry).unwrap().is_empty());
//! ```

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

/// The environment variable the tests set in an agent's environment to find its processes afterwards.
pub const TAG_VAR: &str = "AGENT_API_TEST_TAG";

/// What went wrong finding or using the infrastructure.
#[derive(Debug)]
#[non_exhaustive]
pub enum InfraError {
    /// `tests/launchers/setup.sh` has not run (no state file).
    NotSetUp {
        /// The state file looked for.
        path: PathBuf,
    },
    /// The setup script ran but could not set this part up; `reason` is what it recorded.
    Unavailable {
        /// `docker` or `ssh`.
        part: &'static str,
        /// The setup script's reason.
        reason: String,
    },
    /// A command of the check itself failed.
    Command {
        /// What was run.
        what: String,
        /// Its error or stderr.
        detail: String,
    },
}

impl std::fmt::Display for InfraError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InfraError::NotSetUp { path } => {
                write!(f, "launcher test infrastructure not set up ({} missing): run `bash tests/launchers/setup.sh`", path.display())
            }
            InfraError::Unavailable { part, reason } => write!(
                f,
                "{part} is not available for the launcher tests: {reason} (see tests/launchers/README.md; run `bash tests/launchers/setup.sh`)"
            ),
            InfraError::Command { what, detail } => write!(f, "{what} failed: {detail}"),
        }
    }
}

impl std::error::Error for InfraError {}

/// The state `tests/launchers/setup.sh` recorded.
#[derive(Debug, Clone)]
pub struct Infra {
    values: HashMap<String, String>,
}

/// The Docker side: an image and running containers made from it (host network; the pinned CLIs, Node and
/// the bench sandboxes mounted at their own paths).
#[derive(Debug, Clone)]
pub struct Docker {
    /// The image, `agent-api-test:<hash>`.
    pub image: String,
    /// The running containers' names.
    pub containers: Vec<String>,
}

/// The ssh side: an sshd on 127.0.0.1 reached through a client config of its own.
#[derive(Debug, Clone)]
pub struct SshHost {
    /// The client config file (`ssh -F`), which names the host, port, user, key and known hosts.
    pub config: PathBuf,
    /// The host alias that config defines.
    pub host: String,
    /// sshd's port on 127.0.0.1.
    pub port: u16,
}

impl Infra {
    /// The state file: `$AGENT_API_LAUNCHERS_DIR/launchers.env`, else `$HOME/.cache/agent_api/launchers/launchers.env`.
    pub fn state_file() -> PathBuf {
        let dir = match std::env::var_os("AGENT_API_LAUNCHERS_DIR").filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/agent_api/launchers"),
        };
        dir.join("launchers.env")
    }

    /// Reads the state file.
    pub fn load() -> Result<Infra, InfraError> {
        let path = Infra::state_file();
        let text = std::fs::read_to_string(&path).map_err(|_| InfraError::NotSetUp { path })?;
        let values = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Ok(Infra { values })
    }

    fn part(&self, part: &'static str, key: &str) -> Result<(), InfraError> {
        match self.values.get(key).map(String::as_str) {
            Some("ok") => Ok(()),
            Some(reason) => Err(InfraError::Unavailable {
                part,
                reason: reason.to_string(),
            }),
            None => Err(InfraError::Unavailable {
                part,
                reason: "not recorded by the setup script".into(),
            }),
        }
    }

    fn value(&self, key: &str) -> String {
        self.values.get(key).cloned().unwrap_or_default()
    }

    /// The Docker side, checked to be running now.
    pub fn docker(&self) -> Result<Docker, InfraError> {
        self.part("docker", "DOCKER")?;
        let docker = Docker {
            image: self.value("DOCKER_IMAGE"),
            containers: self
                .value("DOCKER_CONTAINERS")
                .split_whitespace()
                .map(str::to_string)
                .collect(),
        };
        for name in &docker.containers {
            let state =
                output(Command::new("docker").args(["inspect", "-f", "{{.State.Running}}", name]))?;
            if state.trim() != "true" {
                return Err(InfraError::Unavailable {
                    part: "docker",
                    reason: format!("container {name} is not running"),
                });
            }
        }
        Ok(docker)
    }

    /// The ssh side, checked to accept a login now.
    pub fn ssh(&self) -> Result<SshHost, InfraError> {
        self.part("ssh", "SSH")?;
        let host = SshHost {
            config: PathBuf::from(self.value("SSH_CONFIG")),
            host: self.value("SSH_HOST"),
            port: self.value("SSH_PORT").parse().unwrap_or(0),
        };
        output(
            Command::new("ssh")
                .arg("-F")
                .arg(&host.config)
                .args([&host.host, "true"]),
        )?;
        Ok(host)
    }

    /// The folder the bench makes its sandboxes in, mounted at the same path in the containers.
    pub fn sandboxes(&self) -> PathBuf {
        PathBuf::from(self.value("SANDBOXES"))
    }
}

/// A fresh `(TAG_VAR, value)` to put in one run's agent environment.
pub fn tag() -> (String, String) {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    (
        TAG_VAR.to_string(),
        format!("{}-{nanos:x}-{n}", std::process::id()),
    )
}

/// The `/proc` scan run inside a container: pid and command line of every process whose environment holds
/// the entry given as `$1` (an argument, so the scanning shell itself never carries it).
const SCAN: &str = r#"for d in /proc/[0-9]*; do
  if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF -e "$1"; then
    echo "${d#/proc/} $(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)"
  fi
done"#;

impl Docker {
    /// `pid command line` of each process in `container` whose environment holds `entry` (`NAME=VALUE`).
    pub fn processes_carrying(
        &self,
        container: &str,
        entry: &str,
    ) -> Result<Vec<String>, InfraError> {
        let out = output(
            Command::new("docker").args(["exec", container, "sh", "-c", SCAN, "sh", entry]),
        )?;
        Ok(out.lines().map(|l| l.trim_end().to_string()).collect())
    }

    /// Every process in `container` but its init and `sleep infinity` (and the listing itself): what a
    /// container used by one test alone must hold after a run.
    pub fn stray_processes(&self, container: &str) -> Result<Vec<String>, InfraError> {
        let out =
            output(Command::new("docker").args(["exec", container, "ps", "-eo", "pid=,args="]))?;
        Ok(out
            .lines()
            .map(str::trim)
            .filter(|l| {
                let args = l.split_once(' ').map_or("", |(_, a)| a.trim());
                !(args.starts_with("/sbin/docker-init")
                    || args == "sleep infinity"
                    || args.starts_with("ps -eo"))
            })
            .map(str::to_string)
            .collect())
    }
}

/// `pid command line` of each process on this machine whose environment holds `entry` (`NAME=VALUE`): the
/// local launcher clients and, for the ssh tests, the far side too.
pub fn local_processes_carrying(entry: &str) -> Vec<String> {
    let needle = entry.as_bytes();
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()) && n != me)
        })
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle))
        })
        .map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            format!(
                "{} {}",
                e.file_name().to_string_lossy(),
                String::from_utf8_lossy(&cmdline)
                    .replace('\0', " ")
                    .trim_end()
            )
        })
        .collect()
}

fn output(cmd: &mut Command) -> Result<String, InfraError> {
    let what = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| InfraError::Command {
        what: what.clone(),
        detail: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(InfraError::Command {
            what,
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The default bubblewrap sandbox, checked to be usable: a test through it fails here, naming
/// the fix, rather than later with a spawn error.
pub fn bwrap_launcher() -> agent_api::request::Launcher {
    let launcher = agent_api::request::Launcher::Sandbox(agent_api::request::Bwrap::new());
    launcher
        .check_available()
        .expect("bwrap is installed (tests/run.sh installs bubblewrap)");
    launcher
}
