//! One `opencode serve` for many runs, end to end with the real pinned opencode 1.18.33: the
//! server refuses requests without the backend's credentials, concurrent runs share it without
//! mixing their events, it stops when the backend is dropped, and its death ends every run on it with one
//! terminal error while the next run starts a fresh one.

mod common;

use std::time::Duration;

use agent_api::kit::http::HttpClient;
use agent_api::{AgentBackend, PermissionDecision, RunRequest};
use agent_api_conformance::{assert_conformant, record};
use agent_api_opencode::Interface;
use agent_bench::process::processes_in;
use common::*;

#[tokio::test]
async fn a_request_without_the_password_is_refused() {
    let Some((_server, sandbox)) = setup("slow_text").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let handle = backend
        .run(RunRequest::new("talk slowly"))
        .await
        .expect("run starts");
    let servers = backend.running_servers();
    assert_eq!(servers.len(), 1);
    let anonymous = HttpClient::new(&servers[0].url).unwrap();
    assert_eq!(
        anonymous.get_json("/global/health").await.unwrap().status,
        401
    );
    assert_eq!(anonymous.get_json("/session").await.unwrap().status, 401);
    handle.control().cancel();
    let run = record(handle).await;
    assert!(run.completion.is_err());
}

#[tokio::test]
async fn concurrent_runs_share_one_server_and_never_mix_events() {
    let Some((_server, sandbox)) = setup("echo").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let prompts = [
        "first prompt alpha",
        "second prompt beta",
        "third prompt gamma",
    ];
    let runs = futures::future::join_all(prompts.iter().map(|p| {
        drive(
            &backend,
            RunRequest::new(*p),
            PermissionDecision::Allow,
            false,
        )
    }))
    .await;
    let mut sessions = std::collections::HashSet::new();
    for (prompt, run) in prompts.iter().zip(&runs) {
        assert_conformant(run);
        let done = run.completion.as_ref().expect("each run completes");
        let text = done.final_text.clone().unwrap_or_default();
        assert!(
            text.ends_with(&format!("last={prompt}")),
            "{prompt}: {text}"
        );
        for other in prompts.iter().filter(|o| *o != prompt) {
            let leaked = run
                .universal
                .iter()
                .any(|e| serde_json::to_string(e).unwrap().contains(other));
            assert!(
                !leaked,
                "{prompt}: an event of the run of {other:?} leaked in"
            );
        }
        sessions.insert(done.native_session_id.clone().unwrap());
    }
    assert_eq!(sessions.len(), prompts.len(), "one session each");
    assert_eq!(
        backend.running_servers().len(),
        1,
        "one server, kept warm for the next run"
    );
    let needle = sandbox.cwd.clone();
    assert!(!processes_in(&needle).is_empty());
    drop(backend);
    wait_until_gone(&needle).await;
}

#[tokio::test]
async fn shutting_down_stops_the_server_after_its_last_run() {
    let Some((_server, sandbox)) = setup("slow_text").await else {
        return;
    };
    let needle = sandbox.cwd.clone();
    let backend = backend(&sandbox, Interface::Serve);
    let run = backend.run(RunRequest::new("talk slowly")).await.unwrap();
    backend.shut_down_servers().await;
    assert!(
        !processes_in(&needle).is_empty(),
        "the run still holds its server"
    );
    run.control().cancel();
    let _ = record(run).await;
    wait_until_gone(&needle).await;
}

#[tokio::test]
async fn later_runs_reuse_the_running_server() {
    let Some((_server, sandbox)) = setup("slow_text").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let first = backend.run(RunRequest::new("talk slowly")).await.unwrap();
    let pgid = backend.running_servers()[0].pgid;
    let second = backend
        .run(RunRequest::new("talk slowly too"))
        .await
        .unwrap();
    assert_eq!(
        backend
            .running_servers()
            .iter()
            .map(|s| s.pgid)
            .collect::<Vec<_>>(),
        [pgid],
        "one server for both"
    );
    first.control().cancel();
    second.control().cancel();
    let (a, b) = futures::future::join(record(first), record(second)).await;
    assert!(a.completion.is_err() && b.completion.is_err());
}

#[tokio::test]
async fn server_death_ends_every_run_with_one_terminal_error_and_the_next_run_starts_afresh() {
    let Some((_server, sandbox)) = setup("slow_text").await else {
        return;
    };
    let needle = sandbox.cwd.clone();
    let backend = backend(&sandbox, Interface::Serve);
    let first = backend.run(RunRequest::new("talk slowly")).await.unwrap();
    let second = backend
        .run(RunRequest::new("talk slowly as well"))
        .await
        .unwrap();
    let dead = backend.running_servers()[0].clone();
    assert!(!processes_in(&needle).is_empty(), "the server runs");
    tokio::time::sleep(Duration::from_secs(1)).await;
    // SAFETY: kill(2) on the process group this backend started; no memory is involved.
    unsafe { libc::kill(-dead.pgid, libc::SIGKILL) };
    let (a, b) = tokio::time::timeout(
        Duration::from_secs(30),
        futures::future::join(record(first), record(second)),
    )
    .await
    .expect("runs end");
    for run in [&a, &b] {
        assert_conformant(run);
        assert!(
            matches!(
                run.completion,
                Err(agent_api::AgentError::ProcessExited { .. })
            ),
            "{:?}",
            run.completion
        );
        assert_eq!(
            run.universal
                .iter()
                .filter(|e| e.is_terminal_error())
                .count(),
            1
        );
    }
    let fresh = backend
        .run(RunRequest::new("talk slowly again"))
        .await
        .unwrap();
    let now = backend.running_servers();
    assert_eq!(now.len(), 1);
    assert_ne!(now[0].pgid, dead.pgid, "a fresh server");
    fresh.control().cancel();
    let _ = record(fresh).await;
}
