//! # agent_bench: the real-agent test bench
//!
//! Runs the real coding-agent CLIs (Claude Code, Codex, OpenCode, Gemini CLI, Qwen Code) offline against a
//! scripted model server on loopback, so backends are proven against the real programs.
//!
//! * [`ModelServer`]: the scripted model server (Anthropic Messages, OpenAI Responses, OpenAI Chat
//!   Completions, Gemini). The scenario comes from the base URL (`/s/<scenario>`), see [`scenario`].
//! * [`clis`]: finds the pinned CLIs installed by `bash tests/bench/install-clis.sh`.
//! * [`Sandbox`]: a private HOME/XDG/TMPDIR/working directory with the environment and flags that point
//!   one CLI at the server.
//! * [`e2e_enabled_or_explain`]: the gate every end-to-end test starts with.
//! * [`record`]: runs a CLI and writes a fixture in the shared fixture formats.
//!
//! ## Writing an end-to-end test
//!
//! ```no_run
//! use std::time::Duration;
//! use agent_bench::{e2e_enabled_or_explain, process, Cli, ModelServer, Sandbox};
//!
//! # async fn example() -> Result<(), agent_bench::BenchError> {
//! // Panics with the install command when Codex is missing, unless AGENT_API_E2E=skip.
//! let Some(_codex) = e2e_enabled_or_explain(Cli::Codex) else { return Ok(()) };
//! let server = ModelServer::start(None).await?;
//! let sandbox = Sandbox::new(Cli::Codex, &server, "shell")?;
//! let cmd = sandbox.command(&["exec", "--json", "--skip-git-repo-check", "-s", "workspace-write",
//!     "-c", "approval_policy=\"never\"", "run the command"]);
//! let out = process::run(cmd, "codex exec", Duration::from_secs(120)).await?;
//! assert!(out.status.success());
//! assert_eq!(std::fs::read_to_string(sandbox.cwd.join("out.txt")).unwrap(), "hi\n");
//! // What the CLI sent to the model:
//! assert!(server.requests().iter().any(|r| r.path.ends_with("/v1/responses")));
//! # Ok(()) }
//! ```
//!
//! `Sandbox::command` gives a `tokio::process::Command` in its own process group with stdin at
//! /dev/null; [`process::run`] adds a timeout and kills the whole group afterwards, and
//! [`process::GroupGuard`] does the same for hand-driven children. `Sandbox::for_resume` keeps HOME and
//! the working directory for resume tests.
//!
//! ## Environment variables
//!
//! | variable | effect |
//! |---|---|
//! | `AGENT_API_E2E=skip` | end-to-end tests print `SKIPPED (AGENT_API_E2E=skip): ...` and pass when a CLI is missing (otherwise they fail saying how to install) |
//! | `AGENT_API_CLI_DIR` | install root of the pinned CLIs (default `$HOME/.cache/agent_api/clis`) |
//! | `AGENT_API_FIXTURES` | the recordings folder (default: the repository's `tests/fixtures`) |
//! | `AGENT_API_SANDBOX_DIR` | where sandboxes are made (default `$HOME/.cache/agent_api/sandboxes`) |

#![deny(missing_docs)]

pub mod cli;
pub mod clis;
pub mod error;
pub mod images;
pub mod interface;
pub mod process;
pub mod record;
pub mod sandbox;
pub mod scenario;
pub mod server;

pub use cli::Cli;
pub use clis::{cli_dir, cli_version, e2e_enabled_or_explain, find_cli};
pub use error::BenchError;
pub use interface::Interface;
pub use sandbox::{e2e_bench_or_explain, Sandbox};
pub use server::{LoggedRequest, ModelServer};

/// The recordings (`*.jsonl`) directly in `dir`, sorted by name. Panics naming `dir` when it is
/// missing or holds none: a test that replays recordings must never pass on none.
pub fn recordings_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("recordings missing at {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".jsonl"))
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no recordings in {}", dir.display());
    out
}

/// The recorded native transcripts the tests read: `tests/fixtures/` in this repository (copied
/// unchanged from the project's shared recordings, with their README), or `$AGENT_API_FIXTURES`.
///
/// ```
/// assert!(agent_bench::fixtures_dir().join("README.md").is_file());
/// ```
pub fn fixtures_dir() -> std::path::PathBuf {
    match std::env::var_os("AGENT_API_FIXTURES") {
        Some(dir) => dir.into(),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures"),
    }
}
