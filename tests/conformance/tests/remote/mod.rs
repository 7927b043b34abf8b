//! What the container, ssh and bwrap end-to-end tests share: a place to run (a container of
//! `tests/launchers/setup.sh`, its sshd, or bubblewrap here), the real CLIs' backends pointed at the bench through it, the
//! fault drivers, and the checks that nothing is left and no secret showed on a command line.

#![allow(dead_code, unreachable_pub)]

use std::time::{Duration, Instant};

use agent_api::request::{Container, Engine, Launcher, Ssh};
use agent_api::universal::UniversalEventBody;
use agent_api::UniversalEvent;
use agent_api::{AgentBackend, AgentError, PermissionDecision, RunRequest};
use agent_api_acp::AcpConfig;
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_codex::{CodexBackend, CodexConfig};
use agent_api_conformance::launchers::{local_processes_carrying, tag, Docker, Infra};
use agent_api_conformance::RunRecord;
use agent_api_gemini::GeminiBackend;
use agent_api_opencode::{Interface, OpenCodeBackend, OpenCodeConfig};
use agent_api_qwen::QwenBackend;
use agent_bench::{Cli, ModelServer, Sandbox};
use futures::StreamExt;

/// Where a test runs its agent, and the tag its agent's processes carry.
pub struct Place {
    pub launcher: Launcher,
    docker: Option<(Docker, String)>,
    pub tag: String,
    /// A fresh secret put in the agent's API key variable; it must never show on a command line.
    pub sentinel: String,
}

impl Place {
    /// Container `agent-api-test-<index>` through `docker exec`.
    pub fn docker(index: usize) -> Place {
        let docker = Infra::load()
            .and_then(|i| i.docker())
            .unwrap_or_else(|e| panic!("{e}"));
        let name = docker.containers[index].clone();
        let launcher = Launcher::Container(Container::exec(Engine::Docker, name.clone()));
        Place::new(launcher, Some((docker, name)))
    }

    /// A fresh container of the setup script's image (`docker run --rm -i`) with the engine's
    /// default settings (its default seccomp profile: no user namespaces), as an ordinary
    /// container is; it sees `sandbox`'s CLI, its folders and node where the setup's containers do.
    pub fn fresh_container(sandbox: &Sandbox) -> Place {
        let docker = Infra::load()
            .and_then(|i| i.docker())
            .unwrap_or_else(|e| panic!("{e}"));
        let cli_root = sandbox
            .program
            .ancestors()
            .nth(3)
            .expect("the CLI sits in <root>/node_modules/.bin")
            .to_path_buf();
        let root = sandbox
            .home
            .parent()
            .expect("the sandbox's folders share a root")
            .to_path_buf();
        let node = std::fs::canonicalize(
            agent_api::kit::files::resolve_program(std::path::Path::new("node"))
                .expect("node on PATH"),
        )
        .unwrap();
        let mut container = Container::image(Engine::Docker, docker.image)
            .with_mount(&cli_root, &cli_root, true)
            .with_mount(node, "/usr/bin/node", true)
            .with_mount(&root, &root, false);
        container.extra_args = ["--init", "--network", "host"].map(Into::into).to_vec();
        Place::new(Launcher::Container(container), None)
    }

    /// A container started now from the setup script's image (`docker run -d`, removed when the
    /// returned guard drops), reached through `docker exec`: a machine that has never seen a run,
    /// which sees `sandbox`'s CLI, its folders and node where the setup's containers do.
    pub fn started_container(sandbox: &Sandbox) -> (Place, ContainerGuard) {
        let docker = Infra::load()
            .and_then(|i| i.docker())
            .unwrap_or_else(|e| panic!("{e}"));
        let Launcher::Container(image) = Place::fresh_container(sandbox).launcher else {
            unreachable!("fresh_container is a container")
        };
        let (_, value) = tag();
        let name = format!("agent-api-fresh-{value}");
        let mut args: Vec<std::ffi::OsString> = ["run", "-d", "--rm", "--name", &name]
            .map(Into::into)
            .to_vec();
        for mount in &image.mounts {
            let mut spec = mount.host.clone().into_os_string();
            spec.push(":");
            spec.push(&mount.container);
            if mount.read_only {
                spec.push(":ro");
            }
            args.extend(["-v".into(), spec]);
        }
        args.extend(image.extra_args.iter().cloned());
        args.extend([
            docker.image.clone().into(),
            "sleep".into(),
            "infinity".into(),
        ]);
        let started = std::process::Command::new("docker")
            .args(&args)
            .output()
            .expect("docker runs");
        assert!(
            started.status.success(),
            "docker run: {}",
            String::from_utf8_lossy(&started.stderr)
        );
        let launcher = Launcher::Container(Container::exec(Engine::Docker, name.clone()));
        let guard = ContainerGuard(name.clone());
        (Place::new(launcher, Some((docker, name))), guard)
    }

    /// The name of the container this place runs in, for a place in a container.
    pub fn container(&self) -> Option<&str> {
        self.docker.as_ref().map(|(_, name)| name.as_str())
    }

