//! The real, pinned Claude Code on the bench's model server, driven from the inspector page in
//! headless Chromium: a session created, a message, the tool call's permission approved from the
//! page showing its command, the answer, terminate, and then the agent's own stored session opened
//! from the History tab; its questions answered from the page; a turn cancelled with Esc. Each
//! starts with `agent_bench::e2e_enabled_or_explain` (fails with install instructions when the CLI
//! is missing, unless `AGENT_API_E2E=skip`).

use std::sync::Arc;

use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_inspector_tests::{connected, create, pane, say, Browser, Served};
use agent_bench::{Cli, ModelServer, Sandbox};

/// A server running the pinned Claude Code of `sandbox`, with only the sandbox's environment, in
/// its directory, as the backend's own e2e tests run it.
async fn serve_claude(sandbox: &Sandbox) -> Served {
    let mut config = ClaudeCodeConfig::default()
        .with_binary(&sandbox.program)
        .with_inherit_env(false)
        .with_working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.with_env(key, value);
    }
    let mut gateway = agent_api::Gateway::new();
    gateway
        .register(Arc::new(ClaudeCodeBackend::new(config)))
        .unwrap();
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    Served::start(gateway, store).await
}

/// The bench's model server and a sandbox playing `scenario`, or `None` when the CLI is missing
/// and skipping was asked for.
async fn bench(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(Cli::ClaudeCode, scenario).await
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_the_real_claude_code_is_driven_from_the_page() {
    let Some((_model, sandbox)) = bench("shell").await else {
        return;
    };
    let served = serve_claude(&sandbox).await;

    let mut browser = Browser::start("claude-code").await;
    connected(&mut browser, &served).await;
    create(&mut browser, "real", "claude_code", "ask", "").await;
    say(&browser, "go").await;

    let asked = browser
        .wait_text(".row.permission", "echo hi > out.txt")
        .await;
    assert!(
        asked.contains("$ echo hi > out.txt"),
        "the command, exactly: {asked}"
    );
    browser.shot("permission-asked").await;
    browser.click_button(&pane("real"), "Allow once").await;
    browser.wait_text(".row.permission", "approved").await;
    let result = browser.wait_text(".row.kind-tool_result", "exit").await;
    assert!(result.contains("echo hi > out.txt"), "{result}");
    browser
        .wait_text(".row.role-assistant", "Tool finished")
        .await;
    assert!(
        sandbox.cwd.join("out.txt").exists(),
        "the approved command ran"
    );
    browser.shot("answered").await;

    browser.click_button(&pane("real"), "Terminate").await;
    browser
        .click_button(&pane("real"), "Confirm terminate")
        .await;
    browser.wait_text(".row.session", "terminated").await;
    browser.shot("terminated").await;

    // The agent's own store: the same conversation, opened as a transcript.
    browser.click(".tabs button[data-tab=history]").await;
    browser.select("#history-agent", "claude_code").await;
    browser.click("#history-form button[type=submit]").await;
    browser.click("#history li .open").await;
    browser.wait_text(".pane .meta", "stored session").await;
    browser
        .wait_text(".row.role-assistant", "Tool finished")
        .await;
    browser.shot("history-transcript").await;

    browser.end(served, &[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_the_real_claude_codes_questions_are_answered_from_the_page() {
    let Some((_model, sandbox)) = bench("question").await else {
        return;
    };
    let served = serve_claude(&sandbox).await;
    let mut browser = Browser::start("claude-code-question").await;
    connected(&mut browser, &served).await;
    create(&mut browser, "asks", "claude_code", "ask", "").await;
    say(&browser, "ask me").await;
    // Each question its own prompt; the first option of each chosen from the page.
    for _ in 0..2 {
        browser
            .wait_until("a question waiting", "return !!document.querySelector('.row.question:not(.resolved) .answer button.option')")
            .await;
        browser.shot("question-asked").await;
        browser
            .click(".row.question:not(.resolved) .answer button.option")
            .await;
        browser
            .wait_until(
                "the question answered",
                "return !document.querySelector('.row.question:not(.resolved) .answer button.option:disabled')",
            )
            .await;
    }
    browser
        .wait_text(".row.role-assistant", "You answered")
        .await;
    browser
        .wait_until(
            "both questions answered",
            "return [...document.querySelectorAll('.row.question')].every(r => r.textContent.includes('answered'))",
        )
        .await;
    browser.shot("questions-answered").await;
    browser.end(served, &[]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_a_real_claude_code_turn_is_cancelled_from_the_page_with_escape() {
    let Some((_model, sandbox)) = bench("slow_text").await else {
        return;
    };
    let served = serve_claude(&sandbox).await;
    let mut browser = Browser::start("claude-code-cancel").await;
    connected(&mut browser, &served).await;
    create(&mut browser, "slow", "claude_code", "default", "").await;
    say(&browser, "talk slowly").await;
    browser
        .wait_until(
            "the answer streams",
            "return !!document.querySelector('.row.role-assistant.streaming')",
        )
        .await;
    browser
        .type_into(".pane textarea", agent_api_inspector_tests::ESCAPE)
        .await;
    browser
        .wait_until(
            "the turn ended",
            // The person's own cancel shows as theirs ("turn cancelled by you"), not as a failure.
            "return !document.querySelector('.row.streaming') && /turn cancelled by you/.test(document.querySelector('.rows').textContent)",
        )
        .await;
    let said = browser.texts(".row.role-assistant .text").await.join(" ");
    assert!(
        said.split_whitespace().count() < 60,
        "the turn was cut: {said}"
    );
    browser.wait_text(".pane-head .meta", "live").await;
    browser.shot("cancelled").await;
    browser.finish().await;
    served.stop().await;
}

/// Steering from the page (issue 50): while a turn of the real Claude Code runs its slow command,
/// the message box stays usable and reads "Steer"; a message typed there joins that turn (a user
/// row, answered in the same turn: the model's next request holds it beside the command's call),
/// and once the turn ends the box sends again. The server's stored transcript has one turn, with
/// the steering message inside it.
#[tokio::test(flavor = "multi_thread")]
async fn e2e_a_real_claude_code_turn_is_steered_from_the_page() {
    let Some((model, sandbox)) = bench("steer").await else {
        return;
    };
    let served = serve_claude(&sandbox).await;
    let mut browser = Browser::start("claude-code-steer").await;
    connected(&mut browser, &served).await;
    create(&mut browser, "steered", "claude_code", "ask", "").await;
    let composer = |label: &str| {
        format!(
            "const b = document.querySelector('.pane .composer button'); \
             const t = document.querySelector('.pane .composer textarea'); \
             return b.textContent === '{label}' && !b.disabled && !t.disabled && !t.readOnly"
        )
    };
    browser
        .wait_until("the box sends before a turn", &composer("Send"))
        .await;
    say(&browser, "Run the slow command.").await;
    // The bench's sandbox lets Claude Code run its shell tool: no permission to answer.
    browser.wait_text(".row.kind-tool_call", "sleep 4").await;
    browser
        .wait_until("the box steers while the turn runs", &composer("Steer"))
        .await;
    browser.shot("steer-offered").await;
    say(&browser, "Also say banana.").await;
    browser
        .wait_text(".row.role-user", "Also say banana.")
        .await;
    browser
        .wait_text(".row.role-assistant", "last=Also say banana.")
        .await;
    browser
        .wait_until("the box sends once the turn ended", &composer("Send"))
        .await;
    browser.shot("steered").await;

    // One turn, the steering message inside it, as the server stored it.
    let events = browser
        .js(
            "return fetch('/v1/sessions/steered/events?offset=0&limit=1000', \
             {headers: {Authorization: 'Bearer ' + arguments[0]}}).then(r => r.json())",
            vec![serde_json::json!(agent_api_inspector_tests::TOKEN)],
        )
        .await;
    let mut order = Vec::new();
    for event in events["events"].as_array().expect("the stored events") {
        let item = &event["data"]["item"];
        if event["type"] != "item.completed" {
            continue;
        }
        let label = item["content"][0]["label"].as_str().unwrap_or_default();
        if item["kind"] == "status" && label.starts_with("turn_") {
            order.push(label.to_string());
        } else if item["role"] == "user" && item["content"].to_string().contains("Also say banana.")
        {
            order.push("steer".to_string());
        }
    }
    assert_eq!(
        order,
        vec!["turn_started", "steer", "turn_completed"],
        "one turn, steered inside it"
    );
    let requests = model.requests();
    let steered = requests
        .iter()
        .map(|r| r.body.to_string())
        .find(|body| body.contains("Also say banana."))
        .expect("a model request holds the steering message");
    assert!(
        steered.contains("sleep 4"),
        "the request with the steering message continues the turn"
    );
    browser.end(served, &[]).await;
}
