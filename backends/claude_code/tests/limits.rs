//! Limits with the real, pinned Claude Code CLI on the bench: a max-turns and a max-cost limit end
//! the run with a typed `LimitReached` (the CLI's own `--max-turns` and `--max-budget-usd`, and the
//! SDK's check of the reported usage). A missing CLI fails with install instructions unless
//! AGENT_API_E2E=skip.

use std::time::Duration;

use agent_api::run::LimitKind;
use agent_api::{AgentBackend, AgentError, PermissionPolicy, RunRequest};
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use agent_bench::Cli;

async fn run(scenario: &str, request: RunRequest) -> Option<RunRecord> {
    let (_server, sandbox) = agent_bench::e2e_bench_or_explain(Cli::ClaudeCode, scenario).await?;
    let mut config = ClaudeCodeConfig::default()
        .with_binary(&sandbox.program)
        .with_inherit_env(false)
        .with_working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.with_env(key, value);
    }
    let request = request
        .with_timeout(Duration::from_secs(120))
        .with_permissions(PermissionPolicy::ApproveAll);
    let run = record(ClaudeCodeBackend::new(config).run(request).await.unwrap()).await;
    assert_conformant(&run);
    Some(run)
}

#[tokio::test]
async fn e2e_a_max_turns_limit_ends_a_tool_run_with_limit_reached() {
    // `shell` needs two model turns: the tool call, then the answer.
    let Some(run) = run("shell", RunRequest::new("run it").with_max_turns(1)).await else {
        return;
    };
    assert!(
        matches!(
            run.completion,
            Err(AgentError::LimitReached {
                limit: LimitKind::Turns
            })
        ),
        "{:?}",
        run.completion
    );
    assert_eq!(run.universal.last().unwrap().type_name(), "session.ended");
}

#[tokio::test]
async fn e2e_a_max_cost_limit_ends_the_run_with_limit_reached_and_usage_is_normalised() {
    let Some(unlimited) = run("text", RunRequest::new("hello")).await else {
        return;
    };
    let usage = unlimited
        .completion
        .as_ref()
        .unwrap()
        .usage
        .clone()
        .unwrap();
    assert!(usage.cost_usd.is_some_and(|c| c > 0.0), "{usage:?}");
    assert!(
        usage.input_tokens.is_some() && usage.output_tokens.is_some() && usage.turns == Some(1),
        "{usage:?}"
    );
    let Some(run) = run("text", RunRequest::new("hello").with_max_cost_usd(1e-9)).await else {
        return;
    };
    assert!(
        matches!(
            run.completion,
            Err(AgentError::LimitReached {
                limit: LimitKind::CostUsd
            })
        ),
        "{:?}",
        run.completion
    );
}