    /// The setup script's sshd, through its own client config.
    pub fn ssh() -> Place {
        let ssh = Infra::load()
            .and_then(|i| i.ssh())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut settings = Ssh::new(ssh.host);
        settings.options = vec!["-F".into(), ssh.config.into_os_string()];
        Place::new(Launcher::Ssh(settings), None)
    }

    /// Bubblewrap on this machine (its defaults: the filesystem read-only but the run's directory and
    /// home); "the connection" is the `bwrap` process itself.
    pub fn bwrap() -> Place {
        Place::new(agent_api_conformance::launchers::bwrap_launcher(), None)
    }

    /// This machine, no launcher: the reference a far run is compared with.
    pub fn local() -> Place {
        Place::new(Launcher::Local, None)
    }

    fn new(launcher: Launcher, docker: Option<(Docker, String)>) -> Place {
        let (name, value) = tag();
        Place {
            launcher,
            docker,
            tag: format!("{name}={value}"),
            sentinel: format!("sk-sentinel-{value}"),
        }
    }

    /// The agent's environment for `sandbox`: its own, the tag, and the sentinel as the API key.
    fn env(&self, sandbox: &Sandbox) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = sandbox
            .env
            .iter()
            .map(|(k, v)| {
                if k.ends_with("_API_KEY") {
                    (k.clone(), self.sentinel.clone())
                } else {
                    (k.clone(), v.clone())
                }
            })
            .collect();
        let (name, value) = self.tag.split_once('=').unwrap();
        env.push((name.into(), value.into()));
        env
    }

    /// Every process (on this machine, containers included, and inside the container through `docker
    /// exec`) carrying this place's tag.
    pub fn left(&self) -> Vec<String> {
        let mut left = local_processes_carrying(&self.tag);
        if let Some((docker, name)) = &self.docker {
            left.extend(
                docker
                    .processes_carrying(name, &self.tag)
                    .unwrap()
                    .into_iter()
                    .map(|p| format!("in {name}: {p}")),
            );
        }
        left
    }

    /// Waits up to 10 s for no process to carry the tag, else fails listing them.
    pub fn assert_nothing_left(&self, after: &str) {
        let start = Instant::now();
        let mut left = self.left();
        while !left.is_empty() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(200));
            left = self.left();
        }
        assert!(
            left.is_empty(),
            "processes left after {after} through {}: {left:?}",
            self.launcher
        );
    }

    /// The command lines, here and in the container, that show the sentinel.
    pub fn argv_showing_sentinel(&self) -> Vec<String> {
        let mut all = ps_args(std::process::Command::new("ps").args(["-eo", "args="]));
        if let Some((_, name)) = &self.docker {
            all.extend(ps_args(
                std::process::Command::new("docker").args(["exec", name, "ps", "-eo", "args="]),
            ));
        }
        all.into_iter()
            .filter(|a| a.contains(&self.sentinel))
            .collect()
    }

    /// Whether a process of the run holds the sentinel in its environment (it reached the agent).
    pub fn agent_has_sentinel(&self) -> bool {
        local_processes_carrying(&self.tag).iter().any(|p| {
            let pid = p.split_whitespace().next().unwrap_or_default();
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|var| var.ends_with(self.sentinel.as_bytes()) && var.contains(&b'='))
            })
        })
    }

    /// Kills with SIGKILL the local client (`docker exec` or `ssh`) of this place's run, as a dropped
    /// connection would; returns its pid.
    pub fn kill_client(&self) -> i32 {
        let me = std::process::id() as i32;
        let marker = self
            .run_marker()
            .expect("a far process of the run carries the run marker");
        let entry = format!("{}={marker}", agent_api::kit::process::RUN_MARKER_VAR);
        let client = local_processes_carrying(&entry)
            .into_iter()
            .filter_map(|p| p.split_whitespace().next()?.parse::<i32>().ok())
            .find(|pid| parent_of(*pid) == Some(me))
            .expect("the local client is a child of this process");
        // SAFETY: kill has no memory preconditions; the pid is this process's own child.
        unsafe { libc::kill(client, libc::SIGKILL) };
        client
    }

    /// The run marker the far side's processes carry.
    fn run_marker(&self) -> Option<String> {
        let name = format!("{}=", agent_api::kit::process::RUN_MARKER_VAR);
        local_processes_carrying(&self.tag).iter().find_map(|p| {
            let pid = p.split_whitespace().next()?;
            let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            env.split(|b| *b == 0).find_map(|var| {
                var.strip_prefix(name.as_bytes())
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            })
        })
    }
}

