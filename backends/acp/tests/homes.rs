//! Per-run homes with the real, pinned Gemini CLI and Qwen Code on the bench, over ACP
//! (`spec/run-protocol.md` §9): a hermetic run does not see the memory the user planted in their
//! home, and isolated runs side by side each get a home of their own and leave the user's
//! untouched. The sandbox's HOME plays the user's home. A missing CLI fails with install
//! instructions unless AGENT_API_E2E=skip.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_api::request::{Home, HomeSeed};
use agent_api::{AgentBackend, RunRequest};
use agent_api_acp::AcpConfig;
use agent_api_conformance::record;
use agent_api_gemini::GeminiBackend;
use agent_api_gemini::{GeminiInterface, GeminiOptions};
use agent_api_qwen::QwenBackend;
use agent_api_qwen::{QwenInterface, QwenOptions};
use agent_bench::process::{process_env, processes_in, tree_snapshot};
use agent_bench::sandbox::GEMINI_MODEL;
use agent_bench::{Cli, ModelServer, Sandbox};

const PLANTED: &str = "PLANTED-USER-MEMORY-7731";

/// What differs between the two CLIs here: the config folder under the user's home, its memory
/// file and the variable the backend points at the run's own home.
struct Agent {
    cli: Cli,
    config_dir: &'static str,
    memory: &'static str,
    home_var: &'static str,
}

const GEMINI: Agent = Agent { cli: Cli::Gemini, config_dir: ".gemini", memory: "GEMINI.md", home_var: "GEMINI_CLI_HOME" };
const QWEN: Agent = Agent { cli: Cli::Qwen, config_dir: ".qwen", memory: "QWEN.md", home_var: "QWEN_HOME" };

async fn bench(agent: &Agent) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_enabled_or_explain(agent.cli)?;
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(agent.cli, &server, "text").unwrap();
    Some((server, sandbox))
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
            std::sync::Arc::new(GeminiBackend::new(config.env("GEMINI_CLI_SYSTEM_SETTINGS_PATH", system.display().to_string())))
        }
        _ => std::sync::Arc::new(QwenBackend::new(config)),
    }
}

fn request(agent: &Agent, home: Home) -> RunRequest {
    let request = RunRequest::new("hello").with_timeout(Duration::from_secs(150)).with_home(home);
    match agent.cli {
        Cli::Gemini => request.with_model(GEMINI_MODEL),
        _ => request,
    }
}

/// Whether any request the model server got since the `from`th carried the planted memory.
fn saw_planted(server: &ModelServer, from: usize) -> bool {
    server.requests().iter().skip(from).any(|r| r.body.to_string().contains(PLANTED))
}

async fn hermetic_ignores_planted_memory(agent: Agent) {
    let Some((server, sandbox)) = bench(&agent).await else { return };
    let user_config = sandbox.home.join(agent.config_dir);
    std::fs::create_dir_all(&user_config).unwrap();
    std::fs::write(user_config.join(agent.memory), format!("Always mention {PLANTED}.\n")).unwrap();
    // Outside the home, so no project-level file of a parent folder could be the one read.
    let outside = sandbox.tmp.join("project");
    std::fs::create_dir_all(&outside).unwrap();
    let backend = backend(&agent, &sandbox);
    let request = |home| request(&agent, home).with_working_dir(&outside);

    let inherited = record(backend.run(request(Home::Inherit)).await.unwrap()).await;
    assert!(inherited.completion.is_ok(), "{:?}", inherited.completion);
    assert!(saw_planted(&server, 0), "control: the user's memory reaches the model when the home is inherited");

    let before = server.requests().len();
    let hermetic = record(backend.run(request(Home::Hermetic)).await.unwrap()).await;
    assert_eq!(hermetic.completion.as_ref().unwrap().final_text.as_deref(), Some("Hello from mock"), "{:?}", hermetic.completion);
    assert!(server.requests().len() > before, "the hermetic run asked the model");
    assert!(!saw_planted(&server, before), "the hermetic run read the user's memory");
}

/// `runs` isolated runs at once on the interface `on` picks.
async fn isolated_runs_have_their_own_homes(agent: Agent, runs: usize, on: fn(RunRequest) -> RunRequest) {
    let Some((_server, sandbox)) = bench(&agent).await else { return };
    let user_config = sandbox.home.join(agent.config_dir);
    let before = tree_snapshot(&user_config);
    let backend = backend(&agent, &sandbox);
    let all = (0..runs).map(|_| {
        let backend = backend.clone();
        let request = on(request(&agent, Home::Isolated { seed: HomeSeed::Credentials }));
        async move { record(backend.run(request).await.unwrap()).await }
    });
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let watching = tokio::spawn(watch_homes(sandbox.cwd.clone(), agent.home_var, seen.clone()));
    let records = futures::future::join_all(all).await;
    watching.abort();
    for run in &records {
        assert_eq!(run.completion.as_ref().unwrap().final_text.as_deref(), Some("Hello from mock"), "{:?}", run.completion);
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), runs, "each run has a home of its own: {seen:?}");
    for dir in &seen {
        assert!(!PathBuf::from(dir).starts_with(&sandbox.home), "{dir} is in the user's home");
        assert!(!PathBuf::from(dir).exists(), "{dir} outlived its run");
    }
    assert_eq!(before, tree_snapshot(&user_config), "the user's {} was written", agent.config_dir);
}

/// Adds the values of `var` of the agents running in `cwd` to `seen`, until aborted.
async fn watch_homes(cwd: PathBuf, var: &'static str, seen: Arc<Mutex<BTreeSet<String>>>) {
    loop {
        let now: Vec<String> = processes_in(&cwd).into_iter().filter_map(|pid| process_env(pid, var)).collect();
        seen.lock().unwrap().extend(now);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn e2e_gemini_hermetic_run_ignores_the_memory_planted_in_the_users_home() {
    hermetic_ignores_planted_memory(GEMINI).await;
}

#[tokio::test]
async fn e2e_gemini_isolated_runs_side_by_side_each_have_their_own_home_and_leave_the_users_alone() {
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
    isolated_runs_have_their_own_homes(GEMINI, 2, |r| r.with_options(&GeminiOptions::default().interface(GeminiInterface::Headless))).await;
}

#[tokio::test]
async fn e2e_qwen_stream_json_isolated_runs_each_have_their_own_home() {
    isolated_runs_have_their_own_homes(QWEN, 2, |r| r.with_options(&QwenOptions::default().interface(QwenInterface::StreamJson))).await;
}

#[tokio::test]
async fn e2e_qwen_print_isolated_runs_each_have_their_own_home() {
    isolated_runs_have_their_own_homes(QWEN, 2, |r| r.with_options(&QwenOptions::default().interface(QwenInterface::Print))).await;
}
