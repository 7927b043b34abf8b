//! `agent-api` with the real, pinned Claude Code on the bench's model server: the permission prompt
//! a person sees (`shell`: the model asks to run `echo hi > out.txt && cat out.txt`), and SIGTERM
//! and SIGHUP ending a run (`slow_shell`: `sleep 30`) with the CLI and its tool shell (started with
//! `setsid`) gone. Each test starts with
//! `agent_bench::e2e_enabled_or_explain` (fails with install instructions when the CLI is missing,
//! unless `AGENT_API_E2E=skip`).

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_bench::{Cli, ModelServer, Sandbox};
use support::Terminal;

/// `agent-api run --agent claude_code` for the sandbox's CLI, with only the sandbox's environment.
fn agent_api(sandbox: &Sandbox, approve: &str) -> Command {
    let mut command = cli(sandbox);
    command.args([
        "run",
        "--agent",
        "claude_code",
        "--approve",
        approve,
        "--timeout",
        "120",
        "go",
    ]);
    command
}

/// `agent-api` with only the sandbox's environment (its CLI: Claude Code or Codex), in the
/// sandbox's directory.
fn cli(sandbox: &Sandbox) -> Command {
    let program_variable = match sandbox.cli {
        Cli::ClaudeCode => "AGENT_API_CLAUDE_CODE_BIN",
        Cli::Codex => {
            point_codex_at_the_bench(sandbox);
            "AGENT_API_CODEX_BIN"
        }
        other => panic!("these tests drive Claude Code or Codex, not {other:?}"),
    };
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-api"));
    command
        .env_clear()
        .envs(sandbox.env.iter().map(|(k, v)| (k, v)))
        .env(program_variable, &sandbox.program)
        .env("AGENT_API_CLI_DIR", "/nonexistent/agent_api_cli_cache")
        .current_dir(&sandbox.cwd);
    command
}

/// The bench points Codex at its server with `-c` flags; `agent-api` passes none of its own, so
/// they go into the sandbox's `$CODEX_HOME/config.toml`, which Codex reads.
fn point_codex_at_the_bench(sandbox: &Sandbox) {
    let home = sandbox
        .env
        .iter()
        .find(|(k, _)| k == "CODEX_HOME")
        .map(|(_, v)| v.clone())
        .expect("CODEX_HOME");
    let mut toml = String::new();
    let mut args = sandbox.base_args.iter();
    while let Some(arg) = args.next() {
        if arg == "-c" {
            toml.push_str(args.next().unwrap());
            toml.push('\n');
        }
    }
    std::fs::write(Path::new(&home).join("config.toml"), toml).unwrap();
}

/// Command lines of the processes whose working directory is inside `dir`.
fn processes_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|c| c.starts_with(dir)))
        .map(|e| {
            String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).unwrap_or_default())
                .replace('\0', " ")
        })
        .collect()
}

fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_the_permission_prompt_shows_the_real_command_and_no_denies() {
    if agent_bench::e2e_enabled_or_explain(Cli::ClaudeCode).is_none() {
        return;
    }
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::ClaudeCode, &server, "shell").unwrap();
    let mut terminal = Terminal::start(agent_api(&sandbox, "ask"));
    let rows = tokio::task::block_in_place(|| terminal.wait_for("[y/N]", Duration::from_secs(90)));
    let shown: Vec<&String> = rows.iter().filter(|r| !r.is_empty()).collect();
    assert_eq!(
        shown.last().map(|r| r.as_str()),
        Some("Allow Bash? [y/N]"),
        "{}",
        rows.join("\n")
    );
    assert!(
        rows.iter()
            .any(|r| r == "  command: echo hi > out.txt && cat out.txt"),
        "{}",
        rows.join("\n")
    );
    terminal.master.write_all(b"n\r").unwrap();
    let status = tokio::task::block_in_place(|| terminal.wait_exit(Duration::from_secs(90)));
    assert!(status.success(), "{}", terminal.rows().join("\n"));
    assert!(
        !sandbox.cwd.join("out.txt").exists(),
        "the denied command ran"
    );
    assert!(processes_in(&sandbox.cwd).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_sigterm_and_sighup_cancel_the_run_and_reap_the_setsid_tool_shell() {
    if agent_bench::e2e_enabled_or_explain(Cli::ClaudeCode).is_none() {
        return;
    }
    let server = ModelServer::start(None).await.unwrap();
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        let sandbox = Sandbox::new(Cli::ClaudeCode, &server, "slow_shell").unwrap();
        let mut child = agent_api(&sandbox, "all")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        tokio::task::block_in_place(|| {
            wait_until("sleep 30 never started", Duration::from_secs(90), || {
                processes_in(&sandbox.cwd)
                    .iter()
                    .any(|p| p.contains("sleep 30"))
            });
            // SAFETY: kill(2) on our child's pid only sends a signal.
            unsafe { libc::kill(child.id() as i32, signal) };
            let started = Instant::now();
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "agent-api did not end after signal {signal}"
                );
                std::thread::sleep(Duration::from_millis(50));
            };
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            assert_eq!(status.code(), Some(130), "signal {signal}: {stderr}");
            assert!(
                stderr.contains("run failed: run cancelled"),
                "signal {signal}: {stderr}"
            );
            wait_until(
                "processes left after the signal",
                Duration::from_secs(5),
                || processes_in(&sandbox.cwd).is_empty(),
            );
        });
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_via_bwrap_and_a_prefix_run_the_agent_there_and_say_so() {
    if agent_bench::e2e_enabled_or_explain(Cli::ClaudeCode).is_none() {
        return;
    }
    let server = ModelServer::start(None).await.unwrap();
    for (via, shown) in [
        ("bwrap", "via bwrap"),
        (r#"prefix:["setsid","-w"]"#, "via prefix:setsid"),
    ] {
        let sandbox = Sandbox::new(Cli::ClaudeCode, &server, "text").unwrap();
        let mut command = agent_api(&sandbox, "all");
        command.args(["--via", via]);
        let output = tokio::task::block_in_place(|| command.output()).unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
        assert!(output.status.success(), "{via}: {stderr}");
        assert!(stdout.contains("Hello from mock"), "{via}: {stdout}");
        assert!(stderr.contains(shown), "{via}: {stderr}");
        assert!(
            processes_in(&sandbox.cwd).is_empty(),
            "{via}: processes left"
        );
    }
}

/// Claude Code through `--via bwrap` with the default home (the caller's own: read-only in the
/// sandbox but for the agent's declared state), from a home where `~/.claude` does not exist yet:
/// its shell tool runs (before, `mkdir ~/.claude/…` failed with EROFS and only the text turn worked).
#[tokio::test(flavor = "multi_thread")]
async fn e2e_via_bwrap_with_a_home_never_used_claude_codes_shell_tool_runs() {
    if agent_bench::e2e_enabled_or_explain(Cli::ClaudeCode).is_none() {
        return;
    }
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::ClaudeCode, &server, "shell").unwrap();
    let state = sandbox.home.join(".claude");
    assert!(!state.exists(), "the run must start with no ~/.claude");
    let mut command = agent_api(&sandbox, "all");
    command.args(["--via", "bwrap"]);
    let output = tokio::task::block_in_place(|| command.output()).unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "{stderr}");
    assert!(
        stdout.contains("Tool finished. Output was: hi"),
        "the shell tool did not run: {stdout}\n{stderr}"
    );
    assert!(!stdout.contains("EROFS"), "{stdout}");
    assert!(state.is_dir(), "~/.claude was not made");
    assert!(processes_in(&sandbox.cwd).is_empty(), "processes left");
}