/// Removes a container [`Place::started_container`] started.
pub struct ContainerGuard(String);

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &self.0])
            .output();
    }
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn ps_args(cmd: &mut std::process::Command) -> Vec<String> {
    let out = cmd.output().expect("ps runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The bench for `cli` and `scenario`, or `None` when the CLI is missing and skipping was asked for.
pub async fn bench(cli: Cli, scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(cli, scenario).await
}

/// A backend for the sandbox's CLI whose agent gets exactly `place`'s environment for it.
pub fn backend(cli: Cli, sandbox: &Sandbox, place: &Place) -> Box<dyn AgentBackend> {
    let env = place.env(sandbox);
    match cli {
        Cli::ClaudeCode => {
            let mut config = ClaudeCodeConfig::default()
                .with_binary(&sandbox.program)
                .with_inherit_env(false)
                .with_working_dir(&sandbox.cwd);
            for (k, v) in &env {
                config = config.with_env(k, v);
            }
            Box::new(ClaudeCodeBackend::new(config))
        }
        Cli::Codex => {
            let overrides: Vec<String> = sandbox
                .base_args
                .windows(2)
                .filter(|w| w[0] == "-c")
                .map(|w| w[1].clone())
                .collect();
            let mut config = CodexConfig::with_binary(&sandbox.program)
                .config_overrides(overrides)
                .working_dir(&sandbox.cwd);
            for (k, v) in &env {
                config = config.env(k, v);
            }
            Box::new(CodexBackend::new(config))
        }
        Cli::Gemini | Cli::Qwen => {
            let mut config = AcpConfig::with_binary(&sandbox.program).working_dir(&sandbox.cwd);
            if cli == Cli::Gemini {
                // The bench serves this model; the ACP backend adds `--acp --skip-trust` itself.
                config = config.args(["-m", agent_bench::sandbox::GEMINI_MODEL]);
            }
            for (k, v) in &env {
                config = config.env(k, v);
            }
            if cli == Cli::Gemini {
                Box::new(GeminiBackend::new(config))
            } else {
                Box::new(QwenBackend::new(config))
            }
        }
        Cli::OpenCode => {
            // `opencode acp`: it streams deltas and asks for each tool (`opencode run` prints whole
            // parts and asks nothing); the serve interface takes no launcher.
            let mut config =
                OpenCodeConfig::with_binary(&sandbox.program).default_interface(Interface::Acp);
            for (k, v) in &env {
                config = config.env(k, v);
            }
            // The bench's key is inside `OPENCODE_CONFIG_CONTENT`; a provider key variable carries the sentinel.
            config = config.env("OPENAI_API_KEY", &place.sentinel);
            config.working_dir = Some(sandbox.cwd.clone());
            Box::new(OpenCodeBackend::new(config))
        }
        other => panic!("no remote backend for {other:?}"),
    }
}

/// What a driver does on each event.
pub enum Fault {
    /// Nothing: the run ends by itself.
    None,
    /// `cancel()` at the first assistant delta.
    Cancel,
    /// Kill the local client at the first assistant delta (checking argv for the sentinel first).
    KillClient,
}

/// Runs `request` through `place`, answering permissions with `decision` and injecting `fault`.
pub async fn drive(
    backend: &dyn AgentBackend,
    place: &Place,
    request: RunRequest,
    decision: PermissionDecision,
    fault: Fault,
) -> RunRecord {
    let handle = backend
        .run(request.with_launcher(place.launcher.clone()))
        .await
        .unwrap_or_else(|e| panic!("run starts: {e}"));
    let control = handle.control();
    let mut projector = agent_api::kit::projection::Projector::new(
        handle.agent_kind().clone(),
        handle.tools_structured(),
    );
    let (mut events, completion) = handle.into_universal();
    let mut universal: Vec<UniversalEvent> = Vec::new();
    let mut faulted = false;
    while let Some(event) = events.next().await {
        match &event.body {
            UniversalEventBody::PermissionRequested(p) => control
                .respond_permission(&p.permission_id, decision.clone())
                .await
                .unwrap(),
            UniversalEventBody::ItemDelta(_) if !faulted && !event.synthetic => {
                faulted = true;
                match fault {
                    Fault::None => {}
                    Fault::Cancel => control.cancel(),
                    Fault::KillClient => {
                        assert_eq!(
                            place.argv_showing_sentinel(),
                            Vec::<String>::new(),
                            "the secret shows on a command line"
                        );
                        assert!(
                            place.agent_has_sentinel(),
                            "the secret did not reach the agent"
                        );
                        place.kill_client();
                    }
                }
            }
            _ => {}
        }
        universal.push(event);
    }
    let wrapper = universal
        .iter()
        .flat_map(|e| projector.project(e))
        .collect();
    RunRecord {
        universal,
        wrapper,
        completion: completion.await,
        tools_structured: true,
    }
}

/// The request every test sends (two minutes unless a test times out sooner).
pub fn request(prompt: &str) -> RunRequest {
    RunRequest::new(prompt).with_timeout(Duration::from_secs(120))
}

/// Whether `completion` is `cli`'s authentication failure: the typed auth error, except for
/// OpenCode over ACP, whose protocol drops the model's HTTP status (`agent_failed` naming the key).
pub fn is_auth(cli: Cli, completion: &Result<agent_api::RunCompletion, AgentError>) -> bool {
    match completion {
        Err(AgentError::Auth { .. }) => true,
        Err(AgentError::AgentFailed { message }) => {
            cli == Cli::OpenCode && message.contains("Incorrect API key")
        }
        _ => false,
    }
}
