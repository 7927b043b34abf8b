//! End-to-end smoke tests: each of the five real CLIs completes the `text` and the `shell` scenario through
//! its one-way interface against the scripted model server, and the shell command's file exists afterwards.
//!
//! Needs the pinned CLIs (`bash tests/bench/install-clis.sh`); without them each test fails saying so,
//! unless `AGENT_API_E2E=skip` is set.

use std::time::Duration;

use agent_bench::process::{self, Captured};
use agent_bench::{
    e2e_enabled_or_explain, interface::prompt_for, Cli, Interface, ModelServer, Sandbox,
};
use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(180);

/// Runs `interface` with `scenario` in a fresh sandbox; returns the sandbox and what the CLI printed.
async fn run(server: &ModelServer, interface: Interface, scenario: &str) -> (Sandbox, Captured) {
    let sandbox = Sandbox::new(interface.cli(), server, scenario).expect("sandbox");
    let args = interface.args(prompt_for(scenario));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let what = format!("{interface} {scenario}");
    let out = process::run(sandbox.command(&args), &what, TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{what} exited with {}\nstdout:\n{}\nstderr:\n{}",
        out.exit_code(),
        out.stdout
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        out.stderr
    );
    (sandbox, out)
}

/// The final answer text of a one-way run, read from the interface's own events.
fn final_text(interface: Interface, events: &[Value]) -> String {
    let mut answer = String::new();
    for e in events {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        match interface {
            Interface::ClaudePrint | Interface::QwenPrint if e["type"] == "result" => {
                answer = text(&e["result"])
            }
            Interface::CodexExec
                if e["type"] == "item.completed" && e["item"]["type"] == "agent_message" =>
            {
                answer = text(&e["item"]["text"])
            }
            Interface::OpenCodeRun if e["type"] == "text" => answer = text(&e["part"]["text"]),
            // Gemini streams the answer as deltas: the answer is the run of deltas after the last other event.
            Interface::GeminiHeadless if e["type"] == "message" && e["role"] == "assistant" => {
                answer += &text(&e["content"])
            }
            Interface::GeminiHeadless if e["type"] != "result" => answer.clear(),
            _ => {}
        }
    }
    answer
}

async fn smoke(interface: Interface) {
    let Some(_path) = e2e_enabled_or_explain(interface.cli()) else {
        return;
    };
    let server = ModelServer::start(None).await.expect("server");
    let ((_text_box, text), (shell_box, shell)) = tokio::join!(
        run(&server, interface, "text"),
        run(&server, interface, "shell")
    );

    let answer = final_text(interface, &text.json_lines());
    assert_eq!(answer, "Hello from mock", "{interface} text answer");

    let out = std::fs::read_to_string(shell_box.cwd.join("out.txt"))
        .unwrap_or_else(|e| panic!("{interface}: out.txt missing after the shell scenario: {e}"));
    assert_eq!(out, "hi\n", "{interface}: out.txt");
    let answer = final_text(interface, &shell.json_lines());
    assert!(
        answer.starts_with("Tool finished. Output was: ") && answer.contains("hi"),
        "{interface}: {answer}"
    );

    let requests = server.requests();
    let model_calls: Vec<_> = requests.iter().filter(|r| r.method == "POST").collect();
    assert!(
        model_calls.iter().all(|r| r.scenario.is_some()),
        "every model call names its scenario"
    );
    let shell_calls = model_calls
        .iter()
        .filter(|r| r.scenario.as_deref() == Some("shell"))
        .count();
    assert!(
        shell_calls >= 2,
        "{interface}: the tool result went back to the model ({shell_calls} shell calls)"
    );
}

#[tokio::test]
async fn claude_code_print_completes_text_and_shell() {
    smoke(Interface::ClaudePrint).await;
}

#[tokio::test]
async fn codex_exec_completes_text_and_shell() {
    smoke(Interface::CodexExec).await;
}

#[tokio::test]
async fn opencode_run_completes_text_and_shell() {
    smoke(Interface::OpenCodeRun).await;
}

#[tokio::test]
async fn gemini_headless_completes_text_and_shell() {
    smoke(Interface::GeminiHeadless).await;
}

#[tokio::test]
async fn qwen_print_completes_text_and_shell() {
    smoke(Interface::QwenPrint).await;
}

#[test]
fn every_cli_has_a_smoke_interface() {
    for cli in Cli::ALL {
        assert!(
            Interface::ALL
                .iter()
                .any(|i| i.cli() == cli && i.is_one_way()),
            "{cli}"
        );
    }
}
