//! The real, pinned Claude Code on the bench's model server, driven from the inspector page in
//! headless Chromium: a session created, a message, the tool call's permission approved from the
//! page showing its command, the answer, terminate, and then the agent's own stored session
//! opened from the History tab. Starts with `agent_bench::e2e_enabled_or_explain` (fails with
//! install instructions when the CLI is missing, unless `AGENT_API_E2E=skip`).

use std::sync::Arc;

use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_inspector_tests::{connected, create, pane, say, Browser, Served};
use agent_bench::{Cli, ModelServer, Sandbox};

#[tokio::test(flavor = "multi_thread")]
async fn e2e_the_real_claude_code_is_driven_from_the_page() {
    if agent_bench::e2e_enabled_or_explain(Cli::ClaudeCode).is_none() {
        return;
    }
    let model = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::ClaudeCode, &model, "shell").unwrap();
    // Only the sandbox's environment, in its directory, as the backend's own e2e tests run it.
    let mut config = ClaudeCodeConfig::default().with_binary(&sandbox.program).with_inherit_env(false).with_working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.with_env(key, value);
    }
    let mut gateway = agent_api::Gateway::new();
    gateway.register(Arc::new(ClaudeCodeBackend::new(config))).unwrap();
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    let served = Served::start(gateway, store).await;

    let mut browser = Browser::start("claude-code").await;
    connected(&mut browser, &served).await;
    create(&mut browser, "real", "claude_code", "ask", "").await;
    say(&browser, "go").await;

    let asked = browser.wait_text(".row.permission", "echo hi > out.txt").await;
    assert!(asked.contains("$ echo hi > out.txt"), "the command, exactly: {asked}");
    browser.shot("permission-asked").await;
    browser.click_button(&pane("real"), "Allow once").await;
    browser.wait_text(".row.permission", "approved").await;
    let result = browser.wait_text(".row.kind-tool_result", "exit").await;
    assert!(result.contains("echo hi > out.txt"), "{result}");
    browser.wait_text(".row.role-assistant", "Tool finished").await;
    assert!(sandbox.cwd.join("out.txt").exists(), "the approved command ran");
    browser.shot("answered").await;

    browser.click_button(&pane("real"), "Terminate").await;
    browser.wait_text(".row.session", "terminated").await;
    browser.shot("terminated").await;

    // The agent's own store: the same conversation, opened as a transcript.
    browser.click(".tabs button[data-tab=history]").await;
    browser.select("#history-agent", "claude_code").await;
    browser.click("#history-form button[type=submit]").await;
    browser.click("#history li .open").await;
    browser.wait_text(".pane .meta", "stored session").await;
    browser.wait_text(".row.role-assistant", "Tool finished").await;
    browser.shot("history-transcript").await;

    let errors = browser.console_errors(&[]).await;
    assert!(errors.is_empty(), "console errors: {errors:#?}");
    browser.finish().await;
    served.stop().await;
}
