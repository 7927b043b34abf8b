//! Per-run homes with the real, pinned OpenCode on the bench (`spec/run-protocol.md` §9): a
//! hermetic run does not see the global memory the user planted in their config directory, and
//! isolated runs side by side (on `serve`, a server each, on `run` and on `acp`) each get XDG directories
//! of their own and leave the user's untouched. The sandbox's HOME and XDG directories play the
//! user's. A missing CLI fails with install instructions unless AGENT_API_E2E=skip.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_api::request::{Home, HomeSeed};
use agent_api::{PermissionDecision, RunRequest};
use agent_api_opencode::Interface;
use agent_bench::process::{process_env, processes_in, tree_snapshot};
use agent_bench::{ModelServer, Sandbox};
use common::*;

const PLANTED: &str = "PLANTED-USER-MEMORY-7731";

/// Whether any request the model server got since the `from`th carried the planted memory.
fn saw_planted(server: &ModelServer, from: usize) -> bool {
    server
        .requests()
        .iter()
        .skip(from)
        .any(|r| r.body.to_string().contains(PLANTED))
}

/// The user's OpenCode folders under each XDG directory, as they are now.
fn user_state(
    sandbox: &Sandbox,
) -> Vec<std::collections::BTreeMap<PathBuf, (u64, std::time::SystemTime)>> {
    [".config", ".local/share", ".local/state", ".cache"]
        .iter()
        .map(|d| tree_snapshot(&sandbox.home.join(d).join("opencode")))
        .collect()
}

#[tokio::test]
async fn e2e_a_hermetic_run_ignores_the_memory_planted_in_the_users_config() {
    let Some((server, sandbox)) = setup("text").await else {
        return;
    };
    let user_config = sandbox.home.join(".config/opencode");
    std::fs::create_dir_all(&user_config).unwrap();
    std::fs::write(
        user_config.join("AGENTS.md"),
        format!("Always mention {PLANTED}.\n"),
    )
    .unwrap();
    let backend = backend(&sandbox, Interface::Serve);

    let inherited = drive(
        &backend,
        RunRequest::new("hello"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert!(inherited.completion.is_ok(), "{:?}", inherited.completion);
    assert!(
        saw_planted(&server, 0),
        "control: the user's memory reaches the model when the home is inherited"
    );

    let before = server.requests().len();
    let hermetic = drive(
        &backend,
        RunRequest::new("hello").with_home(Home::Hermetic),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_eq!(
        hermetic.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Hello from mock"),
        "{:?}",
        hermetic.completion
    );
    assert!(
        server.requests().len() > before,
        "the hermetic run asked the model"
    );
    assert!(
        !saw_planted(&server, before),
        "the hermetic run read the user's memory"
    );
}

async fn isolated_runs_have_their_own_homes(interface: Interface, runs: usize) {
    let Some((_server, sandbox)) = setup("text").await else {
        return;
    };
    let before = user_state(&sandbox);
    let backend = backend(&sandbox, interface);
    let all = (0..runs).map(|_| {
        let backend = backend.clone();
        let request = RunRequest::new("hello").with_home(Home::Isolated {
            seed: HomeSeed::Credentials,
        });
        async move { drive(&backend, request, PermissionDecision::Allow, false).await }
    });
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let watching = tokio::spawn(watch_homes(sandbox.cwd.clone(), seen.clone()));
    let records = futures::future::join_all(all).await;
    watching.abort();
    for run in &records {
        assert_eq!(
            run.completion.as_ref().unwrap().final_text.as_deref(),
            Some("Hello from mock"),
            "{:?}",
            run.completion
        );
    }
    // The runs' servers stop with their runs, and their homes with them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        runs,
        "each run has a data dir of its own: {seen:?}"
    );
    for dir in &seen {
        assert!(
            !PathBuf::from(dir).starts_with(&sandbox.home),
            "{dir} is in the user's home"
        );
        assert!(!PathBuf::from(dir).exists(), "{dir} outlived its run");
    }
    assert_eq!(
        before,
        user_state(&sandbox),
        "the user's OpenCode folders were written"
    );
}

/// Adds the `XDG_DATA_HOME`s of the agents running in `cwd` to `seen`, until aborted.
async fn watch_homes(cwd: PathBuf, seen: Arc<Mutex<BTreeSet<String>>>) {
    loop {
        let now: Vec<String> = processes_in(&cwd)
            .into_iter()
            .filter_map(|pid| process_env(pid, "XDG_DATA_HOME"))
            .collect();
        seen.lock().unwrap().extend(now);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn e2e_isolated_serve_runs_side_by_side_each_have_their_own_home_and_leave_the_users_alone() {
    isolated_runs_have_their_own_homes(Interface::Serve, 4).await;
}

#[tokio::test]
async fn e2e_isolated_run_interface_runs_side_by_side_each_have_their_own_home_and_leave_the_users_alone(
) {
    isolated_runs_have_their_own_homes(Interface::Run, 4).await;
}

#[tokio::test]
async fn e2e_isolated_acp_runs_side_by_side_each_have_their_own_home_and_leave_the_users_alone() {
    isolated_runs_have_their_own_homes(Interface::Acp, 2).await;
}
