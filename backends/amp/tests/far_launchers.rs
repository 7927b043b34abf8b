//! Amp where this process cannot reach its files: through a prefix (`env`), `docker exec`
//! into a container of `tests/launchers/setup.sh`, and ssh to its sshd. The stand-in, the helper and
//! the script are copied to a fresh folder on the far side; the run's relay makes the run's
//! directory there and passes each delegated tool call back, so the caller decides it. After every
//! run (allowed, denied, allowed without asking, cancelled mid-turn, an error result, a timeout, the
//! connection killed mid-turn) no process of it is left on either side, the run's directory on the
//! far side is gone, its API key never showed on a command line, and an allowed or denied tool
//! call tells the same story, with the same final text, as the same run here.
//!
//! The docker and ssh cases need `tests/launchers/setup.sh` (run by `tests/run.sh`); without it they
//! fail saying so.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agent_api::request::{Container, Engine, Launcher, Ssh};
use agent_api::universal::{ItemKind, ItemStatus, PermissionStatus};
use agent_api::{AgentBackend, AgentError, PermissionDecision, PermissionPolicy, RunRequest};
use agent_api_amp::{AmpBackend, AmpConfig, AmpOptions};
use agent_api_conformance::launchers::{local_processes_carrying, tag, Docker, Infra};
use agent_api_conformance::{assert_conformant, record, record_answering, Answers, RunRecord};

/// Where the runs go, and the far folder holding the stand-in, the helper and the scripts.
struct FarPlace {
    launcher: Launcher,
    /// The folder on the far side (the same path here, for the prefix and ssh cases).
    dir: PathBuf,
    /// The runs' `TMPDIR` on the far side, where the relay makes the run's directory.
    tmp: PathBuf,
    container: Option<(Docker, String)>,
    tag: String,
    _local: tempfile::TempDir,
}

impl FarPlace {
    /// The far folder is `local`'s path; its `tmp` is the runs' `TMPDIR` there (so the relay's
    /// directories are this test's own to count).
    fn new(
        launcher: Launcher,
        container: Option<(Docker, String)>,
        local: tempfile::TempDir,
    ) -> FarPlace {
        let dir = local.path().to_path_buf();
        let tmp = dir.join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        for (from, name) in [
            (
                PathBuf::from(env!("CARGO_BIN_EXE_amp-stand-in")),
                "amp-stand-in",
            ),
            (
                PathBuf::from(env!("CARGO_BIN_EXE_amp-permission-delegate")),
                "amp-permission-delegate",
            ),
            (
                agent_bench::fixtures_dir().join("amp/shell.stdout.jsonl"),
                "shell.stdout.jsonl",
            ),
            (
                agent_bench::fixtures_dir().join("amp/text.stdout.jsonl"),
                "text.stdout.jsonl",
            ),
            (
                agent_bench::fixtures_dir().join("amp/error.stdout.jsonl"),
                "error.stdout.jsonl",
            ),
            (
                agent_bench::fixtures_dir().join("amp/multiturn.session.jsonl"),
                "multiturn.session.jsonl",
            ),
        ] {
            std::fs::copy(from, dir.join(name)).unwrap();
        }
        if let Some((_, name)) = &container {
            let target = format!("{name}:{}", dir.parent().unwrap().display());
            let copied = Command::new("docker")
                .args(["cp"])
                .arg(&dir)
                .arg(target)
                .status()
                .unwrap();
            assert!(copied.success(), "docker cp into {name}");
        }
        let (name, value) = tag();
        FarPlace {
            launcher,
            dir,
            tmp,
            container,
            tag: format!("{name}={value}"),
            _local: local,
        }
    }

    /// `env` as a prefix, on this machine.
    fn prefix() -> FarPlace {
        FarPlace::new(
            Launcher::Prefix(vec!["env".into()]),
            None,
            tempfile::tempdir().unwrap(),
        )
    }

    fn docker(index: usize) -> FarPlace {
        let docker = Infra::load()
            .and_then(|i| i.docker())
            .unwrap_or_else(|e| panic!("{e}"));
        let name = docker.containers[index].clone();
        let launcher = Launcher::Container(Container::exec(Engine::Docker, name.clone()));
        FarPlace::new(launcher, Some((docker, name)), tempfile::tempdir().unwrap())
    }

    fn ssh() -> FarPlace {
        let ssh = Infra::load()
            .and_then(|i| i.ssh())
            .unwrap_or_else(|e| panic!("{e}"));
        let mut settings = Ssh::new(ssh.host);
        settings.options = vec!["-F".into(), ssh.config.into_os_string()];
        FarPlace::new(Launcher::Ssh(settings), None, tempfile::tempdir().unwrap())
    }

