//! Codex in an ordinary container (issues 39 and 53): one with the engine's default seccomp
//! profile, where no process may make the user namespaces Codex's own bubblewrap sandbox needs, so
//! every shell command it runs in that sandbox fails at once. Through a container launcher the
//! container is the sandbox: unless the caller keeps it (`backend.codex.inner_sandbox = true`),
//! Codex's own is off for a run that may write, so its commands run, the caller still deciding on
//! them, and a command that outlasts the run's timeout is stopped by it.
//!
//! Needs `tests/launchers/setup.sh` (its image) and the pinned Codex (`tests/run.sh` provides both).

mod remote;

use std::time::Duration;

use agent_api::universal::{ItemKind, UniversalEventBody};
use agent_api::{AgentError, PermissionDecision, PermissionPolicy};
use agent_api_codex::CodexOptions;
use agent_bench::Cli;
use remote::{backend, bench, drive, request, Fault, Place};

/// The shell scenario in a fresh default container: the file the command writes (if it ran),
/// whether the caller was asked, and the run's tool output.
async fn shell(inner_sandbox: Option<bool>) -> Option<(Option<String>, usize, String)> {
    let (_server, sandbox) = bench(Cli::Codex, "shell").await?;
    let place = Place::fresh_container(&sandbox);
    let mut options = CodexOptions::default();
    options.inner_sandbox = inner_sandbox;
    let request = request("run the command")
        .with_permissions(PermissionPolicy::Ask)
        .with_options(&options);
    let run = drive(
        &*backend(Cli::Codex, &sandbox, &place),
        &place,
        request,
        PermissionDecision::Allow,
        Fault::None,
    )
    .await;
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    let output = run
        .completed_items(ItemKind::ToolResult)
        .iter()
        .map(|i| format!("{:?}", i.content))
        .collect();
    place.assert_nothing_left("a shell run in a fresh container");
    Some((
        std::fs::read_to_string(sandbox.cwd.join("out.txt")).ok(),
        run.of_type("permission.resolved").count(),
        output,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_default_container_codex_runs_commands_without_its_own_sandbox_unless_kept() {
    let Some((written, asked, output)) = shell(None).await else {
        return;
    };
    assert_eq!(
        written.as_deref(),
        Some("hi\n"),
        "by default the container is the sandbox and the command runs: {output}"
    );
    assert!(
        output.contains("hi"),
        "the command's output arrives: {output}"
    );
    assert_eq!(asked, 1, "the caller still decides");
    let Some((written, asked, output)) = shell(Some(true)).await else {
        return;
    };
    assert_eq!(
        written, None,
        "with its own sandbox kept on, the command cannot run here: {output}"
    );
    assert_eq!(asked, 1);
}

/// `sleep 30` (the bench's `slow_shell`) in a fresh default container, on a warm session whose
/// turns time out after 5 s (each turn's clock starts with the turn, Codex already up): the command
/// starts and really runs (in Codex's own sandbox there it would fail at once, no command item, and
/// the turn complete), so the turn times out, typed, and once the session is closed nothing of it is
/// left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_default_container_a_command_longer_than_the_timeout_times_out() {
    let Some((_server, sandbox)) = bench(Cli::Codex, "slow_shell").await else {
        return;
    };
    let place = Place::fresh_container(&sandbox);
    let template = request("")
        .with_permissions(PermissionPolicy::ApproveAll)
        .with_timeout(Duration::from_secs(5))
        .with_launcher(place.launcher.clone());
    let backend = backend(Cli::Codex, &sandbox, &place);
    let mut session = backend
        .open_session(template)
        .await
        .unwrap_or_else(|e| panic!("the session opens: {e}"));
    let (events, completion) = session
        .send("wait")
        .await
        .unwrap_or_else(|e| panic!("the turn starts: {e}"))
        .collect_universal()
        .await;
    let started = events.iter().any(|e| match &e.body {
        UniversalEventBody::ItemStarted(started) => started
            .item
            .tool
            .as_ref()
            .and_then(|t| t.command.as_deref())
            .is_some_and(|c| c.contains("sleep 30")),
        _ => false,
    });
    let kinds: Vec<&str> = events.iter().map(|e| e.type_name()).collect();
    assert!(started, "the command started: {kinds:?}");
    assert!(
        matches!(completion, Err(AgentError::Timeout { .. })),
        "the command ran until the timeout: {completion:?}"
    );
    let _ = session.close().await;
    place.assert_nothing_left("a timed-out command in a fresh container");
}
