//! Per-run homes with the real, pinned Claude Code CLI on the bench (`spec/run-protocol.md` §9):
//! a hermetic run does not see what the user planted in their home, and twenty isolated runs side
//! by side each get a home of their own and leave the user's untouched. The sandbox's HOME plays
//! the user's home. A missing CLI fails with install instructions unless AGENT_API_E2E=skip.

use std::sync::Arc;
use std::time::Duration;

use agent_api::request::Home;
use agent_api::RunRequest;
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_conformance::homes::{self, UserHome};
use agent_bench::{Cli, ModelServer, Sandbox};

const CLAUDE: UserHome = UserHome {
    config_dir: ".claude",
    memory: "CLAUDE.md",
    home_var: "CLAUDE_CONFIG_DIR",
    also_written: &[".claude.json"],
};

async fn bench(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(Cli::ClaudeCode, scenario).await
}

fn backend(sandbox: &Sandbox) -> ClaudeCodeBackend {
    let mut config = ClaudeCodeConfig::default()
        .with_binary(&sandbox.program)
        .with_inherit_env(false)
        .with_working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.with_env(key, value);
    }
    ClaudeCodeBackend::new(config)
}

fn request(home: Home) -> RunRequest {
    RunRequest::new("hello")
        .with_timeout(Duration::from_secs(180))
        .with_home(home)
}

#[tokio::test]
async fn e2e_a_hermetic_run_ignores_the_memory_planted_in_the_users_home() {
    let Some((server, sandbox)) = bench("text").await else {
        return;
    };
    homes::hermetic_run_ignores_planted_memory(
        &CLAUDE,
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
        &CLAUDE,
        Arc::new(backend(&sandbox)),
        &sandbox,
        20,
        request,
    )
    .await;
}
