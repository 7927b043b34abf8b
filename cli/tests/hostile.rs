//! `agent-api` against a hostile agent (the fake `claude` of the Claude Code backend's tests):
//! nothing it prints reaches the terminal as a control sequence, signals and a closed stdout
//! cancel the run and leave no process, a relative binary path is the caller's.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn fake_claude() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../backends/claude_code/tests/fixtures/fake_claude.sh")
}

fn agent_api(mode: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-api"));
    command
        .env("AGENT_API_CLI_DIR", "/nonexistent/agent_api_cli_cache")
        .env("PATH", "/usr/bin:/bin")
        .env("AGENT_API_CLAUDE_CODE_BIN", fake_claude())
        .env("FAKE_CLAUDE_MODE", mode)
        .stdin(Stdio::null());
    command
}

fn run(mode: &str, args: &[&str]) -> Output {
    agent_api(mode)
        .args(["run", "--agent", "claude_code"])
        .args(args)
        .arg("hi")
        .output()
        .expect("agent-api runs")
}

/// Whether `bytes` hold anything a terminal acts on besides newlines (ESC, CR, BEL, C1, bidi).
fn has_control(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes)
        .chars()
        .any(|c| c != '\n' && agent_api::display::is_unsafe(c))
}

#[test]
fn pretty_output_and_status_lines_show_agent_escapes_as_text() {
    for view in ["wrapper", "universal"] {
        let output = run("hostile_text", &["--format", "pretty", "--view", view]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        for (name, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
            assert!(
                !has_control(bytes),
                "{view} {name} holds a control character: {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("\\e]52;c;ZWNobw=="), "{stdout}");
        assert!(
            !stdout.contains("Some(") && !stdout.contains("None"),
            "Debug formatting in {view}: {stdout}"
        );
    }
    let wrapper = run("hostile_text", &["--format", "pretty"]);
    let stdout = String::from_utf8_lossy(&wrapper.stdout);
    assert!(
        stdout.contains("⚙ Bash: ls\\e[2J\\u{202e}"),
        "the tool line shows its command: {stdout}"
    );
    let stderr = String::from_utf8_lossy(&wrapper.stderr);
    assert!(
        stderr.contains("tokens: 1 in, 1 out"),
        "usage as plain numbers: {stderr}"
    );
}

#[test]
fn jsonl_output_is_exact_json_with_bidi_controls_escaped() {
    let output = run(
        "hostile_text",
        &["--format", "jsonl", "--view", "universal"],
    );
    assert!(output.status.success());
    assert!(
        !has_control(&output.stdout),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let text: String = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("each line is JSON"))
        .filter(|e| e["type"] == "item.delta")
        .filter_map(|e| e["data"]["delta"].as_str().map(str::to_string))
        .collect();
    assert!(
        text.contains("\r\u{202e}evil\u{1b}]52;"),
        "the JSON still means the agent's exact text: {text:?}"
    );
}

#[test]
fn a_permission_without_a_terminal_is_denied_with_an_inert_summary() {
    let dir = tempfile::tempdir().unwrap();
    let answer = dir.path().join("answer");
    let output = agent_api("hostile_permission")
        .env("FAKE_CLAUDE_ANSWER_FILE", &answer)
        .args(["run", "--agent", "claude_code", "hi"])
        .output()
        .unwrap();
    assert!(
        !has_control(&output.stderr),
        "{:?}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("no terminal to ask; denying"));
    assert!(std::fs::read_to_string(&answer)
        .unwrap()
        .contains("\"behavior\":\"deny\""));
}

#[test]
fn secrets_in_stream_errors_codes_and_subtypes_are_masked() {
    let output = run("secrets", &["--format", "jsonl", "--view", "universal"]);
    for bytes in [&output.stdout, &output.stderr] {
        let text = String::from_utf8_lossy(bytes);
        for secret in ["SECRET", "sk-ant-code-123456", "tok."] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }
    assert!(String::from_utf8_lossy(&output.stdout).contains("[redacted]"));
}

fn read_pid(dir: &Path, name: &str) -> i32 {
    let path = dir.join(name);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "the fake never wrote {name}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        if state.map_or(true, |s| {
            s.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next())
                == Some("Z")
        }) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("agent-api did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts a chatty run; returns agent-api, the fake's pids directory and its three pids.
fn chatty(format: &str) -> (Child, tempfile::TempDir, [i32; 3]) {
    let dir = tempfile::tempdir().unwrap();
    let child = agent_api("chatty")
        .env("FAKE_PID_DIR", dir.path())
        .args(["run", "--agent", "claude_code", "--format", format, "hi"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pids = [
        read_pid(dir.path(), "fake"),
        read_pid(dir.path(), "plain"),
        read_pid(dir.path(), "setsid"),
    ];
    (child, dir, pids)
}

/// A structured answer (`--json-schema`) with bidi, line-separator and escape characters prints
/// as escaped JSON, like every other JSON line.
#[test]
fn a_structured_answer_prints_inert() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema.json");
    std::fs::write(&schema, r#"{"type":"object"}"#).unwrap();
    let output = run(
        "hostile_structured",
        &[
            "--format",
            "pretty",
            "--json-schema",
            schema.to_str().unwrap(),
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !has_control(&output.stdout),
        "{:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        last["a"], "x\u{202e}y\u{2028}z\u{1b}[2J",
        "the same answer, escaped: {stdout}"
    );
}

/// Files a caller names that are not files (a FIFO, `/dev/zero`, a 10 GiB sparse file): each is a
/// clear error at once, never a hang or a read that fills memory.
#[test]
fn named_files_that_are_not_regular_or_too_large_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.png");
    let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(10 << 30)
        .unwrap();
    let (fifo, huge) = (fifo.display().to_string(), huge.display().to_string());
    let cases: [&[&str]; 5] = [
        &["--image", &fifo],
        &["--json-schema", &fifo],
        &["--json-schema", "/dev/zero"],
        &["--mcp-config", &huge],
        &["--json-schema", &huge],
    ];
    for args in cases {
        let mut child = agent_api("hostile_text")
            .args(["run", "--agent", "claude_code"])
            .args(args)
            .arg("hi")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = wait_exit(&mut child, Duration::from_secs(30));
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        assert!(!status.success(), "{args:?}: {stderr}");
        let named = args[1];
        assert!(
            stderr.contains(named),
            "{args:?}: the error names the file: {stderr}"
        );
        assert!(
            stderr.contains("not a regular file") || stderr.contains("larger than"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn sigterm_sighup_and_sigint_cancel_the_run_and_reap_every_agent_process() {
    for signal in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        let (mut child, _dir, pids) = chatty("jsonl");
        // SAFETY: kill(2) on the child's pid only sends a signal.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = wait_exit(&mut child, Duration::from_secs(20));
        assert_eq!(status.code(), Some(130), "signal {signal}");
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        assert!(
            stderr.contains("cancelling") && stderr.contains("run failed: run cancelled"),
            "signal {signal}: {stderr}"
        );
        for pid in pids {
            assert!(gone(pid), "signal {signal}: agent process {pid} survived");
        }
    }
}

#[test]
fn a_second_signal_forces_the_end_and_still_reaps() {
    let (mut child, _dir, pids) = chatty("jsonl");
    for _ in 0..2 {
        // SAFETY: as above.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(10)).code(),
        Some(130)
    );
    for pid in pids {
        assert!(gone(pid), "agent process {pid} survived the forced end");
    }
}

#[test]
fn a_closed_stdout_cancels_the_run() {
    for format in ["jsonl", "pretty"] {
        let (mut child, _dir, pids) = chatty(format);
        let mut first = [0u8; 1];
        std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
        drop(child.stdout.take());
        let status = wait_exit(&mut child, Duration::from_secs(20));
        assert_eq!(status.code(), Some(141), "{format}");
        for pid in pids {
            assert!(gone(pid), "{format}: agent process {pid} survived");
        }
    }
}

/// Runs `args` with stdout a pipe whose reader is already closed.
fn into_closed_pipe(args: &[&str]) -> Output {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just created and are owned here only.
    let (reader, writer) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(reader);
    agent_api("none")
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn doctor_and_capabilities_into_a_closed_pipe_exit_quietly() {
    for args in [
        &["doctor"][..],
        &["capabilities"],
        &["capabilities", "--format", "json"],
    ] {
        let output = into_closed_pipe(args);
        assert_eq!(
            output.status.code(),
            Some(141),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            output.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn doctor_prints_a_hostile_version_inert() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("claude");
    std::fs::write(
        &bin,
        "#!/bin/sh\nprintf '2.1.197\\033]0;pwned\\007 (Claude Code)\\n'\n",
    )
    .unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&bin).unwrap().permissions(),
        0o755,
    );
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let output = agent_api("none")
        .env("AGENT_API_CLAUDE_CODE_BIN", &bin)
        .arg("doctor")
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(
        !has_control(&output.stdout),
        "{:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("installed version 2.1.197 at ")
            && stdout.contains("(named by $AGENT_API_CLAUDE_CODE_BIN) — supported"),
        "{stdout}"
    );
}

#[test]
fn a_relative_binary_is_the_callers_never_one_planted_in_the_agents_directory() {
    let caller = tempfile::tempdir().unwrap();
    let agent = tempfile::tempdir().unwrap();
    let script = |path: &Path, body: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    };
    script(
        &caller.path().join("bin/claude"),
        &format!("#!/bin/sh\nexec {} \"$@\"\n", fake_claude().display()),
    );
    let planted_ran = agent.path().join("planted-ran");
    script(
        &agent.path().join("bin/claude"),
        &format!("#!/bin/sh\ntouch {}\nexit 7\n", planted_ran.display()),
    );
    let output = agent_api("default")
        .current_dir(caller.path())
        .env("AGENT_API_CLAUDE_CODE_BIN", "bin/claude")
        .args([
            "run",
            "--agent",
            "claude_code",
            "--format",
            "jsonl",
            "--cwd",
        ])
        .arg(agent.path())
        .arg("hi")
        .output()
        .unwrap();
    assert!(
        !planted_ran.exists(),
        "the binary planted in the agent's directory ran"
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn an_unusable_working_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    for cwd in [dir.path().join("missing"), file] {
        let output = agent_api("default")
            .args(["run", "--agent", "claude_code", "--cwd"])
            .arg(&cwd)
            .arg("hi")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(
            stderr.contains("as the agent's working directory: "),
            "{stderr}"
        );
        assert!(!stderr.contains("failed to spawn"), "{stderr}");
    }
}
