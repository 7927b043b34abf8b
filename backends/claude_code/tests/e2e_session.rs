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
