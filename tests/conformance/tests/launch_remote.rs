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