/// `--via docker:NAME` into a container of `tests/launchers/setup.sh` (host network, the CLIs and the bench
/// sandboxes mounted at their own paths): the answer streams back and the completion names the container.
#[tokio::test(flavor = "multi_thread")]
async fn e2e_via_docker_runs_the_agent_in_the_container_and_says_so() {
    if agent_bench::e2e_enabled_or_explain(Cli::ClaudeCode).is_none() {
        return;
    }
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::ClaudeCode, &server, "text").unwrap();
    let mut command = agent_api(&sandbox, "all");
    command.args(["--via", "docker:agent-api-test-3"]);
    let output = tokio::task::block_in_place(|| command.output()).unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        output.status.success(),
        "{stderr}\n(needs the test containers: bash tests/launchers/setup.sh)"
    );
    assert!(stdout.contains("Hello from mock"), "{stdout}");
    assert!(stderr.contains("via docker:agent-api-test-3"), "{stderr}");
    assert!(processes_in(&sandbox.cwd).is_empty(), "processes left");
}

/// The `session:` line a run printed on stderr.
fn session_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("agent-api: session: "))
        .unwrap_or_else(|| panic!("no session line: {stderr}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_resume_with_the_printed_session_line_from_another_directory_finds_the_session() {
    if agent_bench::e2e_enabled_or_explain(Cli::ClaudeCode).is_none() {
        return;
    }
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::ClaudeCode, &server, "echo").unwrap();
    let first = tokio::task::block_in_place(|| agent_api(&sandbox, "all").output().unwrap());
    let stderr = String::from_utf8_lossy(&first.stderr).into_owned();
    assert!(first.status.success(), "{stderr}");
    let handle = agent_api::request::SessionRef::parse(session_line(&stderr)).unwrap();
    assert_eq!(handle.working_dir(), Some(sandbox.cwd.as_path()));
    assert_eq!(
        handle.agent.as_ref().map(|a| a.as_str()),
        Some("claude_code")
    );

    // Claude Code finds a session only from its project directory: the second run starts elsewhere
    // (no --agent, no --cwd) and the handle takes it back.
    let elsewhere = sandbox.home.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    // A bare id from there is not found, and says so (typed, not a fresh session).
    let mut bare = cli(&sandbox);
    bare.args([
        "run",
        "--agent",
        "claude_code",
        "--approve",
        "all",
        "--timeout",
        "120",
        "--resume",
        &handle.id,
        "go",
    ])
    .current_dir(&elsewhere);
    let lost = tokio::task::block_in_place(|| bare.output().unwrap());
    let lost_err = String::from_utf8_lossy(&lost.stderr);
    assert!(
        !lost.status.success()
            && lost_err.contains(&format!("no session `{}` to continue", handle.id)),
        "{lost_err}"
    );

    let mut again = cli(&sandbox);
    again
        .args([
            "run",
            "--approve",
            "all",
            "--timeout",
            "120",
            "--resume",
            session_line(&stderr),
            "go",
        ])
        .current_dir(&elsewhere);
    let second = tokio::task::block_in_place(|| again.output().unwrap());
    let (out, err) = (
        String::from_utf8_lossy(&second.stdout),
        String::from_utf8_lossy(&second.stderr),
    );
    assert!(second.status.success(), "{out}\n{err}");
    assert!(
        out.contains("user_turns=2"),
        "the resumed session's first turn is in the model request: {out}\n{err}"
    );
    assert_eq!(
        agent_api::request::SessionRef::parse(session_line(&err))
            .unwrap()
            .working_dir(),
        Some(sandbox.cwd.as_path())
    );
}

/// The bench's model server (on its own runtime, which the caller keeps) and a sandbox for `cli`
/// playing `scenario`; `None` when the CLI is missing and skipping was asked for.
fn bench_outside_tokio(
    cli: Cli,
    scenario: &str,
) -> Option<(tokio::runtime::Runtime, ModelServer, Sandbox)> {
    agent_bench::e2e_enabled_or_explain(cli)?;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(ModelServer::start(None)).unwrap();
    let sandbox = Sandbox::new(cli, &server, scenario).unwrap();
    Some((runtime, server, sandbox))
}

