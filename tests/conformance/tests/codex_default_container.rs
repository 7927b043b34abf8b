//! Codex in an ordinary container (issue 39): one with the engine's default seccomp profile, where
//! no process may make the user namespaces Codex's own bubblewrap sandbox needs, so every shell
//! command it runs fails. Where the launcher is the sandbox, `backend.codex.inner_sandbox = false`
//! turns Codex's own off and the command runs, the caller still deciding on it.
//!
//! Needs `tests/launchers/setup.sh` (its image) and the pinned Codex (`tests/run.sh` provides both).

mod remote;

use agent_api::{PermissionDecision, PermissionPolicy};
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
        .completed_items(agent_api::universal::ItemKind::ToolResult)
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
async fn in_a_default_container_codex_runs_commands_once_its_own_sandbox_is_off() {
    let Some((written, asked, output)) = shell(None).await else {
        return;
    };
    assert_eq!(
        written, None,
        "with its own sandbox on, the command cannot run here: {output}"
    );
    assert_eq!(asked, 1);
    let Some((written, asked, output)) = shell(Some(false)).await else {
        return;
    };
    assert_eq!(written.as_deref(), Some("hi\n"), "{output}");
    assert_eq!(asked, 1, "the caller still decides");
}
