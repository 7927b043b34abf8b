//! Warm sessions on `opencode serve` (`spec/run-protocol.md` §8) and abort on drop, end to end:
//! the real pinned opencode 1.18.33 on the bench's scripted model server. The session runs on
//! the backend's server (one process group, read from `running_servers`), so "no process left"
//! is checked once the session is closed and the backend dropped.

mod common;

use std::time::{Duration, Instant};

use agent_api::{AgentBackend, AgentError, RunRequest, SessionSelector};
use agent_api_conformance::session::{assert_session_conformant, SessionRecord};
use agent_api_conformance::Answers;
use agent_api_opencode::{Interface, OpenCodeBackend};
use common::*;
use futures::StreamExt;

fn template() -> RunRequest {
    RunRequest::new("").with_timeout(Duration::from_secs(120))
}

fn group_alive(pgid: i32) -> bool {
    // Signal 0 to the group only asks whether any member exists.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

fn server_group(backend: &OpenCodeBackend) -> i32 {
    let servers = backend.running_servers();
    assert_eq!(servers.len(), 1, "one server for the session");
    servers[0].pgid
}

fn final_text(record: &SessionRecord, turn: usize) -> String {
    record.turns[turn]
        .completion
        .as_ref()
        .unwrap()
        .final_text
        .clone()
        .unwrap_or_default()
}

/// Waits up to 5 s for the process group to be gone.
async fn group_gone(pgid: i32) -> bool {
    for _ in 0..50 {
        if !group_alive(pgid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    !group_alive(pgid)
}

#[tokio::test]
async fn session_three_turns_on_one_server_and_session_the_model_sees_one_two_three_user_turns() {
    let Some((_server, sandbox)) = setup("echo").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let mut session = backend.open_session(template()).await.unwrap();
    assert!(session.is_warm());
    let pgid = server_group(&backend);
    let mut record = SessionRecord::default();
    for (n, prompt) in ["first", "second", "third"].into_iter().enumerate() {
        assert!(
            record.turn(&mut session, prompt).await.is_ok(),
            "turn {}: {:?}",
            n + 1,
            record.turns[n].completion
        );
        let text = final_text(&record, n);
        assert!(
            text.starts_with(&format!("echo: user_turns={} ", n + 1)),
            "turn {}: {text}",
            n + 1
        );
        assert!(text.ends_with(&format!("last={prompt}")), "{text}");
        assert_eq!(
            server_group(&backend),
            pgid,
            "one server for the whole session"
        );
    }
    let id = session
        .native_session_id()
        .expect("the OpenCode session id");
    assert!(record.turns.iter().all(|t| t
        .completion
        .as_ref()
        .unwrap()
        .native_session_id
        .as_deref()
        == Some(id.as_str())));
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
    drop(backend);
    assert!(group_gone(pgid).await, "no opencode process left");
    wait_until_gone(&sandbox.cwd).await;
}

#[tokio::test]
async fn session_a_cancelled_second_turn_then_a_good_third() {
    let Some((_server, sandbox)) = setup("echo").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let mut session = backend.open_session(template()).await.unwrap();
    let mut record = SessionRecord::default();
    assert!(
        record.turn(&mut session, "first").await.is_ok(),
        "{:?}",
        record.turns[0].completion
    );
    let second = session.send("second").await.unwrap();
    second.control().cancel();
    let completion = record.record(second, Answers::none()).await;
    assert!(
        matches!(completion, Err(AgentError::Cancelled)),
        "{completion:?}"
    );
    assert!(
        record.turn(&mut session, "third").await.is_ok(),
        "{:?}",
        record.turns[2].completion
    );
    assert!(
        final_text(&record, 2).ends_with("last=third"),
        "{}",
        final_text(&record, 2)
    );
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
    let pgid = server_group(&backend);
    drop(backend);
    assert!(group_gone(pgid).await, "no opencode process left");
}

#[tokio::test]
async fn session_server_killed_between_turns_closes_the_session() {
    let Some((_server, sandbox)) = setup("echo").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let mut session = backend.open_session(template()).await.unwrap();
    let mut record = SessionRecord::default();
    assert!(
        record.turn(&mut session, "first").await.is_ok(),
        "{:?}",
        record.turns[0].completion
    );
    let pgid = server_group(&backend);
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    // The server's event stream ends first (the pool then lists it no more); its sessions end with it.
    for _ in 0..50 {
        if backend.running_servers().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        backend.running_servers().is_empty(),
        "the dead server is noticed"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let next = session.send("second").await.map(|_| ());
    assert!(matches!(next, Err(AgentError::SessionClosed)), "{next:?}");
    assert!(started.elapsed() < Duration::from_secs(1));
    record.trailing = session.close().await.unwrap();
    assert_eq!(
        record.trailing.last().map(|e| e.type_name()),
        Some("session.ended")
    );
    assert_session_conformant(&record);
    drop(backend);
    assert!(group_gone(pgid).await);
}

#[tokio::test]
async fn session_dropped_mid_turn_leaves_no_process() {
    let Some((_server, sandbox)) = setup("slow_text").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let mut session = backend.open_session(template()).await.unwrap();
    let pgid = server_group(&backend);
    let turn = session.send("talk slowly").await.unwrap();
    let (mut events, _completion) = turn.into_universal();
    while let Some(event) = events.next().await {
        if event.type_name() == "item.delta" && !event.synthetic {
            break;
        }
    }
    drop(session);
    drop(backend);
    assert!(group_gone(pgid).await, "no opencode process left");
    wait_until_gone(&sandbox.cwd).await;
}

/// Issue 12: a `serve` run dropped mid-turn is aborted on the shared server (which outlives the
/// run): the next turn on the same OpenCode session starts at once instead of queueing behind
/// the abandoned 30-second one. Then no process is left once the backend goes.
#[tokio::test]
async fn serve_run_dropped_mid_turn_is_aborted_and_leaves_no_process() {
    let Some((_server, sandbox)) = setup("slow_text").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let handle = backend
        .run(RunRequest::new("talk slowly").with_timeout(Duration::from_secs(120)))
        .await
        .unwrap();
    let pgid = server_group(&backend);
    let (mut events, _completion) = handle.into_universal();
    let mut id = None;
    while let Some(event) = events.next().await {
        id = id.or_else(|| event.native_session_id.as_deref().map(str::to_string));
        if event.type_name() == "item.delta" && !event.synthetic {
            break;
        }
    }
    drop(events);
    let id = id.expect("the run's OpenCode session");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        group_alive(pgid),
        "the shared server outlives the dropped run"
    );
    let started = Instant::now();
    let next = backend
        .run(RunRequest::new("again").with_session(SessionSelector::Resume(id.into())))
        .await
        .unwrap();
    let control = next.control();
    let (mut events, completion) = next.into_universal();
    while let Some(event) = events.next().await {
        if event.type_name() == "item.delta" && !event.synthetic {
            break;
        }
    }
    let waited = started.elapsed();
    control.cancel();
    while events.next().await.is_some() {}
    let _ = completion.await;
    assert!(
        waited < Duration::from_secs(15),
        "the dropped turn was aborted, not left running: {waited:?}"
    );
    drop(backend);
    assert!(group_gone(pgid).await, "no opencode process left");
}

#[tokio::test]
async fn session_opened_from_an_earlier_runs_session_sees_that_turn() {
    let Some((_server, sandbox)) = setup("echo").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let earlier = drive(
        &backend,
        RunRequest::new("first"),
        agent_api::PermissionDecision::Allow,
        false,
    )
    .await;
    let id = earlier
        .completion
        .as_ref()
        .unwrap()
        .native_session_id
        .clone()
        .expect("the run's session id");
    let mut session = backend
        .open_session(template().with_session(SessionSelector::Resume(id.clone().into())))
        .await
        .unwrap();
    let mut record = SessionRecord::default();
    assert!(
        record.turn(&mut session, "second").await.is_ok(),
        "{:?}",
        record.turns[0].completion
    );
    let text = final_text(&record, 0);
    assert!(
        text.starts_with("echo: user_turns=2 ") && text.ends_with("last=second"),
        "{text}"
    );
    assert_eq!(session.native_session_id().as_deref(), Some(id.as_str()));
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
}

/// A warm `serve` session switches to plan mode and back between turns: the next prompt names
/// OpenCode's `plan` agent (the write is denied), then none (its default agent writes the file).
#[tokio::test]
async fn a_warm_serve_session_switches_to_plan_and_back() {
    let Some((_server, sandbox)) = setup("write_edit").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let template = template().with_permissions(agent_api::PermissionPolicy::ApproveAll);
    // The session runs on the backend's server, which outlives it (checked above once dropped).
    agent_api_conformance::session::e2e::switches_to_plan_and_back(
        &backend,
        template,
        &sandbox.cwd,
        &Vec::new,
    )
    .await;
}

/// The processes the steered turn may leave behind, checked while the backend's server still
/// runs: everything in the sandbox's directory but the pooled servers themselves (a shell
/// command the turn ran, `sleep 4`, is one).
fn left_beside_servers<'a>(
    backend: &'a OpenCodeBackend,
    sandbox: &'a agent_bench::Sandbox,
) -> impl Fn() -> Vec<i32> + 'a {
    move || {
        let servers: Vec<i32> = backend.running_servers().iter().map(|s| s.pgid).collect();
        agent_bench::process::processes_in(&sandbox.cwd)
            .into_iter()
            .filter(|pid| !servers.contains(pid))
            .collect()
    }
}

fn approving(request: RunRequest) -> RunRequest {
    request.with_permissions(agent_api::PermissionPolicy::ApproveAll)
}

/// `prompt_async` while the session is busy steers (not queues): the model's request after the
/// command holds the message, the turn ends once, and its answer echoes it.
#[tokio::test]
async fn e2e_steer_a_turn_mid_command_reaches_the_model_in_the_same_turn_and_late_steer_is_typed() {
    let Some((server, sandbox)) = setup("steer").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let took = agent_api_conformance::steer::steered_turn_reads_the_message_in_the_same_turn(
        &backend,
        approving(template()),
        &server,
        &left_beside_servers(&backend, &sandbox),
    )
    .await;
    eprintln!("steer to acknowledgement: {took:?}");
    let pgid = server_group(&backend);
    drop(backend);
    assert!(group_gone(pgid).await, "no opencode process left");
}

#[tokio::test]
async fn e2e_steer_then_cancel_leaves_no_process() {
    let Some((_server, sandbox)) = setup("steer").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let request = approving(
        RunRequest::new(agent_api_conformance::steer::PROMPT)
            .with_timeout(Duration::from_secs(120)),
    );
    agent_api_conformance::steer::steered_run_cancelled_leaves_no_process(
        &backend,
        request,
        &left_beside_servers(&backend, &sandbox),
    )
    .await;
    let pgid = server_group(&backend);
    drop(backend);
    assert!(group_gone(pgid).await, "no opencode process left");
}

#[tokio::test]
async fn e2e_steer_at_the_last_step_keeps_the_session_in_step() {
    let Some((_server, sandbox)) = setup("steer").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    agent_api_conformance::steer::steered_at_the_answer_the_session_stays_in_step(
        &backend,
        approving(template()),
        &left_beside_servers(&backend, &sandbox),
    )
    .await;
}

/// `opencode run` is one-way: a steer is refused, typed, and the run goes on untouched.
#[tokio::test]
async fn e2e_steer_on_opencode_run_is_refused_naming_the_capability() {
    let Some((_server, sandbox)) = setup("steer").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Run);
    let handle = backend
        .run(
            approving(RunRequest::new(agent_api_conformance::steer::PROMPT))
                .with_timeout(Duration::from_secs(120)),
        )
        .await
        .expect("run starts");
    let refused = handle.control().steer("Also say banana.").await;
    assert!(
        matches!(&refused, Err(AgentError::UnsupportedCapability { capability, .. }) if capability == "agent_api.control.steer"),
        "{refused:?}"
    );
    let (_events, completion) = handle.collect_wrapper().await;
    assert!(completion.is_ok(), "the run goes on: {completion:?}");
}

