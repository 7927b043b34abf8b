//! Warm sessions (`spec/run-protocol.md` §8) end to end: the real, pinned Claude Code CLI on the
//! bench's scripted model server, several turns on one process.

use std::time::Duration;

use agent_api::RunRequest;
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_conformance::session::e2e;
use agent_bench::{Cli, ModelServer, Sandbox};

async fn bench(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(Cli::ClaudeCode, scenario).await
}

fn backend(sandbox: &Sandbox) -> ClaudeCodeBackend {
    let mut config = ClaudeCodeConfig::default()
        .with_binary(&sandbox.program)
        .with_inherit_env(false)
        .with_working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.with_env(key, value);
    }
    ClaudeCodeBackend::new(config)
}

fn template() -> RunRequest {
    RunRequest::new("").with_timeout(Duration::from_secs(120))
}

fn left(sandbox: &Sandbox) -> impl Fn() -> Vec<i32> + '_ {
    || agent_bench::process::processes_in(&sandbox.cwd)
}

#[tokio::test]
async fn e2e_session_three_turns_on_one_process_the_model_sees_one_two_three_user_turns() {
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
async fn e2e_session_killing_the_agent_between_turns_closes_the_session() {
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

#[tokio::test]
async fn e2e_session_snapshot_goes_on_in_an_empty_home_with_another_working_dir() {
    let Some((server, sandbox)) = bench("echo").await else {
        return;
    };
    let elsewhere = agent_bench::Sandbox::new(Cli::ClaudeCode, &server, "echo").unwrap();
    assert_ne!(sandbox.cwd, elsewhere.cwd);
    let snapshot = agent_api_conformance::snapshot::goes_on_in_an_empty_home(
        std::sync::Arc::new(backend(&sandbox)),
        std::sync::Arc::new(backend(&elsewhere)),
        template(),
        0,
    )
    .await;
    // Re-keyed: the session's file is under the other working directory's project.
    let key = agent_api_claude_code::snapshot::project_key(&elsewhere.cwd);
    let restored = elsewhere
        .home
        .join(".claude/projects")
        .join(key)
        .join(format!("{}.jsonl", snapshot.native_session_id));
    assert!(restored.is_file(), "{}", restored.display());
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
