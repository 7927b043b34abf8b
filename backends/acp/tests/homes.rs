//! Per-run homes with the real, pinned Gemini CLI and Qwen Code on the bench, over ACP
//! (`spec/run-protocol.md` §9): a hermetic run does not see the memory the user planted in their
//! home, and isolated runs side by side each get a home of their own and leave the user's
//! untouched. The sandbox's HOME plays the user's home. A missing CLI fails with install
//! instructions unless AGENT_API_E2E=skip.

use std::time::Duration;

use agent_api::request::Home;
use agent_api::{AgentBackend, RunRequest};
use agent_api_acp::AcpConfig;
use agent_api_conformance::homes::{self, UserHome};
use agent_api_gemini::GeminiBackend;
use agent_api_gemini::{GeminiInterface, GeminiOptions};
use agent_api_qwen::QwenBackend;
use agent_api_qwen::{QwenInterface, QwenOptions};
use agent_bench::sandbox::GEMINI_MODEL;
use agent_bench::{Cli, ModelServer, Sandbox};

/// One CLI and where it keeps its config in the user's home.
struct Agent {
    cli: Cli,
    home: UserHome,
}

const GEMINI: Agent = Agent {
    cli: Cli::Gemini,
    home: UserHome {
        config_dir: ".gemini",
        memory: "GEMINI.md",
        home_var: "GEMINI_CLI_HOME",
        also_written: &[],
    },
};
const QWEN: Agent = Agent {
    cli: Cli::Qwen,
    home: UserHome {
        config_dir: ".qwen",
        memory: "QWEN.md",
        home_var: "QWEN_HOME",
        also_written: &[],
    },
};

async fn bench(agent: &Agent) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(agent.cli, "text").await
}

fn backend(agent: &Agent, sandbox: &Sandbox) -> std::sync::Arc<dyn AgentBackend> {
    let mut config = AcpConfig::with_binary(&sandbox.program).working_dir(&sandbox.cwd);
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    match agent.cli {
        Cli::Gemini => {
            // The bench's base URL makes headless Gemini without a settings file guess the
            // `gateway` auth type, which it then refuses; the machine's system settings (which no
            // home keeps out) name the API key, as the sandbox's user settings do.
            let system = sandbox.tmp.join("gemini-system-settings.json");
            std::fs::write(&system, agent_bench::sandbox::gemini_settings().to_string()).unwrap();
            std::sync::Arc::new(GeminiBackend::new(config.env(
                "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
                system.display().to_string(),
            )))
        }
        _ => std::sync::Arc::new(QwenBackend::new(config)),
    }
}

fn request(agent: &Agent, home: Home) -> RunRequest {
    let request = RunRequest::new("hello")
        .with_timeout(Duration::from_secs(150))
        .with_home(home);
    match agent.cli {
        Cli::Gemini => request.with_model(GEMINI_MODEL),
        _ => request,
    }
}

async fn hermetic_ignores_planted_memory(agent: Agent) {
    let Some((server, sandbox)) = bench(&agent).await else {
        return;
    };
    let backend = backend(&agent, &sandbox);
    homes::hermetic_run_ignores_planted_memory(&agent.home, &*backend, &server, &sandbox, |home| {
        request(&agent, home)
    })
    .await;
}

/// `runs` isolated runs at once on the interface `on` picks.
async fn isolated_runs_have_their_own_homes(
    agent: Agent,
    runs: usize,
    on: fn(RunRequest) -> RunRequest,
) {
    let Some((_server, sandbox)) = bench(&agent).await else {
        return;
    };
    let backend = backend(&agent, &sandbox);
    homes::isolated_runs_have_their_own_homes(&agent.home, backend, &sandbox, runs, |home| {
        on(request(&agent, home))
    })
    .await;
}

#[tokio::test]
async fn e2e_gemini_hermetic_run_ignores_the_memory_planted_in_the_users_home() {
    hermetic_ignores_planted_memory(GEMINI).await;
}

#[tokio::test]
async fn e2e_gemini_isolated_runs_side_by_side_each_have_their_own_home_and_leave_the_users_alone()
{
    isolated_runs_have_their_own_homes(GEMINI, 4, |r| r).await;
}

#[tokio::test]
async fn e2e_qwen_hermetic_run_ignores_the_memory_planted_in_the_users_home() {
    hermetic_ignores_planted_memory(QWEN).await;
}

#[tokio::test]
async fn e2e_qwen_isolated_runs_side_by_side_each_have_their_own_home_and_leave_the_users_alone() {
    isolated_runs_have_their_own_homes(QWEN, 4, |r| r).await;
}

#[tokio::test]
async fn e2e_gemini_headless_isolated_runs_each_have_their_own_home() {
    isolated_runs_have_their_own_homes(GEMINI, 2, |r| {
        r.with_options(&GeminiOptions::default().interface(GeminiInterface::Headless))
    })
    .await;
}

#[tokio::test]
async fn e2e_qwen_stream_json_isolated_runs_each_have_their_own_home() {
    isolated_runs_have_their_own_homes(QWEN, 2, |r| {
        r.with_options(&QwenOptions::default().interface(QwenInterface::StreamJson))
    })
    .await;
}

#[tokio::test]
async fn e2e_qwen_print_isolated_runs_each_have_their_own_home() {
    isolated_runs_have_their_own_homes(QWEN, 2, |r| {
        r.with_options(&QwenOptions::default().interface(QwenInterface::Print))
    })
    .await;
}