    fn backend(&self, script: &str) -> AmpBackend {
        let (name, value) = self.tag.split_once('=').unwrap();
        AmpBackend::new(
            AmpConfig::default()
                .with_binary(self.dir.join("amp-stand-in"))
                .with_far_delegate_helper(self.dir.join("amp-permission-delegate"))
                .with_env("AMP_API_KEY", self.sentinel())
                .with_env(
                    "AMP_STAND_IN_SCRIPT",
                    self.dir.join(script).to_string_lossy(),
                )
                .with_env("TMPDIR", self.tmp.to_string_lossy())
                .with_env(name, value),
        )
    }

    /// The run's API key: a value that must never show on a command line on either side.
    fn sentinel(&self) -> String {
        format!("sk-sentinel-{}", self.tag.split_once('=').unwrap().1)
    }

    /// The command lines, here and on the far side, that show the sentinel.
    fn argv_showing_sentinel(&self) -> Vec<String> {
        let mut all = self.far_sh("ps -eo args=");
        if self.container.is_some() {
            all += &String::from_utf8_lossy(
                &Command::new("ps")
                    .args(["-eo", "args="])
                    .output()
                    .unwrap()
                    .stdout,
            );
        }
        all.lines()
            .filter(|l| l.contains(&self.sentinel()))
            .map(str::to_string)
            .collect()
    }

    /// SIGKILLs the local client (`docker exec`, `ssh`) of the run's agent, as a dropped connection would.
    fn kill_agents_client(&self) {
        let me = std::process::id().to_string();
        // Other tests' clients are children of this process too: only this place's stand-in counts.
        let agent = format!("{}/amp-stand-in", self.dir.display());
        let pids = self.sh_here("ps -eo pid=,ppid=,args=");
        let client = pids
            .lines()
            .filter_map(|l| {
                let mut words = l.split_whitespace();
                let (pid, ppid) = (words.next()?, words.next()?);
                (ppid == me && l.contains(&agent))
                    .then(|| pid.parse::<i32>().ok())
                    .flatten()
            })
            .next()
            .expect("the agent's local client is a child of this process");
        // SAFETY: kill has no memory preconditions; the pid is this process's own child.
        unsafe { libc::kill(client, libc::SIGKILL) };
    }

