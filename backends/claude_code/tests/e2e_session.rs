//! Warm sessions (`spec/run-protocol.md` §8) end to end: the real, pinned Claude Code CLI on the
//! bench's scripted model server, several turns on one process.

use std::path::Path;
use std::time::Duration;

use agent_api::{AgentBackend, AgentError, RunRequest};
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_conformance::session::{assert_session_conformant, SessionRecord};
use agent_api_conformance::Answers;
use agent_bench::{Cli, ModelServer, Sandbox};

async fn bench(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_enabled_or_explain(Cli::ClaudeCode)?;
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::ClaudeCode, &server, scenario).unwrap();
    Some((server, sandbox))
}

fn backend(sandbox: &Sandbox) -> ClaudeCodeBackend {
    let mut config = ClaudeCodeConfig::default().with_binary(&sandbox.program).with_inherit_env(false).with_working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.with_env(key, value);
    }
    ClaudeCodeBackend::new(config)
}

fn template() -> RunRequest {
    RunRequest::new("").with_timeout(Duration::from_secs(120))
}

fn alive(pid: u32) -> bool {
    agent_bench::process::process_alive(pid as i32)
}

/// Waits up to 5 s for every process whose working directory is inside `dir` to be gone.
async fn none_left_in(dir: &Path) -> Vec<i32> {
    for _ in 0..50 {
        let left = agent_bench::process::processes_in(dir);
        if left.is_empty() {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    agent_bench::process::processes_in(dir)
}

fn final_text(record: &SessionRecord, turn: usize) -> String {
    record.turns[turn].completion.as_ref().unwrap().final_text.clone().unwrap_or_default()
}

#[tokio::test]
async fn e2e_session_three_turns_on_one_process_the_model_sees_one_two_three_user_turns() {
    let Some((_server, sandbox)) = bench("echo").await else { return };
    let mut session = backend(&sandbox).open_session(template()).await.unwrap();
    let pid = session.process_id().expect("a spawned CLI");
    let mut record = SessionRecord::default();
    for (n, prompt) in ["first", "second", "third"].into_iter().enumerate() {
        assert!(record.turn(&mut session, prompt).await.is_ok(), "turn {}: {:?}", n + 1, record.turns[n].completion);
        let text = final_text(&record, n);
        assert!(text.starts_with(&format!("echo: user_turns={} ", n + 1)), "turn {}: {text}", n + 1);
        assert!(text.ends_with(&format!("last={prompt}")), "{text}");
        assert_eq!(session.process_id(), Some(pid));
        assert!(alive(pid), "one process for the whole session");
    }
    assert!(session.native_session_id().is_some());
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
    assert_eq!(none_left_in(&sandbox.cwd).await, Vec::<i32>::new());
}

#[tokio::test]
async fn e2e_session_a_cancelled_second_turn_then_a_good_third() {
    let Some((_server, sandbox)) = bench("echo").await else { return };
    let mut session = backend(&sandbox).open_session(template()).await.unwrap();
    let pid = session.process_id().unwrap();
    let mut record = SessionRecord::default();
    assert!(record.turn(&mut session, "first").await.is_ok());
    let second = session.send("second").await.unwrap();
    second.control().cancel();
    let completion = record.record(second, Answers::none()).await;
    assert!(matches!(completion, Err(AgentError::Cancelled)), "{completion:?}");
    assert!(record.turn(&mut session, "third").await.is_ok(), "{:?}", record.turns[2].completion);
    assert!(final_text(&record, 2).ends_with("last=third"), "{}", final_text(&record, 2));
    assert_eq!(session.process_id(), Some(pid));
    assert!(alive(pid), "the interrupt kept the process");
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
    assert_eq!(none_left_in(&sandbox.cwd).await, Vec::<i32>::new());
}

#[tokio::test]
async fn e2e_session_killing_the_agent_between_turns_closes_the_session() {
    let Some((_server, sandbox)) = bench("echo").await else { return };
    let mut session = backend(&sandbox).open_session(template()).await.unwrap();
    let mut record = SessionRecord::default();
    assert!(record.turn(&mut session, "first").await.is_ok());
    let pid = session.process_id().unwrap();
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    assert!(matches!(session.send("second").await, Err(AgentError::SessionClosed)));
    assert!(started.elapsed() < Duration::from_secs(1));
    record.trailing = session.close().await.unwrap();
    assert_eq!(record.trailing.last().map(|e| e.type_name()), Some("session.ended"));
    assert_session_conformant(&record);
    assert_eq!(none_left_in(&sandbox.cwd).await, Vec::<i32>::new());
}

#[tokio::test]
async fn e2e_session_dropped_leaves_no_process() {
    let Some((_server, sandbox)) = bench("echo").await else { return };
    let mut session = backend(&sandbox).open_session(template()).await.unwrap();
    let mut record = SessionRecord::default();
    assert!(record.turn(&mut session, "first").await.is_ok());
    let pid = session.process_id().unwrap();
    drop(session);
    assert_eq!(none_left_in(&sandbox.cwd).await, Vec::<i32>::new());
    assert!(!alive(pid));
}