/// A session's snapshot (OpenCode's own export), taken after its first turn, goes on in another,
/// empty home and working directory: a warm `serve` session, and one-shot `opencode run` runs.
/// OpenCode's import re-keys the session to the importing directory.
#[tokio::test]
async fn e2e_session_snapshot_goes_on_in_an_empty_home_on_serve_and_run() {
    let Some((server, _)) = setup("echo").await else {
        return;
    };
    let pair = || {
        (
            agent_bench::Sandbox::new(agent_bench::Cli::OpenCode, &server, "echo").unwrap(),
            agent_bench::Sandbox::new(agent_bench::Cli::OpenCode, &server, "echo").unwrap(),
        )
    };
    let (here, there) = pair();
    assert_ne!(here.cwd, there.cwd);
    let snapshot = agent_api_conformance::snapshot::goes_on_in_an_empty_home(
        std::sync::Arc::new(backend(&here, Interface::Serve)),
        std::sync::Arc::new(backend(&there, Interface::Serve)),
        template(),
        0,
    )
    .await;
    let paths: Vec<&str> = snapshot.files.iter().map(|f| f.path.as_str()).collect();
    let id = &snapshot.native_session_id;
    assert_eq!(
        paths,
        [
            agent_api_opencode::snapshot::record_path(id),
            agent_api_opencode::snapshot::messages_path(id)
        ]
    );
    // OpenCode's own store of the other home lists the session in its working directory.
    let listed = agent_api::history::SessionStore::list_sessions(
        &*backend(&there, Interface::Serve).session_store().unwrap(),
        &agent_api::history::SessionQuery::default(),
    )
    .await
    .unwrap();
    let moved = listed
        .iter()
        .find(|s| &s.id == id)
        .expect("the session is in the other home");
    assert_eq!(moved.cwd.as_deref(), Some(there.cwd.as_path()));
    // The turn-1 snapshot again, into the home where the session went on to turn 2: newest wins.
    let again = backend(&there, Interface::Serve)
        .import_snapshot(&template(), &snapshot)
        .await
        .unwrap();
    assert_eq!(
        again.kept_newer,
        [format!("OPENCODE_EXPORT/{id}")],
        "{again:?}"
    );
    assert!(again.written.is_empty(), "{again:?}");

    let (here, there) = pair();
    agent_api_conformance::snapshot::a_run_goes_on_in_an_empty_home(
        std::sync::Arc::new(backend(&here, Interface::Run)),
        std::sync::Arc::new(backend(&there, Interface::Run)),
        template(),
        0,
    )
    .await;
}
