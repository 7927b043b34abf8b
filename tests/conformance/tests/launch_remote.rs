//! End to end through the container (`docker exec`) and ssh launchers, with the real pinned Claude Code,
//! Codex, Gemini CLI and Qwen Code over ACP, and OpenCode (`opencode acp`), against the bench's model server on 127.0.0.1 (reached from the container over host networking):
//! text, a shell command allowed and denied by the caller, a 401 as one typed terminal error, cancel
//! mid-turn, timeout, the run dropped mid-stream, and the connection killed mid-stream (the local `docker`/`ssh` client SIGKILLed).
//! Every case ends with no process of the run left on this machine, in the container or on the ssh host
//! (the same machine here), and the API key, a sentinel, never shows on a command line on either side.
//! A text and a shell run through each launcher tell the same story as the same run here (`assert_same_as_local`).
//!
//! Needs `tests/launchers/setup.sh` (run by `tests/run.sh`); without it every test fails saying so.

mod remote;

use std::time::Duration;

use agent_api::universal::UniversalEventBody;
use agent_api::{AgentError, PermissionDecision, PermissionPolicy, RunRequest};
use agent_api_conformance::{assert_conformant, record_answering, Answers, RunRecord};
use agent_bench::Cli;
use futures::StreamExt;
use remote::{backend, bench, drive, is_auth, request, Fault, Place};

/// The same scenario run here, without a launcher, in a sandbox of its own.
async fn local_run(
    cli: Cli,
    scenario: &str,
    request: RunRequest,
    decision: PermissionDecision,
) -> RunRecord {
    let (_server, sandbox) = bench(cli, scenario)
        .await
        .expect("the bench ran the launcher's run");
    let here = Place::local();
    record_answering(
        backend(cli, &sandbox, &here)
            .run(request)
            .await
            .expect("run starts"),
        Answers::permissions(decision),
    )
    .await
}

/// A run through a launcher tells the same story as the run here ([`RunRecord::story`]) and ends the
/// same way (Ok, or the same error code); `same_text`: with the same final text too.
fn assert_same_as_local(far: &RunRecord, local: &RunRecord, same_text: bool) {
    assert_eq!(
        far.story(),
        local.story(),
        "the run through the launcher tells another story than the local one"
    );
    match (&far.completion, &local.completion) {
        (Ok(f), Ok(l)) if same_text => assert_eq!(f.final_text, l.final_text),
        (Ok(_), Ok(_)) => {}
        (f, l) => assert_eq!(
            f.as_ref().err().map(AgentError::code),
            l.as_ref().err().map(AgentError::code)
        ),
    }
}

async fn text(cli: Cli, place: Place) {
    let Some((_server, sandbox)) = bench(cli, "text").await else {
        return;
    };
    let run = drive(
        &*backend(cli, &sandbox, &place),
        &place,
        request("say hello"),
        PermissionDecision::Allow,
        Fault::None,
    )
    .await;
    assert_conformant(&run);
    assert_eq!(
        run.assistant_text(),
        "Hello from mock",
        "{:?}",
        run.completion
    );
    place.assert_nothing_left("a finished run");
    assert_same_as_local(
        &run,
        &local_run(cli, "text", request("say hello"), PermissionDecision::Allow).await,
        true,
    );
}

/// Issue 47 (sessions that outlive their machine): a session whose agent ran in one container,
/// its home inside that container only, goes on natively in a container started afterwards: the
/// snapshot is exported through the first container's launcher and imported through the new
/// one's, never through this machine's filesystem. Claude Code names its session's file; Codex,
/// Gemini CLI and Qwen Code find theirs by listing a folder of the far home (by date, by project).
/// The first run over ssh or in bubblewrap goes on the same way.
async fn snapshot_goes_on_in_a_fresh_container(cli: Cli, place: Place) {
    snapshot_goes_on_elsewhere(cli, place, false).await
}

/// What a CLI's first run needs in a home of its own (its settings, its `CODEX_HOME`), made with
/// `sh` where `place` runs its agent.
fn prepare_home(cli: Cli, sandbox: &agent_bench::Sandbox, place: &Place, home: &str) {
    let settings = |dir: &str| {
        format!(
            "mkdir -p {home}/{dir} && cp {}/{dir}/settings.json {home}/{dir}/",
            sandbox.home.display()
        )
    };
    let script = match cli {
        Cli::Codex => format!("mkdir -p {home}/.codex"),
        Cli::Gemini => settings(".gemini"),
        Cli::Qwen => settings(".qwen"),
        _ => format!("mkdir -p {home}"),
    };
    match place.container() {
        Some(_) => {
            in_container(place, &script);
        }
        // Over ssh and in bubblewrap the home is on this machine.
        None => {
            let done = std::process::Command::new("sh")
                .args(["-c", &script])
                .status()
                .unwrap();
            assert!(done.success(), "{script}");
        }
    }
}

