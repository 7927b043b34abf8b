//! End to end with the real Gemini CLI and Qwen Code on the bench: a caller-defined tool served
//! over MCP (ACP `session/new` `mcpServers`, the secret in its headers; Qwen's two-way
//! stream-json through `--mcp-config`, where a streamable HTTP server is an `httpUrl`). Qwen
//! defers MCP tools behind its `tool_search`: the bench model searches, then calls. Tests here
//! take turns, since each watches this process's listening sockets.

use std::time::Duration;

use agent_api::{PermissionPolicy, RunRequest};
use agent_api_acp::AcpConfig;
use agent_api_conformance::caller_tools::{assert_gone_after_cancel, assert_round_trip};
use agent_api_gemini::GeminiBackend;
use agent_api_qwen::QwenBackend;
use agent_api_qwen::{QwenInterface, QwenOptions};
use agent_bench::{Cli, ModelServer, Sandbox};

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn check<B: agent_api::AgentBackend>(
    cli: Cli,
    make: fn(AcpConfig) -> B,
    options: fn(RunRequest) -> RunRequest,
) {
    if agent_bench::e2e_enabled_or_explain(cli).is_none() {
        return;
    }
    let _turn = ONE_AT_A_TIME.lock().await;
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(cli, &server, "caller_tool").unwrap();
    let backend = || {
        let mut config = AcpConfig::with_binary(&sandbox.program).working_dir(&sandbox.cwd);
        for (k, v) in &sandbox.env {
            config = config.env(k, v);
        }
        make(config)
    };
    let request = || {
        options(
            RunRequest::new("what is the forecast in Paris?")
                .with_timeout(Duration::from_secs(150))
                .with_permissions(PermissionPolicy::ApproveAll),
        )
    };
    assert_round_trip(&backend(), request()).await;
    assert_gone_after_cancel(&backend(), request()).await;
}

#[tokio::test]
async fn e2e_gemini_calls_a_caller_tool_and_its_server_is_gone_after_the_run_and_on_cancel() {
    check(Cli::Gemini, GeminiBackend::new, |r| r).await;
}

#[tokio::test]
async fn e2e_qwen_finds_the_deferred_caller_tool_calls_it_and_its_server_is_gone_after_the_run_and_on_cancel(
) {
    check(Cli::Qwen, QwenBackend::new, |r| r).await;
}

/// Print mode cannot ask: the approve-all policy pre-approves the server (`--allowed-tools mcp__NAME`).
#[tokio::test]
async fn e2e_qwen_print_calls_a_caller_tool_its_policy_pre_approves() {
    check(Cli::Qwen, QwenBackend::new, |r| {
        r.with_options(&QwenOptions::default().interface(QwenInterface::Print))
    })
    .await;
}

#[tokio::test]
async fn e2e_qwen_stream_json_calls_a_caller_tool_served_as_a_streamable_http_server() {
    check(Cli::Qwen, QwenBackend::new, |r| {
        r.with_options(&QwenOptions::default().interface(QwenInterface::StreamJson))
    })
    .await;
}