/// `agent-api run --agent claude_code --mode plan` plans and writes nothing, even with every
/// request approved: the bench's model writes and edits a file, and the file never appears.
#[test]
fn e2e_run_in_plan_mode_writes_nothing() {
    let Some((_runtime, _server, sandbox)) = bench_outside_tokio(Cli::ClaudeCode, "write_edit")
    else {
        return;
    };
    let output = cli(&sandbox)
        .args([
            "run",
            "--agent",
            "claude_code",
            "--mode",
            "plan",
            "--approve",
            "all",
            "--format",
            "jsonl",
            "--timeout",
            "120",
            "create a file",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !sandbox.cwd.join("created.txt").exists(),
        "plan mode wrote a file"
    );
    assert!(
        stdout.contains("permission"),
        "the write was asked for and denied: {stdout}"
    );
    // An unknown mode is refused before anything runs, naming the valid ones.
    let refused = cli(&sandbox)
        .args(["run", "--agent", "claude_code", "--mode", "build", "go"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("has no mode `build`") && stderr.contains("plan"),
        "{stderr}"
    );
}

/// `agent-api run --agent codex --variant high`: the effort reaches Codex's model request.
#[test]
fn e2e_codex_variant_high_reaches_the_request_as_its_reasoning_effort() {
    let Some((_runtime, server, sandbox)) = bench_outside_tokio(Cli::Codex, "text") else {
        return;
    };
    let output = cli(&sandbox)
        .args([
            "run",
            "--agent",
            "codex",
            "--variant",
            "high",
            "--format",
            "jsonl",
            "--timeout",
            "120",
            "say hi",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let request = server
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.body.get("input").is_some())
        .expect("a model request");
    assert_eq!(
        request.body.pointer("/reasoning/effort"),
        Some(&serde_json::json!("high"))
    );
}

/// `agent-api chat --agent <agent>` at a terminal on the bench's `steer` model (a shell call
/// `sleep 4`, then an echo of the conversation): a line typed while the command runs steers turn 1,
/// is said to be taken, reaches the model within the same turn and changes its answer; no process
/// is left once the chat ends.
fn a_line_typed_while_the_chat_works_steers_the_turn(agent: Cli, kind: &str) {
    let Some((_runtime, _server, sandbox)) = bench_outside_tokio(agent, "steer") else {
        return;
    };
    let mut command = cli(&sandbox);
    command.args([
        "chat",
        "--agent",
        kind,
        "--approve",
        "all",
        "--timeout",
        "120",
    ]);
    let mut terminal = Terminal::start(command);
    terminal.wait_for("you>", Duration::from_secs(60));
    terminal
        .master
        .write_all(b"Run the slow command.\r")
        .unwrap();
    // The model's shell call (`sleep 4`) is on screen: the turn works.
    terminal.wait_for("sleep 4", Duration::from_secs(90));
    terminal.master.write_all(b"Also say banana.\r").unwrap();
    terminal.wait_for(
        "steering the turn: Also say banana.",
        Duration::from_secs(10),
    );
    terminal.wait_for(
        "the agent took the steering message",
        Duration::from_secs(60),
    );
    let rows = terminal.wait_for("last=Also say banana.", Duration::from_secs(60));
    assert!(
        !rows.iter().any(|r| r.contains("turn 2")),
        "the line steered turn 1, it started no turn:\n{}",
        rows.join("\n")
    );
    terminal.wait_for("you>", Duration::from_secs(30));
    terminal.master.write_all(&[0x04]).unwrap();
    assert!(terminal.wait_exit(Duration::from_secs(30)).success());
    assert_eq!(processes_in(&sandbox.cwd), Vec::<String>::new());
}

#[test]
fn e2e_a_line_typed_while_the_chat_works_steers_the_turn_and_says_so() {
    a_line_typed_while_the_chat_works_steers_the_turn(Cli::ClaudeCode, "claude_code");
}

#[test]
fn e2e_a_line_typed_while_a_codex_chat_works_steers_the_turn_and_says_so() {
    a_line_typed_while_the_chat_works_steers_the_turn(Cli::Codex, "codex");
}
