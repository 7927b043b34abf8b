//! End to end with the real Claude Code CLI on the bench: a caller-defined tool served over MCP
//! (`--mcp-config FILE`), here, inside bubblewrap and in print mode. One test, so no other server of this process
//! starts meanwhile.

use std::time::Duration;

use agent_api::{PermissionPolicy, RunRequest};
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig, ClaudeCodeOptions, Mode};
use agent_api_conformance::caller_tools::{assert_gone_after_cancel, assert_round_trip};
use agent_bench::{Cli, ModelServer, Sandbox};

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

#[tokio::test]
async fn e2e_a_caller_tool_round_trips_and_its_server_is_gone_after_the_run_and_on_cancel() {
    if agent_bench::e2e_enabled_or_explain(Cli::ClaudeCode).is_none() {
        return;
    }
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::ClaudeCode, &server, "caller_tool").unwrap();
    let request = || {
        RunRequest::new("what is the forecast in Paris?")
            .with_timeout(Duration::from_secs(120))
            .with_permissions(PermissionPolicy::ApproveAll)
    };
    assert_round_trip(&backend(&sandbox), request()).await;
    assert_gone_after_cancel(&backend(&sandbox), request()).await;
    // In a sandbox, whose fresh /tmp hides the `--mcp-config` file unless the kit binds it in.
    assert_round_trip(
        &backend(&sandbox),
        request().with_launcher(agent_api_conformance::launchers::bwrap_launcher()),
    )
    .await;
    // Print mode cannot ask: a policy approving MCP tools pre-approves the caller tools' server.
    assert_round_trip(
        &backend(&sandbox),
        request().with_options(&ClaudeCodeOptions::default().mode(Mode::Print)),
    )
    .await;
}
