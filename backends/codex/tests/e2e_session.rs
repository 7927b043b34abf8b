//! Warm sessions (`spec/run-protocol.md` §8) end to end: the real, pinned Codex CLI's app-server
//! on the bench's scripted model server, several turns on one thread and one process.

use std::time::Duration;

use agent_api::RunRequest;
use agent_api_codex::{CodexBackend, CodexConfig};
use agent_api_conformance::session::e2e;
use agent_bench::{Cli, ModelServer, Sandbox};

async fn bench(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(Cli::Codex, scenario).await
}

/// A backend running the sandbox's CLI with its environment and `-c` flags.
fn backend(sandbox: &Sandbox) -> CodexBackend {
    let mut overrides = Vec::new();
    let mut args = sandbox.base_args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-c" => overrides.extend(args.next().cloned()),
            "--disable" => {
                args.next(); // the backend's quiet flags already disable plugins
            }
            _ => {}
        }
    }
    let mut config = CodexConfig::with_binary(&sandbox.program)
        .config_overrides(overrides)
        .working_dir(&sandbox.cwd);
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    CodexBackend::new(config)
}

fn template() -> RunRequest {
    RunRequest::new("").with_timeout(Duration::from_secs(120))
}

fn left(sandbox: &Sandbox) -> impl Fn() -> Vec<i32> + '_ {
    || agent_bench::process::processes_in(&sandbox.cwd)
}

#[tokio::test]
async fn e2e_session_three_turns_on_one_app_server_the_model_sees_one_two_three_user_turns() {
    let Some((_server, sandbox)) = bench("echo").await else {
        return;
    };
    e2e::three_turns_on_one_process(&backend(&sandbox), template(), &left(&sandbox)).await;
}

#[tokio::test]
async fn e2e_session_a_cancelled_second_turn_then_a_good_third() {
    let Some((_server, sandbox)) = bench("echo").await else {
        return;
    };
    e2e::cancelled_second_turn_then_a_good_third(&backend(&sandbox), template(), &left(&sandbox))
        .await;
}

#[tokio::test]
async fn e2e_session_killing_the_app_server_between_turns_closes_the_session() {
    let Some((_server, sandbox)) = bench("echo").await else {
        return;
    };
    e2e::killed_between_turns(&backend(&sandbox), template(), &left(&sandbox)).await;
}

#[tokio::test]
async fn e2e_session_dropped_leaves_no_process() {
    let Some((_server, sandbox)) = bench("echo").await else {
        return;
    };
    e2e::dropped_leaves_no_process(&backend(&sandbox), template(), &left(&sandbox)).await;
}

#[tokio::test]
async fn e2e_session_opened_from_an_earlier_runs_native_session_sees_that_turn() {
    let Some((_server, sandbox)) = bench("echo").await else {
        return;
    };
    e2e::opened_from_an_earlier_run(&backend(&sandbox), template(), &left(&sandbox)).await;
}

/// A warm app-server session switches to plan mode and back between turns: the next
/// `turn/start` carries plan's read-only sandbox (the approved write is refused), then the
/// default's workspace-write sandbox and `untrusted` approvals (the file is written).
#[tokio::test]
async fn e2e_session_switches_to_plan_and_back() {
    let Some((_server, sandbox)) = bench("write_edit").await else {
        return;
    };
    let template = template().with_permissions(agent_api::PermissionPolicy::ApproveAll);
    e2e::switches_to_plan_and_back(&backend(&sandbox), template, &sandbox.cwd, &left(&sandbox))
        .await;
}

