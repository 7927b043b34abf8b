//! The `agent-api` binary end to end, with the built-in scripted agent.

use std::process::{Command, Output, Stdio};

fn agent_api(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args(args)
        .env("AGENT_API_CLI_DIR", "/nonexistent/agent_api_cli_cache")
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .expect("agent-api runs")
}

fn json_lines(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every stdout line is JSON"))
        .collect()
}

#[test]
fn run_without_an_installed_cli_uses_the_scripted_agent_and_says_so() {
    let output = agent_api(&["run", "--format", "jsonl", "--approve", "all", "hello"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("using the built-in scripted agent"));
    let events = json_lines(&output);
    assert_eq!(events.first().unwrap()["message"], "session started");
    let text: String = events
        .iter()
        .filter(|e| e["channel"] == "assistant")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(
        text, "You said: hello",
        "the scripted agent's default scenario is a plain answer"
    );
    assert!(events.last().unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("completed"));
}

#[test]
fn run_prints_the_universal_view_when_asked() {
    let output = agent_api(&[
        "run",
        "--agent",
        "scripted",
        "--view",
        "universal",
        "--format",
        "jsonl",
        "--include-raw",
        "hi",
    ]);
    assert!(output.status.success());
    let events = json_lines(&output);
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["sequence"], i as u64 + 1);
        assert!(event.get("raw").is_some());
    }
    assert_eq!(events.last().unwrap()["type"], "session.ended");
}

#[test]
fn an_unknown_agent_is_a_clear_error_and_a_nonzero_exit() {
    let output = agent_api(&["run", "--agent", "nobody", "hi"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown agent kind `nobody`"));
}

#[test]
fn replay_turns_a_native_log_into_jsonl_events_and_malformed_lines_into_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.stdout.jsonl");
    let log = [
        r#"{"type":"session","id":"s-9","model":"m"}"#,
        r#"{"type":"text_delta","message_id":"m1","text":"Hi"}"#,
        "this line is not JSON",
        r#"{"type":"message_done","message_id":"m1","text":"Hi"}"#,
        r#"{"type":"done","status":"success","input_tokens":1,"output_tokens":1}"#,
    ];
    std::fs::write(&path, log.join("\n")).unwrap();
    let output = agent_api(&[
        "replay",
        "--agent",
        "scripted",
        "--format",
        "jsonl",
        path.to_str().unwrap(),
    ]);
    assert!(output.status.success());
    let events = json_lines(&output);
    assert!(events
        .iter()
        .any(|e| e["kind"] == "text_output" && e["text"] == "Hi"));
    assert_eq!(events.iter().filter(|e| e["kind"] == "unknown").count(), 1);
}

#[test]
fn replay_takes_every_qwen_recording_of_its_three_interfaces() {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/bench/recorded/qwen");
    for interface in ["acp", "control", "print"] {
        let dir = root.join(interface);
        let files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        assert!(!files.is_empty(), "{}", dir.display());
        for path in files {
            let output = agent_api(&[
                "replay",
                "--agent",
                "qwen",
                "--format",
                "jsonl",
                path.to_str().unwrap(),
            ]);
            let events = json_lines(&output);
            let erred = path.to_string_lossy().contains("error");
            // As `run` would have: 1 when the replayed run failed.
            assert_eq!(
                output.status.code(),
                Some(i32::from(erred)),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&output.stderr)
            );
            let answered = events
                .iter()
                .any(|e| e["kind"] == "text_output" && e["channel"] == "assistant");
            let failed = events.iter().filter(|e| e["kind"] == "error").count();
            assert_eq!(
                (answered, failed),
                (!erred, usize::from(erred)),
                "{}",
                path.display()
            );
            assert_eq!(
                events.iter().filter(|e| e["kind"] == "unknown").count(),
                0,
                "{}",
                path.display()
            );
        }
    }
}

fn handwritten(name: &str) -> String {
    format!("{}/../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
/// Into a pipe the default format is `jsonl` (pretty is for a terminal: `prompt_pty` shows it).
fn replay_exits_as_run_would_have_and_prints_jsonl_into_a_pipe_by_default() {
    let failed = agent_api(&[
        "replay",
        "--agent",
        "claude_code",
        &handwritten("handwritten/claude_error_max_turns_2_1_0.stdout.jsonl"),
    ]);
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains("failed") && stderr.contains("turns limit"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&failed.stdout).contains("Let me look at the tests."));

    let answered = agent_api(&[
        "replay",
        "--agent",
        "claude_code",
        &handwritten("handwritten/claude_assistant_without_ids.stdout.jsonl"),
    ]);
    assert_eq!(
        answered.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&answered.stderr)
    );
    let text = String::from_utf8_lossy(&answered.stdout);
    assert!(
        text.contains("First, let me think about this.") && text.contains("The answer is 4."),
        "{text}"
    );
    assert!(
        json_lines(&answered).len() > 2,
        "JSON lines, not pretty text: {text}"
    );

    let universal = agent_api(&[
        "replay",
        "--agent",
        "claude_code",
        "--view",
        "universal",
        "--format",
        "jsonl",
        &handwritten("handwritten/claude_assistant_without_ids.stdout.jsonl"),
    ]);
    assert_eq!(
        json_lines(&universal).last().unwrap()["type"],
        "session.ended"
    );
}

