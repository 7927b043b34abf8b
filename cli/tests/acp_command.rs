//! `--acp-command`: the generic `acp` kind on the command line, with the conformance crate's fake
//! ACP agent (`fake_acp_agent`, built next to `agent-api` by `cargo test --workspace`).

use std::path::PathBuf;
use std::process::Output;

fn fake_agent() -> PathBuf {
    let path =
        std::path::Path::new(env!("CARGO_BIN_EXE_agent-api")).with_file_name("fake_acp_agent");
    assert!(
        path.is_file(),
        "build the fake ACP agent first: cargo build -p agent_api_conformance --bin fake_acp_agent"
    );
    path
}

use piped::agent_api_fed as agent_api;

mod piped;

fn assistant_text(output: &Output) -> Vec<String> {
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every stdout line is JSON"))
        .collect();
    events
        .iter()
        .filter(|e| e["channel"] == "assistant" && e["kind"] == "text_output")
        .filter_map(|e| e["text"].as_str().map(str::to_string))
        .collect()
}

/// The command line, quoted as a shell would need it (the path may hold spaces) plus an argument.
fn command_line() -> String {
    format!("'{}' --some-flag", fake_agent().display())
}

#[test]
fn run_with_an_acp_command_runs_that_agent_without_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().to_str().unwrap();
    let line = command_line();
    for agent in [&["--agent", "acp"][..], &[]] {
        let mut args = vec![
            "run",
            "--format",
            "jsonl",
            "--cwd",
            cwd,
            "--acp-command",
            &line,
        ];
        args.extend_from_slice(agent);
        args.push("hello there");
        let output = agent_api(&args, "");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            assistant_text(&output).concat(),
            "echo: user_turns=1 messages=1 last=hello there"
        );
    }
}

#[test]
fn chat_with_an_acp_command_holds_one_warm_session() {
    let dir = tempfile::tempdir().unwrap();
    let line = command_line();
    let args = [
        "chat",
        "--agent",
        "acp",
        "--format",
        "jsonl",
        "--cwd",
        dir.path().to_str().unwrap(),
        "--acp-command",
        &line,
    ];
    let output = agent_api(&args, "first\nsecond\n");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = assistant_text(&output).concat();
    assert!(
        text.contains("user_turns=1 messages=1 last=first")
            && text.contains("user_turns=2 messages=3 last=second"),
        "{text}"
    );
}

#[test]
fn an_acp_command_that_cannot_be_split_is_a_usage_error() {
    let output = agent_api(
        &[
            "run",
            "--agent",
            "acp",
            "--acp-command",
            "'unterminated",
            "hi",
        ],
        "",
    );
    assert_eq!(output.status.code(), Some(2), "clap's usage error");
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot split the command line"));
    let empty = agent_api(&["run", "--acp-command", "  ", "hi"], "");
    assert_eq!(empty.status.code(), Some(2));
}

#[test]
fn an_acp_command_for_another_kind_is_refused() {
    let output = agent_api(
        &[
            "run",
            "--agent",
            "scripted",
            "--acp-command",
            "goose acp",
            "hi",
        ],
        "",
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("backend.acp.command"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
