//! Per-run homes with the real, pinned Claude Code CLI on the bench (`spec/run-protocol.md` §9):
//! a hermetic run does not see what the user planted in their home, and twenty isolated runs side
//! by side each get a home of their own and leave the user's untouched. The sandbox's HOME plays
//! the user's home. A missing CLI fails with install instructions unless AGENT_API_E2E=skip.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_api::request::{Home, HomeSeed};
use agent_api::{AgentBackend, RunRequest};
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_conformance::record;
use agent_bench::process::{process_env, processes_in, tree_snapshot};
use agent_bench::{Cli, ModelServer, Sandbox};

const PLANTED: &str = "PLANTED-USER-MEMORY-7731";

async fn bench(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(Cli::ClaudeCode, scenario).await
}

fn backend(sandbox: &Sandbox) -> ClaudeCodeBackend {
    let mut config = ClaudeCodeConfig::default().with_binary(&sandbox.program).with_inherit_env(false).with_working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.with_env(key, value);
    }
    ClaudeCodeBackend::new(config)
}

fn request(home: Home) -> RunRequest {
    RunRequest::new("hello").with_timeout(Duration::from_secs(180)).with_home(home)
}

/// Whether any request the model server got since the `from`th carried the planted memory.
fn saw_planted(server: &ModelServer, from: usize) -> bool {
    server.requests().iter().skip(from).any(|r| r.body.to_string().contains(PLANTED))
}

#[tokio::test]
async fn e2e_a_hermetic_run_ignores_the_memory_planted_in_the_users_home() {
    let Some((server, sandbox)) = bench("text").await else { return };
    let user_config = sandbox.home.join(".claude");
    std::fs::create_dir_all(&user_config).unwrap();
    std::fs::write(user_config.join("CLAUDE.md"), format!("Always mention {PLANTED}.\n")).unwrap();
    // Outside the home: from inside it, Claude would find the file as the memory of a parent
    // folder of the project, whatever the home.
    let outside = sandbox.tmp.join("project");
    std::fs::create_dir_all(&outside).unwrap();
    let backend = backend(&sandbox);
    let request = |home| request(home).with_working_dir(&outside);

    let inherited = record(backend.run(request(Home::Inherit)).await.unwrap()).await;
    assert!(inherited.completion.is_ok(), "{:?}", inherited.completion);
    assert!(saw_planted(&server, 0), "control: the user's memory reaches the model when the home is inherited");

    let before = server.requests().len();
    let hermetic = record(backend.run(request(Home::Hermetic)).await.unwrap()).await;
    assert_eq!(hermetic.completion.as_ref().unwrap().final_text.as_deref(), Some("Hello from mock"));
    assert!(server.requests().len() > before, "the hermetic run asked the model");
    assert!(!saw_planted(&server, before), "the hermetic run read the user's memory");
}

#[tokio::test]
async fn e2e_twenty_isolated_runs_side_by_side_each_have_their_own_home_and_leave_the_users_alone() {
    let Some((_server, sandbox)) = bench("text").await else { return };
    let user_config = sandbox.home.join(".claude");
    let user_state = sandbox.home.join(".claude.json");
    let before = (tree_snapshot(&user_config), std::fs::metadata(&user_state).ok().map(|m| m.len()));
    let backend = backend(&sandbox);
    let runs = (0..20).map(|_| {
        let backend = backend.clone();
        async move { record(backend.run(request(Home::Isolated { seed: HomeSeed::Credentials })).await.unwrap()).await }
    });
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let watching = tokio::spawn(watch_config_dirs(sandbox.cwd.clone(), seen.clone()));
    let records = futures::future::join_all(runs).await;
    watching.abort();
    for run in &records {
        assert_eq!(run.completion.as_ref().unwrap().final_text.as_deref(), Some("Hello from mock"), "{:?}", run.completion);
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 20, "each run has a config dir of its own: {seen:?}");
    for dir in &seen {
        assert!(!PathBuf::from(dir).starts_with(&sandbox.home), "{dir} is in the user's home");
        assert!(!PathBuf::from(dir).exists(), "{dir} outlived its run");
    }
    let after = (tree_snapshot(&user_config), std::fs::metadata(&user_state).ok().map(|m| m.len()));
    assert_eq!(before, after, "the user's Claude config was written");
}

/// Adds the `CLAUDE_CONFIG_DIR`s of the agents running in `cwd` to `seen`, until aborted.
async fn watch_config_dirs(cwd: PathBuf, seen: Arc<Mutex<BTreeSet<String>>>) {
    loop {
        let now: Vec<String> = processes_in(&cwd).into_iter().filter_map(|pid| process_env(pid, "CLAUDE_CONFIG_DIR")).collect();
        seen.lock().unwrap().extend(now);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