#[test]
fn replay_refuses_the_agents_own_session_files() {
    for (file, looks_like) in [
        (
            "history/claude_code/shell.jsonl",
            "Claude Code session file",
        ),
        ("history/codex/shell.jsonl", "Codex rollout file"),
    ] {
        let output = agent_api(&["replay", "--agent", "claude_code", &handwritten(file)]);
        assert_eq!(output.status.code(), Some(2));
        assert!(output.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(looks_like), "{stderr}");
    }
}

#[test]
fn replay_of_an_unreadable_file_fails_clearly() {
    let output = agent_api(&[
        "replay",
        "--agent",
        "scripted",
        "/nonexistent/recording.jsonl",
    ]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("cannot read /nonexistent/recording.jsonl"));
}

#[test]
fn capabilities_lists_every_backend_as_json() {
    let output = agent_api(&["capabilities", "--format", "json"]);
    assert!(output.status.success());
    let caps: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(caps["scripted"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "agent_api.run"));
}

#[test]
fn doctor_reports_each_supported_cli() {
    let output = agent_api(&["doctor"]);
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("scripted"));
}

#[test]
fn the_committed_coverage_matrix_matches_what_the_backends_advertise() {
    let output = agent_api(&["capabilities", "--format", "matrix"]);
    assert!(output.status.success());
    let generated = String::from_utf8(output.stdout).unwrap();
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../spec/coverage-matrix.md"
    ))
    .unwrap();
    assert!(
        generated == committed,
        "spec/coverage-matrix.md is stale; regenerate it with\n  cargo run -q -p agent_api_cli -- capabilities --format matrix > spec/coverage-matrix.md\n--- generated ---\n{generated}"
    );
}

#[test]
fn the_committed_options_table_matches_what_the_backends_map() {
    let output = agent_api(&["capabilities", "--format", "options"]);
    assert!(output.status.success());
    let generated = String::from_utf8(output.stdout).unwrap();
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/options.md"))
            .unwrap();
    let table_end = committed.find("\n## ").unwrap_or(committed.len());
    assert!(
        generated.trim_end() == committed[..table_end].trim_end(),
        "spec/options.md is stale; regenerate its table with\n  cargo run -q -p agent_api_cli -- capabilities --format options\n--- generated ---\n{generated}"
    );
}

#[test]
fn every_backend_is_registered() {
    let output = agent_api(&["capabilities", "--format", "json"]);
    let caps: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for kind in ["scripted", "claude_code", "codex"] {
        assert!(
            caps[kind]
                .as_array()
                .is_some_and(|ids| ids.iter().any(|c| c == "agent_api.run")),
            "{kind} missing"
        );
    }
}

#[test]
fn chat_takes_one_turn_per_stdin_line_on_one_session_with_one_transcript() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args([
            "chat",
            "--agent",
            "scripted",
            "--format",
            "jsonl",
            "--view",
            "universal",
        ])
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agent-api runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"one\n\ntwo\nthree\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = json_lines(&output);
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(
        sequences,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "one gap-free sequence"
    );
    let count = |ty: &str| events.iter().filter(|e| e["type"] == ty).count();
    assert_eq!((count("session.started"), count("session.ended")), (1, 1));
    let labels: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "item.completed")
        .filter_map(|e| e["data"]["item"]["content"][0]["label"].as_str())
        .collect();
    assert_eq!(
        labels.iter().filter(|l| **l == "turn_completed").count(),
        3,
        "{labels:?}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("scripted chat ended after 3 completed turn(s)"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("turn 1 completed"),
        "bookkeeping once, at the end: {stderr}"
    );
}

/// `agent-api` with `HOME` (and so `~/.claude`) in `home`.
fn agent_api_at_home(home: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args(args)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env("AGENT_API_CLI_DIR", "/nonexistent/agent_api_cli_cache")
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .expect("agent-api runs")
}