/// The request of a run of `cli` with its home at `home` through `place`'s launcher.
fn in_home(cli: Cli, place: &Place, home: &str, prompt: &str) -> RunRequest {
    let mut request = request(prompt)
        .with_env("HOME", home)
        .with_launcher(place.launcher.clone());
    match cli {
        // The bench's sandbox names its own CODEX_HOME; this run's is in `home`.
        Cli::Codex => request = request.with_env("CODEX_HOME", format!("{home}/.codex")),
        // Gemini CLI 0.61.0's own ACP `session/load` resets the chat it loads (the crate's docs).
        Cli::Gemini => {
            request = request.with_options(
                &agent_api_gemini::GeminiOptions::default()
                    .interface(agent_api_gemini::GeminiInterface::Headless),
            )
        }
        _ => {}
    }
    request
}

/// Where `cli` keeps the session of `snapshot` restored into `home` for a run in `cwd`.
fn restored_file(
    cli: Cli,
    home: &str,
    cwd: &std::path::Path,
    snapshot: &agent_api::SessionSnapshot,
) -> String {
    let id = &snapshot.native_session_id;
    let dashed: String = cwd
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let name = snapshot.files[0].path.rsplit('/').next().unwrap();
    match cli {
        Cli::ClaudeCode => format!(
            "{home}/.claude/projects/{}/{id}.jsonl",
            agent_api_claude_code::snapshot::project_key(cwd)
        ),
        Cli::Codex => format!("{home}/.codex/{}", snapshot.files[0].path),
        Cli::Gemini => format!("{home}/.gemini/tmp/{dashed}/chats/{name}"),
        Cli::Qwen => format!("{home}/.qwen/projects/{dashed}/chats/{id}.jsonl"),
        other => panic!("no snapshot through a launcher for {other:?}"),
    }
}

/// [`snapshot_goes_on_in_a_fresh_container`], going on in a fresh container or (`over_ssh`) over ssh.
async fn snapshot_goes_on_elsewhere(cli: Cli, place: Place, over_ssh: bool) {
    let Some((_server, sandbox)) = bench(cli, "echo").await else {
        return;
    };
    // Qwen Code's environment message is a user turn of every conversation.
    let context = usize::from(cli == Cli::Qwen);
    let (fresh, _guard) = if over_ssh {
        (Place::ssh(), None)
    } else {
        let (fresh, guard) = Place::started_container(&sandbox);
        (fresh, Some(guard))
    };
    // A home no mount shares: it exists only where the agent runs.
    let home = format!("/root/agent-api-home-{}", place.sentinel);
    if matches!(place.launcher, agent_api::request::Launcher::Sandbox(_)) {
        // bubblewrap binds the agent's home: it must be there first.
        std::fs::create_dir_all(&home).unwrap();
    }
    let _remove = HomeGuard(home.clone(), place.container().map(str::to_string));
    let _remove_fresh = HomeGuard(home.clone(), fresh.container().map(str::to_string));
    prepare_home(cli, &sandbox, &place, &home);
    let first = backend(cli, &sandbox, &place);
    let run = drive(
        &*first,
        &place,
        in_home(cli, &place, &home, "My name is Ada"),
        PermissionDecision::Allow,
        Fault::None,
    )
    .await;
    assert!(
        run.assistant_text()
            .contains(&format!("user_turns={}", context + 1)),
        "{:?}",
        run.completion
    );
    let session = run.completion.unwrap().session.expect("the run's session");
    let snapshot = first
        .export_snapshot(&in_home(cli, &place, &home, ""), &session)
        .await
        .unwrap_or_else(|e| panic!("the snapshot through {}: {e}", place.launcher));
    assert!(snapshot.is_native(), "{:?}", snapshot.continuity);
    // In a container the home is there only; over ssh (this machine here) and in bubblewrap it
    // is on this machine's disk, under this machine's /root.
    let in_container = place.container().is_some();
    assert_eq!(
        std::path::Path::new(&home).exists(),
        !in_container,
        "where the first run's home is"
    );
    let bytes = snapshot.to_bytes().unwrap();

    if cli != Cli::ClaudeCode {
        prepare_home(cli, &sandbox, &fresh, &home);
    }
    let there = backend(cli, &sandbox, &fresh);
    let kind = there.info().kind.clone();
    let mut gateway = agent_api::Gateway::new();
    gateway.register(std::sync::Arc::from(there)).unwrap();
    let next = in_home(cli, &fresh, &home, "What is my name?")
        .with_snapshot(agent_api::SessionSnapshot::from_bytes(&bytes).unwrap());
    let (_, completion) = gateway
        .run(&kind, next)
        .await
        .unwrap_or_else(|e| panic!("the run from the snapshot: {e}"))
        .collect_wrapper()
        .await;
    let said = completion
        .unwrap_or_else(|e| panic!("the run from the snapshot: {e}"))
        .final_text
        .unwrap_or_default();
    assert!(
        said.contains(&format!("user_turns={}", context + 2)),
        "the session did not go on natively in the fresh container: {said}"
    );
    // Restored inside the fresh container, private.
    let restored = restored_file(cli, &home, &sandbox.cwd, &snapshot);
    let mode = match fresh.container() {
        Some(name) => {
            std::process::Command::new("docker")
                .args(["exec", name, "stat", "-c", "%a", &restored])
                .output()
                .unwrap()
                .stdout
        }
        // The ssh host is this machine.
        None => {
            std::process::Command::new("stat")
                .args(["-c", "%a", &restored])
                .output()
                .unwrap()
                .stdout
        }
    };
    assert_eq!(String::from_utf8_lossy(&mode).trim(), "600", "{restored}");
    place.assert_nothing_left("a snapshot's export");
    fresh.assert_nothing_left("a snapshot's import and the run from it");
}

