//! Shared by the CLI's tests: `agent-api` with piped stdin, stdout and stderr (no terminal), on a
//! `PATH` and CLI cache where no agent CLI is installed.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `agent-api ARGS` with `stdin` written to its standard input, and waits for it.
pub(crate) fn agent_api_fed(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args(args)
        .env("AGENT_API_CLI_DIR", "/nonexistent/agent_api_cli_cache")
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
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}