#[test]
fn history_lists_claude_sessions_and_prints_one_as_events() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join(".claude/projects/-home-dev-work-shell");
    std::fs::create_dir_all(&project).unwrap();
    let id = "cd13f027-f751-4948-87e6-a722e591af62";
    std::fs::copy(
        handwritten("history/claude_code/shell.jsonl"),
        project.join(format!("{id}.jsonl")),
    )
    .unwrap();

    let listed = agent_api_at_home(
        home.path(),
        &[
            "history",
            "--agent",
            "claude_code",
            "--format",
            "jsonl",
            "--cwd",
            "/home/dev/work/shell",
        ],
    );
    assert_eq!(
        listed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let sessions = json_lines(&listed);
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        (
            sessions[0]["id"].as_str(),
            sessions[0]["first_prompt"].as_str()
        ),
        (Some(id), Some("run the command"))
    );
    let elsewhere = agent_api_at_home(
        home.path(),
        &[
            "history",
            "--agent",
            "claude_code",
            "--format",
            "jsonl",
            "--cwd",
            "/nowhere",
        ],
    );
    assert!(elsewhere.status.success() && elsewhere.stdout.is_empty());

    let shown = agent_api_at_home(
        home.path(),
        &["history", "--agent", "claude_code", "--format", "jsonl", id],
    );
    assert_eq!(
        shown.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let events = json_lines(&shown);
    let text: String = events
        .iter()
        .filter(|e| e["channel"] == "assistant")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, "I'll run a command.Tool finished. Output was: hi");

    let missing = agent_api_at_home(
        home.path(),
        &["history", "--agent", "claude_code", "no-such-session"],
    );
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no session `no-such-session`"));
    let unsupported = agent_api_at_home(home.path(), &["history", "--agent", "scripted"]);
    assert_eq!(unsupported.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unsupported.stderr).contains("agent_api.history.list"));
}

#[test]
fn image_and_attach_flags_reach_the_prompt_and_an_agent_without_them_refuses_before_spawn() {
    for (flag, capability) in [
        ("--image", "agent_api.input.images"),
        ("--attach", "agent_api.input.file_attachments"),
    ] {
        let output = agent_api(&["run", "--agent", "scripted", flag, "cat.png", "hi"]);
        assert_eq!(output.status.code(), Some(1), "{flag}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(capability) && !stderr.contains("session started"),
            "{flag}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "nothing ran");
    }
}

#[test]
fn portable_flags_reach_the_request_and_an_agent_without_them_refuses_before_spawn() {
    let output = agent_api(&[
        "run",
        "--agent",
        "scripted",
        "--system-prompt",
        "be terse",
        "hi",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("agent_api.options.system_prompt") && !stderr.contains("session started"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "nothing ran");
}

#[test]
fn a_denied_tool_category_is_named_by_its_capability_and_an_unknown_one_is_a_usage_error() {
    let output = agent_api(&[
        "run",
        "--agent",
        "scripted",
        "--deny-category",
        "shell",
        "hi",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("agent_api.options.denied_tool_categories"),
        "{stderr}"
    );
    let unknown = agent_api(&[
        "run",
        "--agent",
        "scripted",
        "--deny-category",
        "shel",
        "hi",
    ]);
    assert_eq!(unknown.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.contains("unknown tool category") && stderr.contains("file_write"),
        "{stderr}"
    );
}

#[test]
fn a_json_schema_the_answer_does_not_fit_fails_the_run_with_the_validation_message() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema.json");
    std::fs::write(&schema, r#"{"type": "object", "required": ["city"]}"#).unwrap();
    // The scripted agent's default answer quotes the prompt (the schema instructions included): not JSON.
    let output = agent_api(&[
        "run",
        "--agent",
        "scripted",
        "--format",
        "jsonl",
        "--json-schema",
        schema.to_str().unwrap(),
        "hi",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("does not fit the output schema") && stderr.contains("not JSON"),
        "{stderr}"
    );
    let missing = agent_api(&[
        "run",
        "--agent",
        "scripted",
        "--json-schema",
        "/nonexistent/schema.json",
        "hi",
    ]);
    assert_eq!(
        missing.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
}

/// A crashed agent says why on screen: the last lines of its stderr under the failure (issue 39).
#[test]
fn a_crashed_agent_shows_its_last_stderr_lines() {
    let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../backends/claude_code/tests/fixtures/fake_claude.sh");
    let output = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args(["run", "--agent", "claude_code", "hi"])
        .env("AGENT_API_CLI_DIR", "/nonexistent/agent_api_cli_cache")
        .env("AGENT_API_CLAUDE_CODE_BIN", &fake)
        .env("FAKE_CLAUDE_MODE", "crash")
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("exit code 3"), "{stderr}");
    assert!(
        stderr.contains("agent-api:   stderr: fatal: SECRET-TOKEN-123 leaked on stderr"),
        "{stderr}"
    );
}