/// Removes a home a snapshot test made, on this machine (over ssh, in bubblewrap) and in the
/// container it names, even when the test fails.
struct HomeGuard(String, Option<String>);

impl Drop for HomeGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        if let Some(container) = &self.1 {
            let _ = std::process::Command::new("docker")
                .args(["exec", container, "rm", "-rf", &self.0])
                .output();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_claude_snapshot_goes_on_in_a_fresh_container() {
    snapshot_goes_on_in_a_fresh_container(Cli::ClaudeCode, Place::docker(0)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_claude_snapshot_goes_on_in_a_fresh_container() {
    snapshot_goes_on_in_a_fresh_container(Cli::ClaudeCode, Place::ssh()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_claude_snapshot_goes_on_over_ssh() {
    snapshot_goes_on_elsewhere(Cli::ClaudeCode, Place::docker(0), true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bwrap_claude_snapshot_goes_on_in_a_fresh_container() {
    snapshot_goes_on_in_a_fresh_container(Cli::ClaudeCode, Place::bwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_codex_snapshot_goes_on_in_a_fresh_container() {
    snapshot_goes_on_in_a_fresh_container(Cli::Codex, Place::docker(1)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_codex_snapshot_goes_on_in_a_fresh_container() {
    snapshot_goes_on_in_a_fresh_container(Cli::Codex, Place::ssh()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_qwen_snapshot_goes_on_in_a_fresh_container() {
    snapshot_goes_on_in_a_fresh_container(Cli::Qwen, Place::docker(2)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_gemini_snapshot_goes_on_in_a_fresh_container() {
    snapshot_goes_on_in_a_fresh_container(Cli::Gemini, Place::docker(3)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_qwen_snapshot_goes_on_in_a_fresh_container() {
    snapshot_goes_on_in_a_fresh_container(Cli::Qwen, Place::ssh()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_gemini_snapshot_goes_on_over_ssh() {
    snapshot_goes_on_elsewhere(Cli::Gemini, Place::docker(4), true).await
}

/// Runs `script` with `sh -c` in `place`'s container.
fn in_container(place: &Place, script: &str) -> String {
    let out = std::process::Command::new("docker")
        .args(["exec", place.container().unwrap(), "sh", "-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A hostile agent's home on the far side: the session file a link out of the home, a file with a
/// second name, a folder on the way a link, a file over the bound. The export and the import through
/// the launcher refuse each as they do here (typed, as a way out), write nothing through the link,
/// and take no more than the bound across.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_snapshot_refuses_a_far_homes_links_and_bounds_its_files() {
    use agent_api::snapshot::SnapshotError;
    use agent_api::AgentBackend as _;
    let place = Place::docker(0);
    let home = format!("/root/agent-api-hostile-{}", place.sentinel);
    let dir = format!("{home}/.claude/projects/-w");
    let id = "0e4b5c52-3f7a-4c1e-9a57-1d2b3c4d5e6f";
    let file = format!("{dir}/{id}.jsonl");
    let _remove = HomeGuard(home.clone(), place.container().map(str::to_string));
    let request = RunRequest::new("")
        .with_env("HOME", &home)
        .with_working_dir("/w")
        .with_launcher(place.launcher.clone());
    let backend = agent_api_claude_code::ClaudeCodeBackend::new(
        agent_api_claude_code::ClaudeCodeConfig::default(),
    );
    let session = agent_api::request::SessionRef::native(id);
    let escape = |err: AgentError| match err {
        AgentError::Snapshot(SnapshotError::File { escape, .. }) => escape,
        other => panic!("not a refused file: {other}"),
    };

    let hostile = [
        (
            format!("mkdir -p {dir} && ln -s /etc/passwd {file}"),
            "a link out of the far home",
        ),
        (
            format!("rm {file} && echo secret > {home}/other && ln {home}/other {file}"),
            "a file with a second name",
        ),
    ];
    for (setup, what) in hostile {
        in_container(&place, &setup);
        let err = backend
            .export_snapshot(&request, &session)
            .await
            .unwrap_err();
        assert!(escape(err), "{what} is refused as a way out");
    }

    // One byte over the bound: nothing crosses, the snapshot says replay.
    let over = agent_api::snapshot::SNAPSHOT_FILES_BOUND + 1;
    in_container(
        &place,
        &format!("rm {file} && head -c {over} /dev/zero > {file}"),
    );
    let snapshot = backend.export_snapshot(&request, &session).await.unwrap();
    assert!(
        !snapshot.is_native() && snapshot.files.is_empty(),
        "{:?}",
        snapshot.continuity
    );

    // The import: a folder on the way is a link to elsewhere in the container.
    in_container(
        &place,
        &format!("rm -r {dir} && mkdir -p {home}/elsewhere && ln -s {home}/elsewhere {dir}"),
    );
    let mut good = agent_api::SessionSnapshot::new(agent_api_claude_code::KIND, id);
    good.files.push(agent_api::snapshot::SnapshotFile::new(
        "CLAUDE_CONFIG_DIR",
        format!("projects/-w/{id}.jsonl"),
        b"{}\n".to_vec(),
    ));
    let err = backend.import_snapshot(&request, &good).await.unwrap_err();
    assert!(
        escape(err),
        "a link on the way into the far home is refused as a way out"
    );
    assert_eq!(in_container(&place, &format!("ls -A {home}/elsewhere")), "");

    // Without the link the same snapshot is written there, private.
    in_container(&place, &format!("rm {dir}"));
    let report = backend.import_snapshot(&request, &good).await.unwrap();
    assert_eq!(report.written.len(), 1, "{report:?}");
    assert_eq!(
        in_container(&place, &format!("stat -c %a {file} && cat {file}")),
        "600\n{}\n"
    );
    place.assert_nothing_left("the snapshot's transfers");
}

/// Codex, Gemini CLI and Qwen Code find their session by listing a folder of the home (by date,
/// by project): through a Prefix launcher (`env`: the far scripts run on this machine, no
/// container needed) the listing, the reads and the import go through the launcher and take the
/// same files as without one; Gemini's chat is told from another with the same name prefix by its
/// first line, and its import makes the project's marker there.
#[tokio::test]
async fn a_backend_that_looks_through_its_home_lists_a_far_one() {
    use agent_api::AgentBackend as _;
    let id = "019a0b1c-2d3e-7f40-8a5b-6c7d8e9f0a1b";
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let write = |relative: &str, text: &str| {
        let path = h.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let rollout = format!("sessions/2026/11/28/rollout-2026-11-28T20-00-00-{id}.jsonl");
    write(
        &format!(".codex/{rollout}"),
        "{\"type\":\"session_meta\"}\n",
    );
    write(
        &format!(".codex/sessions/2026/11/28/rollout-x-{id}0.jsonl"),
        "not it\n",
    );
    let chat = format!("projects/-w/chats/{id}.jsonl");
    write(&format!(".qwen/{chat}"), "{\"cwd\":\"/w\"}\n");
    // Two chats named by the id's first characters: the first line says whose each is.
    let other = "tmp/-a/chats/session-2026-11-28T19-00-019a0b1c.jsonl";
    write(
        &format!(".gemini/{other}"),
        "{\"sessionId\":\"019a0b1c-other\"}\n",
    );
    let gemini_chat = "tmp/-b/chats/session-2026-11-28T20-00-019a0b1c.jsonl";
    write(
        &format!(".gemini/{gemini_chat}"),
        &format!("{{\"sessionId\":\"{id}\"}}\n"),
    );

    let local = RunRequest::new("")
        .with_env("HOME", h.to_str().unwrap())
        .with_env("CODEX_HOME", h.join(".codex").to_str().unwrap())
        .with_env("GEMINI_CLI_HOME", h.to_str().unwrap())
        .with_env("QWEN_RUNTIME_DIR", h.join(".qwen").to_str().unwrap())
        .with_working_dir("/w");
    let far = local
        .clone()
        .with_launcher(agent_api::request::Launcher::Prefix(vec!["env".into()]));
    let session = agent_api::request::SessionRef::native(id);
    let codex =
        agent_api_codex::CodexBackend::new(agent_api_codex::CodexConfig::with_binary("codex"));
    let gemini =
        agent_api_gemini::GeminiBackend::new(agent_api_acp::AcpConfig::with_binary("gemini"));
    let qwen = agent_api_qwen::QwenBackend::new(agent_api_acp::AcpConfig::with_binary("qwen"));
    let gemini_path = format!(".gemini/{gemini_chat}");
    let expected = [
        (&codex as &dyn agent_api::AgentBackend, rollout.as_str()),
        (&gemini, gemini_path.as_str()),
        (&qwen, chat.as_str()),
    ];
    for (backend, path) in expected {
        for request in [&local, &far] {
            let snapshot = backend
                .export_snapshot(request, &session)
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "{} through {:?}: {e}",
                        backend.info().kind,
                        request.launcher
                    )
                });
            assert!(snapshot.is_native(), "{:?}", snapshot.continuity);
            let paths: Vec<&str> = snapshot.files.iter().map(|f| f.path.as_str()).collect();
            assert_eq!(
                paths,
                [path],
                "{} through {:?}",
                backend.info().kind,
                request.launcher
            );
        }
    }

    // The Gemini chat imported into another home through the launcher: under the project its
    // marker gives the working directory, private.
    let snapshot = gemini.export_snapshot(&far, &session).await.unwrap();
    let there = tempfile::tempdir().unwrap();
    let t = there.path();
    let into = far
        .clone()
        .with_env("HOME", t.to_str().unwrap())
        .with_env("GEMINI_CLI_HOME", t.to_str().unwrap());
    let report = gemini.import_snapshot(&into, &snapshot).await.unwrap();
    assert_eq!(report.written.len(), 2, "{report:?}");
    let restored = t.join(".gemini/tmp/-w/chats/session-2026-11-28T20-00-019a0b1c.jsonl");
    let mode = |path: &std::path::Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    };
    assert_eq!(mode(&restored), 0o600);
    assert_eq!(
        std::fs::read_to_string(t.join(".gemini/tmp/-w/.project_root")).unwrap(),
        "/w"
    );
    // Imported again, the project is found by its marker: nothing new is written.
    let again = gemini.import_snapshot(&into, &snapshot).await.unwrap();
    assert!(again.written.is_empty(), "{again:?}");
}

/// A hostile far home for a backend that finds its session by listing a folder of the home:
/// a link in place of a date folder (Codex), the projects folder itself a link (Qwen Code), a
/// folder of more names than a listing takes. Each is refused typed (a link as a way out),
/// nothing read through the link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_snapshot_refuses_a_far_listing_through_links_or_past_its_bound() {
    use agent_api::snapshot::SnapshotError;
    use agent_api::AgentBackend as _;
    let place = Place::docker(0);
    let home = format!("/root/agent-api-listing-{}", place.sentinel);
    let _remove = HomeGuard(home.clone(), place.container().map(str::to_string));
    let id = "019a0b1c-2d3e-7f40-8a5b-6c7d8e9f0a1b";
    let session = agent_api::request::SessionRef::native(id);
    let request = RunRequest::new("")
        .with_env("HOME", &home)
        .with_working_dir("/w")
        .with_launcher(place.launcher.clone());
    let codex = agent_api_codex::CodexBackend::new(
        agent_api_codex::CodexConfig::with_binary("codex")
            .env("CODEX_HOME", format!("{home}/.codex")),
    );
    let qwen = agent_api_qwen::QwenBackend::new(agent_api_acp::AcpConfig::with_binary("qwen"));
    let refusal = |err: AgentError| match err {
        AgentError::Snapshot(SnapshotError::File { escape, reason, .. }) => (escape, reason),
        other => panic!("not a refused listing: {other}"),
    };

    // A date folder is a link to elsewhere in the container, the rollout behind it.
    let sessions = format!("{home}/.codex/sessions");
    in_container(
        &place,
        &format!(
            "mkdir -p {home}/elsewhere/11/28 {sessions} && touch {home}/elsewhere/11/28/rollout-2026-11-28T20-00-00-{id}.jsonl \
             && ln -s {home}/elsewhere {sessions}/2026"
        ),
    );
    let (escape, reason) = refusal(codex.export_snapshot(&request, &session).await.unwrap_err());
    assert!(escape, "a link in place of a folder is a way out: {reason}");

    // The projects folder itself is a link.
    in_container(
        &place,
        &format!("mkdir -p {home}/.qwen && ln -s {home}/elsewhere {home}/.qwen/projects"),
    );
    let (escape, reason) = refusal(qwen.export_snapshot(&request, &session).await.unwrap_err());
    assert!(escape, "a link on the way is a way out: {reason}");

    // More names than a listing takes.
    let over = agent_api::kit::snapshot::LISTED_BOUND + 1;
    in_container(
        &place,
        &format!(
            "rm {sessions}/2026 && mkdir -p {sessions}/2026/11/28 && cd {sessions}/2026/11/28 \
             && i=0 && while [ $i -lt {over} ]; do : > $i; i=$((i + 1)); done"
        ),
    );
    let (escape, reason) = refusal(codex.export_snapshot(&request, &session).await.unwrap_err());
    assert!(
        !escape && reason.contains("more than"),
        "too many names are refused: {reason}"
    );
    place.assert_nothing_left("the listings");
}

async fn shell(cli: Cli, place: Place, allow: bool) {
    let Some((_server, sandbox)) = bench(cli, "shell").await else {
        return;
    };
    let decision = if allow {
        PermissionDecision::Allow
    } else {
        PermissionDecision::Deny {
            message: Some("not today".into()),
        }
    };
    let request = request("run the command").with_permissions(PermissionPolicy::Ask);
    let run = drive(
        &*backend(cli, &sandbox, &place),
        &place,
        request,
        decision.clone(),
        Fault::None,
    )
    .await;
    assert_conformant(&run);
    assert_eq!(
        run.of_type("permission.resolved").count(),
        1,
        "{:?}",
        run.completion
    );
    let out = std::fs::read_to_string(sandbox.cwd.join("out.txt")).ok();
    let results: Vec<_> = run
        .completed_items(agent_api::universal::ItemKind::ToolResult)
        .iter()
        .map(|i| format!("{:?}", i.content))
        .collect();
    assert_eq!(
        out.as_deref(),
        if allow { Some("hi\n") } else { None },
        "tool results: {results:?}"
    );
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    place.assert_nothing_left("a shell run");
    let local = local_run(
        cli,
        "shell",
        remote::request("run the command").with_permissions(PermissionPolicy::Ask),
        decision,
    )
    .await;
    // The final text quotes the tool's output, which names process ids and timings.
    assert_same_as_local(&run, &local, false);
}

async fn unauthorized(cli: Cli, place: Place) {
    let Some((_server, sandbox)) = bench(cli, "error401").await else {
        return;
    };
    let run = drive(
        &*backend(cli, &sandbox, &place),
        &place,
        request("hello"),
        PermissionDecision::Allow,
        Fault::None,
    )
    .await;
    assert_conformant(&run);
    assert!(is_auth(cli, &run.completion), "{:?}", run.completion);
    place.assert_nothing_left("a 401");
}

async fn cancel(cli: Cli, place: Place) {
    let Some((_server, sandbox)) = bench(cli, "slow_text").await else {
        return;
    };
    let run = drive(
        &*backend(cli, &sandbox, &place),
        &place,
        request("talk slowly"),
        PermissionDecision::Allow,
        Fault::Cancel,
    )
    .await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    let after = run.time_after_first_delta();
    assert!(
        after < Duration::from_secs(20),
        "the run went on {after:?} after its cancel (slow_text streams 30 s)"
    );
    place.assert_nothing_left("cancel");
}

async fn timeout(cli: Cli, place: Place) {
    let Some((_server, sandbox)) = bench(cli, "slow_text").await else {
        return;
    };
    let request = request("talk slowly").with_timeout(Duration::from_secs(8));
    let run = drive(
        &*backend(cli, &sandbox, &place),
        &place,
        request,
        PermissionDecision::Allow,
        Fault::None,
    )
    .await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Timeout { .. })),
        "{:?}",
        run.completion
    );
    place.assert_nothing_left("a timeout");
}

async fn connection_killed(cli: Cli, place: Place) {
    let Some((_server, sandbox)) = bench(cli, "slow_text").await else {
        return;
    };
    let run = drive(
        &*backend(cli, &sandbox, &place),
        &place,
        request("talk slowly"),
        PermissionDecision::Allow,
        Fault::KillClient,
    )
    .await;
    assert_conformant(&run);
    assert!(
        run.completion.is_err(),
        "a run whose connection died completed: {:?}",
        run.completion
    );
    let after = run.time_after_first_delta();
    assert!(
        after < Duration::from_secs(20),
        "the run went on {after:?} after its connection died (slow_text streams 30 s)"
    );
    place.assert_nothing_left("the connection was killed");
}

async fn dropped(cli: Cli, place: Place) {
    let Some((_server, sandbox)) = bench(cli, "slow_text").await else {
        return;
    };
    let request = request("talk slowly").with_launcher(place.launcher.clone());
    let handle = backend(cli, &sandbox, &place)
        .run(request)
        .await
        .unwrap_or_else(|e| panic!("run starts: {e}"));
    let (mut events, completion) = handle.into_universal();
    while let Some(event) = events.next().await {
        if matches!(event.body, UniversalEventBody::ItemDelta(_)) && !event.synthetic {
            break;
        }
    }
    assert!(
        !place.left().is_empty(),
        "the agent should be running mid-stream"
    );
    drop((events, completion));
    place.assert_nothing_left("the run was dropped");
}

/// One test per case, CLI and place.
macro_rules! cases {
    ($($name:ident: $case:ident($cli:expr, $place:expr $(, $arg:expr)?);)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            $case($cli, $place $(, $arg)?).await
        }
    )*};
}

cases! {
    docker_claude_text: text(Cli::ClaudeCode, Place::docker(0));
    docker_claude_shell_allowed: shell(Cli::ClaudeCode, Place::docker(0), true);
    docker_claude_shell_denied: shell(Cli::ClaudeCode, Place::docker(0), false);
    docker_claude_401: unauthorized(Cli::ClaudeCode, Place::docker(0));
    docker_claude_cancel: cancel(Cli::ClaudeCode, Place::docker(0));
    docker_claude_timeout: timeout(Cli::ClaudeCode, Place::docker(0));
    docker_claude_connection_killed: connection_killed(Cli::ClaudeCode, Place::docker(0));
    docker_claude_dropped: dropped(Cli::ClaudeCode, Place::docker(0));
    docker_codex_text: text(Cli::Codex, Place::docker(1));
    docker_codex_shell_allowed: shell(Cli::Codex, Place::docker(1), true);
    docker_codex_shell_denied: shell(Cli::Codex, Place::docker(1), false);
    docker_codex_401: unauthorized(Cli::Codex, Place::docker(1));
    docker_codex_cancel: cancel(Cli::Codex, Place::docker(1));
    docker_codex_timeout: timeout(Cli::Codex, Place::docker(1));
    docker_codex_connection_killed: connection_killed(Cli::Codex, Place::docker(1));
    docker_codex_dropped: dropped(Cli::Codex, Place::docker(1));
    ssh_claude_text: text(Cli::ClaudeCode, Place::ssh());
    ssh_claude_shell_allowed: shell(Cli::ClaudeCode, Place::ssh(), true);
    ssh_claude_shell_denied: shell(Cli::ClaudeCode, Place::ssh(), false);
    ssh_claude_401: unauthorized(Cli::ClaudeCode, Place::ssh());
    ssh_claude_cancel: cancel(Cli::ClaudeCode, Place::ssh());
    ssh_claude_timeout: timeout(Cli::ClaudeCode, Place::ssh());
    ssh_claude_connection_killed: connection_killed(Cli::ClaudeCode, Place::ssh());
    ssh_claude_dropped: dropped(Cli::ClaudeCode, Place::ssh());
    ssh_codex_text: text(Cli::Codex, Place::ssh());
    ssh_codex_shell_allowed: shell(Cli::Codex, Place::ssh(), true);
    ssh_codex_shell_denied: shell(Cli::Codex, Place::ssh(), false);
    ssh_codex_401: unauthorized(Cli::Codex, Place::ssh());
    ssh_codex_cancel: cancel(Cli::Codex, Place::ssh());
    ssh_codex_timeout: timeout(Cli::Codex, Place::ssh());
    ssh_codex_connection_killed: connection_killed(Cli::Codex, Place::ssh());
    ssh_codex_dropped: dropped(Cli::Codex, Place::ssh());
    docker_gemini_text: text(Cli::Gemini, Place::docker(2));
    docker_gemini_shell_allowed: shell(Cli::Gemini, Place::docker(2), true);
    docker_gemini_shell_denied: shell(Cli::Gemini, Place::docker(2), false);
    docker_gemini_401: unauthorized(Cli::Gemini, Place::docker(2));
    docker_gemini_cancel: cancel(Cli::Gemini, Place::docker(2));
    docker_gemini_timeout: timeout(Cli::Gemini, Place::docker(2));
    docker_gemini_connection_killed: connection_killed(Cli::Gemini, Place::docker(2));
    docker_gemini_dropped: dropped(Cli::Gemini, Place::docker(2));
    docker_qwen_text: text(Cli::Qwen, Place::docker(3));
    docker_qwen_shell_allowed: shell(Cli::Qwen, Place::docker(3), true);
    docker_qwen_shell_denied: shell(Cli::Qwen, Place::docker(3), false);
    docker_qwen_401: unauthorized(Cli::Qwen, Place::docker(3));
    docker_qwen_cancel: cancel(Cli::Qwen, Place::docker(3));
    docker_qwen_timeout: timeout(Cli::Qwen, Place::docker(3));
    docker_qwen_connection_killed: connection_killed(Cli::Qwen, Place::docker(3));
    docker_qwen_dropped: dropped(Cli::Qwen, Place::docker(3));
    ssh_gemini_text: text(Cli::Gemini, Place::ssh());
    ssh_gemini_shell_allowed: shell(Cli::Gemini, Place::ssh(), true);
    ssh_gemini_shell_denied: shell(Cli::Gemini, Place::ssh(), false);
    ssh_gemini_401: unauthorized(Cli::Gemini, Place::ssh());
    ssh_gemini_cancel: cancel(Cli::Gemini, Place::ssh());
    ssh_gemini_timeout: timeout(Cli::Gemini, Place::ssh());
    ssh_gemini_connection_killed: connection_killed(Cli::Gemini, Place::ssh());
    ssh_gemini_dropped: dropped(Cli::Gemini, Place::ssh());
    ssh_qwen_text: text(Cli::Qwen, Place::ssh());
    ssh_qwen_shell_allowed: shell(Cli::Qwen, Place::ssh(), true);
    ssh_qwen_shell_denied: shell(Cli::Qwen, Place::ssh(), false);
    ssh_qwen_401: unauthorized(Cli::Qwen, Place::ssh());
    ssh_qwen_cancel: cancel(Cli::Qwen, Place::ssh());
    ssh_qwen_timeout: timeout(Cli::Qwen, Place::ssh());
    ssh_qwen_connection_killed: connection_killed(Cli::Qwen, Place::ssh());
    ssh_qwen_dropped: dropped(Cli::Qwen, Place::ssh());
    docker_opencode_text: text(Cli::OpenCode, Place::docker(4));
    docker_opencode_shell_allowed: shell(Cli::OpenCode, Place::docker(4), true);
    docker_opencode_shell_denied: shell(Cli::OpenCode, Place::docker(4), false);
    docker_opencode_401: unauthorized(Cli::OpenCode, Place::docker(4));
    docker_opencode_cancel: cancel(Cli::OpenCode, Place::docker(4));
    docker_opencode_timeout: timeout(Cli::OpenCode, Place::docker(4));
    docker_opencode_connection_killed: connection_killed(Cli::OpenCode, Place::docker(4));
    docker_opencode_dropped: dropped(Cli::OpenCode, Place::docker(4));
    ssh_opencode_text: text(Cli::OpenCode, Place::ssh());
    ssh_opencode_shell_allowed: shell(Cli::OpenCode, Place::ssh(), true);
    ssh_opencode_shell_denied: shell(Cli::OpenCode, Place::ssh(), false);
    ssh_opencode_401: unauthorized(Cli::OpenCode, Place::ssh());
    ssh_opencode_cancel: cancel(Cli::OpenCode, Place::ssh());
    ssh_opencode_timeout: timeout(Cli::OpenCode, Place::ssh());
    ssh_opencode_connection_killed: connection_killed(Cli::OpenCode, Place::ssh());
    ssh_opencode_dropped: dropped(Cli::OpenCode, Place::ssh());
    bwrap_opencode_text: text(Cli::OpenCode, Place::bwrap());
    bwrap_opencode_shell_allowed: shell(Cli::OpenCode, Place::bwrap(), true);
    bwrap_opencode_shell_denied: shell(Cli::OpenCode, Place::bwrap(), false);
    bwrap_opencode_401: unauthorized(Cli::OpenCode, Place::bwrap());
    bwrap_opencode_cancel: cancel(Cli::OpenCode, Place::bwrap());
    bwrap_opencode_timeout: timeout(Cli::OpenCode, Place::bwrap());
    bwrap_opencode_connection_killed: connection_killed(Cli::OpenCode, Place::bwrap());
    bwrap_opencode_dropped: dropped(Cli::OpenCode, Place::bwrap());
}