    /// The output of `sh -c script` on this machine.
    fn sh_here(&self, script: &str) -> String {
        String::from_utf8_lossy(
            &Command::new("sh")
                .args(["-c", script])
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned()
    }

    /// The same stand-in and script run here, without a launcher: the reference a far run is compared with.
    fn local_backend(&self, script: &str) -> AmpBackend {
        AmpBackend::new(
            AmpConfig::default()
                .with_binary(env!("CARGO_BIN_EXE_amp-stand-in"))
                .with_delegate_helper(env!("CARGO_BIN_EXE_amp-permission-delegate"))
                .with_env("AMP_API_KEY", "sk-test-key")
                .with_env(
                    "AMP_STAND_IN_SCRIPT",
                    agent_bench::fixtures_dir()
                        .join("amp")
                        .join(script)
                        .to_string_lossy(),
                ),
        )
    }

    fn request(&self, prompt: &str) -> RunRequest {
        RunRequest::new(prompt).with_launcher(self.launcher.clone())
    }

    /// The output of `sh -c script` on the far side.
    fn far_sh(&self, script: &str) -> String {
        let mut cmd = match &self.container {
            Some((_, name)) => {
                let mut cmd = Command::new("docker");
                cmd.args(["exec", name, "sh", "-c", script]);
                cmd
            }
            None => {
                let mut cmd = Command::new("sh");
                cmd.args(["-c", script]);
                cmd
            }
        };
        String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned()
    }

    /// The run directories in the far side's temporary directory.
    fn run_dirs(&self) -> BTreeSet<String> {
        let listing = self.far_sh(&format!(
            "ls -d {}/agent-api-amp-* 2>/dev/null",
            self.tmp.display()
        ));
        listing.lines().map(str::to_string).collect()
    }

    /// Processes of this place's runs: the agent and its children (by tag), and relays and helpers
    /// (by the far folder in their command line).
    fn left(&self) -> Vec<String> {
        let mut left = local_processes_carrying(&self.tag);
        if let Some((docker, name)) = &self.container {
            left.extend(docker.processes_carrying(name, &self.tag).unwrap());
        }
        let folder = self.dir.to_string_lossy().into_owned();
        left.extend(
            self.far_sh("ps -eo pid=,args=")
                .lines()
                .filter(|l| l.contains(&folder) && !l.contains("ps -eo"))
                .map(str::to_string),
        );
        left
    }

    /// Within 10 s: nothing of the run is left, and the far side holds the run directories it held before.
    fn assert_clean(&self, before: &BTreeSet<String>, after: &str) {
        let started = Instant::now();
        loop {
            let (left, dirs) = (self.left(), self.run_dirs());
            if left.is_empty() && &dirs == before {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "after {after} through {}: left {left:?}, run dirs {dirs:?}",
                self.launcher
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn resolutions(run: &RunRecord) -> Vec<(String, PermissionStatus)> {
    run.of_type("permission.resolved")
        .filter_map(|e| e.permission())
        .map(|p| (p.action.clone(), p.status))
        .collect()
}

fn tool_result(run: &RunRecord) -> ItemStatus {
    run.completed_items(ItemKind::ToolResult)
        .first()
        .map(|i| i.status)
        .expect("a tool result")
}

async fn the_caller_decides_and_nothing_is_left(place: FarPlace) {
    let before = place.run_dirs();
    for (decision, status, result) in [
        (
            PermissionDecision::Allow,
            PermissionStatus::Approved,
            ItemStatus::Completed,
        ),
        (
            PermissionDecision::Deny { message: None },
            PermissionStatus::Denied,
            ItemStatus::Failed,
        ),
    ] {
        let request = place
            .request("Run echo hello")
            .with_permissions(PermissionPolicy::Ask);
        let handle = place
            .backend("shell.stdout.jsonl")
            .run(request)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", place.launcher));
        let run = record_answering(handle, Answers::permissions(decision.clone())).await;
        assert_conformant(&run);
        assert!(run.completion.is_ok(), "{:?}", run.completion);
        assert_eq!(
            resolutions(&run),
            [("Bash: echo hello".to_string(), status)]
        );
        assert_eq!(tool_result(&run), result);
        assert_eq!(
            run.completion.as_ref().unwrap().launcher.as_deref(),
            Some(place.launcher.to_string().as_str())
        );
        place.assert_clean(&before, &format!("a {status:?} tool call"));
        let local = RunRequest::new("Run echo hello").with_permissions(PermissionPolicy::Ask);
        let here = record_answering(
            place
                .local_backend("shell.stdout.jsonl")
                .run(local)
                .await
                .unwrap(),
            Answers::permissions(decision),
        )
        .await;
        assert_eq!(
            run.story(),
            here.story(),
            "through {} the run tells another story than here",
            place.launcher
        );
        assert_eq!(
            run.completion.as_ref().unwrap().final_text,
            here.completion.as_ref().unwrap().final_text
        );
    }

    // Without delegation the relay only keeps the settings file.
    let allow_all = place
        .request("Run echo hello")
        .with_options(&AmpOptions::default().dangerously_allow_all(true));
    let run = record(
        place
            .backend("shell.stdout.jsonl")
            .run(allow_all)
            .await
            .unwrap(),
    )
    .await;
    assert_conformant(&run);
    assert_eq!(
        (
            run.of_type("permission.requested").count(),
            tool_result(&run)
        ),
        (0, ItemStatus::Completed)
    );
    place.assert_clean(&before, "a run that asked nothing");

    let (control, recorder) = hang(&place, place.request("Say hello")).await;
    let during = place.run_dirs();
    assert_eq!(
        during.difference(&before).count(),
        1,
        "the run's directory is in its TMPDIR there: {during:?}"
    );
    control.cancel();
    let run = recorder.await.unwrap();
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    place.assert_clean(&before, "a cancel mid-turn");
}

/// Starts the stand-in hanging mid-turn (after its first lines) with `request`'s settings; returns
/// the run's control and recorder once it hangs.
async fn hang(
    place: &FarPlace,
    request: RunRequest,
) -> (agent_api::RunControl, tokio::task::JoinHandle<RunRecord>) {
    let pidfile = place.dir.join(format!("hang-{}.pid", uuid_like()));
    let request = request
        .with_env("AMP_STAND_IN_HANG", "1")
        .with_env("AMP_STAND_IN_PIDFILE", pidfile.to_string_lossy());
    let handle = place
        .backend("text.stdout.jsonl")
        .run(request)
        .await
        .unwrap();
    let control = handle.control();
    let recorder = tokio::spawn(record(handle));
    let started = Instant::now();
    while place
        .far_sh(&format!("cat {} 2>/dev/null", pidfile.display()))
        .trim()
        .is_empty()
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the stand-in never hung"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (control, recorder)
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{nanos:x}")
}

/// An error result, a timeout and (docker, ssh) the connection killed mid-turn: each one typed
/// terminal error, no secret on a command line, nothing left on either side.
async fn faults_end_typed_and_leave_nothing(place: FarPlace) {
    let before = place.run_dirs();
    let failed = record(
        place
            .backend("error.stdout.jsonl")
            .run(place.request("x"))
            .await
            .unwrap(),
    )
    .await;
    assert_conformant(&failed);
    assert!(
        matches!(&failed.completion, Err(AgentError::AgentFailed { .. })),
        "{:?}",
        failed.completion
    );
    assert_eq!(
        failed
            .universal
            .iter()
            .filter(|e| e.is_terminal_error())
            .count(),
        1
    );
    place.assert_clean(&before, "an error result");

    let (_control, recorder) = hang(
        &place,
        place
            .request("Say hello")
            .with_timeout(Duration::from_secs(3)),
    )
    .await;
    assert_eq!(
        place.argv_showing_sentinel(),
        Vec::<String>::new(),
        "the API key shows on a command line"
    );
    let timed_out = recorder.await.unwrap();
    assert_conformant(&timed_out);
    assert!(
        matches!(timed_out.completion, Err(AgentError::Timeout { .. })),
        "{:?}",
        timed_out.completion
    );
    place.assert_clean(&before, "a timeout");

    if place.container.is_some() || matches!(place.launcher, Launcher::Ssh(_)) {
        // The timeout only bounds a test that went wrong: the kill ends the run long before.
        let (_control, recorder) = hang(
            &place,
            place
                .request("Say hello")
                .with_timeout(Duration::from_secs(60)),
        )
        .await;
        place.kill_agents_client();
        let cut = recorder.await.unwrap();
        assert_conformant(&cut);
        assert!(cut.completion.is_err(), "{:?}", cut.completion);
        assert_eq!(
            cut.universal
                .iter()
                .filter(|e| e.is_terminal_error())
                .count(),
            1
        );
        place.assert_clean(&before, "the connection killed mid-turn");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_prefix_faults_end_typed_and_leave_nothing() {
    faults_end_typed_and_leave_nothing(FarPlace::prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_container_faults_end_typed_and_leave_nothing() {
    faults_end_typed_and_leave_nothing(FarPlace::docker(4)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_prefix_the_relay_asks_the_caller_and_leaves_nothing() {
    the_caller_decides_and_nothing_is_left(FarPlace::prefix()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_container_the_relay_asks_the_caller_and_leaves_nothing() {
    the_caller_decides_and_nothing_is_left(FarPlace::docker(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_ssh_the_relay_asks_the_caller_and_leaves_nothing() {
    the_caller_decides_and_nothing_is_left(FarPlace::ssh()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_ssh_faults_end_typed_and_leave_nothing() {
    faults_end_typed_and_leave_nothing(FarPlace::ssh()).await;
}

/// A session through a far launcher: three turns on one live amp there, and its relay gone with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_through_a_prefix_takes_turns_on_one_live_process() {
    let place = FarPlace::prefix();
    let before = place.run_dirs();
    let mut session = place
        .backend("multiturn.session.jsonl")
        .open_session(place.request(""))
        .await
        .unwrap();
    let pid = session.process_id();
    assert!(pid.is_some());
    for (prompt, answer) in [
        ("What is 1+1?", "2."),
        ("And 2+2?", "4."),
        ("And 3+3?", "6."),
    ] {
        let turn = record(session.send(prompt).await.unwrap()).await;
        assert_eq!(
            turn.completion.as_ref().unwrap().final_text.as_deref(),
            Some(answer),
            "{prompt}"
        );
        assert_eq!(session.process_id(), pid, "one process for every turn");
    }
    assert_eq!(
        place.run_dirs().difference(&before).count(),
        1,
        "the session's directory is on the far side while it lives"
    );
    session.close().await.unwrap();
    place.assert_clean(&before, "a closed session");
}

/// A far side without the helper: one typed error before amp starts, naming what is missing.
#[tokio::test]
async fn a_far_side_without_the_helper_is_a_spawn_error_naming_it() {
    let place = FarPlace::prefix();
    let backend = AmpBackend::new(
        AmpConfig::default()
            .with_binary(place.dir.join("amp-stand-in"))
            .with_far_delegate_helper(Path::new("/nonexistent/amp-permission-delegate"))
            .with_env("AMP_API_KEY", "sk-test-key"),
    );
    let err = backend
        .run(place.request("hi"))
        .await
        .expect_err("no relay, no run");
    assert!(matches!(err, AgentError::Spawn { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("/nonexistent/amp-permission-delegate"),
        "{err}"
    );
    place.assert_clean(&place.run_dirs(), "a relay that never started");
}
