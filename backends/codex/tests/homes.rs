//! Per-run homes with the real, pinned Codex CLI on the bench (`spec/run-protocol.md` §9):
//! a hermetic run does not see what the user planted in their home, and twenty isolated runs side
//! by side each get a home of their own and leave the user's untouched. The sandbox's HOME plays
//! the user's home. A missing CLI fails with install instructions unless AGENT_API_E2E=skip.

use std::sync::Arc;
use std::time::Duration;

use agent_api::request::Home;
use agent_api::RunRequest;
use agent_api_codex::{CodexBackend, CodexConfig};
use agent_api_conformance::homes::{self, UserHome};
use agent_bench::{Cli, ModelServer, Sandbox};

const CODEX: UserHome = UserHome {
    config_dir: ".codex",
    memory: "AGENTS.md",
    home_var: "CODEX_HOME",
    also_written: &[],
};

async fn bench(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(Cli::Codex, scenario).await
}

/// A backend running the sandbox's CLI with its environment and `-c` flags (as `e2e.rs` does).
fn backend(sandbox: &Sandbox) -> CodexBackend {
    let mut overrides = Vec::new();
    let mut args = sandbox.base_args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-c" => overrides.extend(args.next().cloned()),
            _ => {
                args.next(); // `--disable plugins`: the backend's quiet flags do that already
            }
        }
    }
    let mut config = CodexConfig::with_binary(&sandbox.program)
        .config_overrides(overrides)
        .working_dir(&sandbox.cwd);
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    CodexBackend::new(config)
}

fn request(home: Home) -> RunRequest {
    RunRequest::new("hello")
        .with_timeout(Duration::from_secs(180))
        .with_home(home)
}

#[tokio::test]
async fn e2e_a_hermetic_run_ignores_the_instructions_planted_in_the_users_home() {
    let Some((server, sandbox)) = bench("text").await else {
        return;
    };
    homes::hermetic_run_ignores_planted_memory(
        &CODEX,
        &backend(&sandbox),
        &server,
        &sandbox,
        request,
    )
    .await;
}

#[tokio::test]
async fn e2e_twenty_isolated_runs_side_by_side_each_have_their_own_home_and_leave_the_users_alone()
{
    let Some((_server, sandbox)) = bench("text").await else {
        return;
    };
    homes::isolated_runs_have_their_own_homes(
        &CODEX,
        Arc::new(backend(&sandbox)),
        &sandbox,
        20,
        request,
    )
    .await;
}