/// Codex itself holds plan mode once switched to: its own read-only sandbox refuses the write
/// and nothing is asked (approval policy `never`), where the SDK's policy alone would deny a
/// request Codex made; the model is told Codex's sandbox and approval policy of the turn.
#[tokio::test]
async fn e2e_session_switched_to_plan_codex_refuses_the_write_itself_and_asks_nothing() {
    use agent_api::universal::UniversalEventBody;
    use agent_api::AgentBackend;
    let Some((server, sandbox)) = bench("write_edit").await else {
        return;
    };
    let template = template().with_permissions(agent_api::PermissionPolicy::ApproveAll);
    let mut session = backend(&sandbox).open_session(template).await.unwrap();
    session
        .set_mode(agent_api::request::AgentMode::Plan)
        .await
        .unwrap();
    let mut record = agent_api_conformance::session::SessionRecord::default();
    assert!(
        record.turn(&mut session, "create the file").await.is_ok(),
        "{:?}",
        record.turns[0].completion
    );
    let asked = record.turns[0]
        .universal
        .iter()
        .filter(|e| matches!(e.body, UniversalEventBody::PermissionRequested(_)))
        .count();
    assert_eq!(asked, 0, "Codex asked in plan mode");
    assert!(
        !sandbox.cwd.join("created.txt").exists(),
        "the plan turn wrote the file"
    );
    let told = server
        .requests()
        .last()
        .map(|r| r.body.to_string())
        .unwrap_or_default();
    assert!(
        told.contains("`sandbox_mode` is `read-only`")
            && told.contains("Approval policy is currently never"),
        "the model was not told Codex's plan-mode policies"
    );
    record.trailing = session.close().await.unwrap();
}

/// A session's snapshot, taken after its first turn, goes on in another, empty `CODEX_HOME` and
/// working directory: a warm app-server session, and one-shot `exec` runs.
#[tokio::test]
async fn e2e_session_snapshot_goes_on_in_an_empty_home_on_app_server_and_exec() {
    let Some((server, _)) = bench("echo").await else {
        return;
    };
    let pair = || {
        (
            Sandbox::new(Cli::Codex, &server, "echo").unwrap(),
            Sandbox::new(Cli::Codex, &server, "echo").unwrap(),
        )
    };
    let (here, there) = pair();
    let snapshot = agent_api_conformance::snapshot::goes_on_in_an_empty_home(
        std::sync::Arc::new(backend(&here)),
        std::sync::Arc::new(backend(&there)),
        template(),
        0,
    )
    .await;
    assert!(snapshot.files[0].path.starts_with("sessions/"));
    let (here, there) = pair();
    let exec = template()
        .with_options(&agent_api_codex::CodexOptions::default().mode(agent_api_codex::Mode::Exec));
    agent_api_conformance::snapshot::a_run_goes_on_in_an_empty_home(
        std::sync::Arc::new(backend(&here)),
        std::sync::Arc::new(backend(&there)),
        exec,
        0,
    )
    .await;
}

fn approving(request: RunRequest) -> RunRequest {
    request.with_permissions(agent_api::PermissionPolicy::ApproveAll)
}

#[tokio::test]
async fn e2e_steer_a_turn_mid_command_reaches_the_model_in_the_same_turn_and_late_steer_is_typed() {
    let Some((server, sandbox)) = bench("steer").await else {
        return;
    };
    let took = agent_api_conformance::steer::steered_turn_reads_the_message_in_the_same_turn(
        &backend(&sandbox),
        approving(template()),
        &server,
        &left(&sandbox),
    )
    .await;
    eprintln!("steer to acknowledgement: {took:?}");
}

#[tokio::test]
async fn e2e_steer_then_cancel_leaves_no_process() {
    let Some((_server, sandbox)) = bench("steer").await else {
        return;
    };
    let request = approving(
        RunRequest::new(agent_api_conformance::steer::PROMPT)
            .with_timeout(Duration::from_secs(120)),
    );
    agent_api_conformance::steer::steered_run_cancelled_leaves_no_process(
        &backend(&sandbox),
        request,
        &left(&sandbox),
    )
    .await;
}

#[tokio::test]
async fn e2e_steer_at_the_last_step_keeps_the_session_in_step() {
    let Some((_server, sandbox)) = bench("steer").await else {
        return;
    };
    agent_api_conformance::steer::steered_at_the_answer_the_session_stays_in_step(
        &backend(&sandbox),
        approving(template()),
        &left(&sandbox),
    )
    .await;
}
