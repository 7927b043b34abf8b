//! End to end with the real Codex on the bench: a caller-defined tool served over MCP
//! (`-c mcp_servers.caller.*`, the secret in an environment variable). Codex defers MCP tools
//! behind its client-side `tool_search` (the bench model searches, then calls), and asks to
//! approve each MCP tool call with an elicitation, which the backend turns into a permission:
//! the approve-all policy approves it in the SDK on the app-server; in exec mode, which cannot
//! ask, the same policy pre-approves the run's MCP servers. Tests here take turns, since each
//! watches this process's listening sockets.

use std::time::Duration;

use agent_api::{PermissionPolicy, RunRequest};
use agent_api_codex::{CodexBackend, CodexConfig, CodexOptions, Mode};
use agent_api_conformance::caller_tools::{assert_gone_after_cancel, assert_round_trip};
use agent_bench::{Cli, ModelServer, Sandbox};

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn backend(sandbox: &Sandbox) -> CodexBackend {
    let overrides: Vec<String> = sandbox
        .base_args
        .windows(2)
        .filter(|w| w[0] == "-c")
        .map(|w| w[1].clone())
        .collect();
    let mut config = CodexConfig::with_binary(&sandbox.program)
        .config_overrides(overrides)
        .working_dir(&sandbox.cwd);
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    CodexBackend::new(config)
}

fn request() -> RunRequest {
    RunRequest::new("what is the forecast in Paris?")
        .with_timeout(Duration::from_secs(150))
        .with_permissions(PermissionPolicy::ApproveAll)
}

#[tokio::test]
async fn e2e_codex_calls_a_caller_tool_on_the_app_server_and_in_exec_and_its_server_is_gone_after_each_run(
) {
    if agent_bench::e2e_enabled_or_explain(Cli::Codex).is_none() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::Codex, &server, "caller_tool").unwrap();
    assert_round_trip(&backend(&sandbox), request()).await;
    assert_round_trip(
        &backend(&sandbox),
        request().with_options(&CodexOptions::default().mode(Mode::Exec)),
    )
    .await;
    assert_gone_after_cancel(&backend(&sandbox), request()).await;
}
