//! Warm sessions of the generic `acp` backend on the fake ACP agent (`fake_acp_agent`), whose
//! default answer counts the prompts its process took like the bench's `echo` model: the same
//! checks as the real CLIs' end-to-end session tests, plus a cancel that the agent honours
//! with the `cancelled` stop reason.

use std::time::{Duration, Instant};

use agent_api::{AgentBackend, AgentError, RunRequest};
use agent_api_acp::{AcpBackend, AcpConfig, AcpOptions};
use agent_api_conformance::session::{assert_session_conformant, e2e, SessionRecord};
use agent_api_conformance::Answers;
use agent_bench::process::processes_in;

fn backend() -> AcpBackend {
    AcpBackend::generic(AcpConfig::default())
}

fn template(cwd: &std::path::Path) -> RunRequest {
    let options = AcpOptions::default().command([env!("CARGO_BIN_EXE_fake_acp_agent")]);
    RunRequest::new("").with_working_dir(cwd).with_options(&options).with_timeout(Duration::from_secs(30))
}

#[tokio::test]
async fn three_turns_on_one_agent_process_see_one_two_three_prompts() {
    let dir = tempfile::tempdir().unwrap();
    e2e::three_turns_on_one_process(&backend(), template(dir.path()), &|| processes_in(dir.path())).await;
}

#[tokio::test]
async fn a_cancelled_second_turn_then_a_good_third() {
    let dir = tempfile::tempdir().unwrap();
    e2e::cancelled_second_turn_then_a_good_third(&backend(), template(dir.path()), &|| processes_in(dir.path())).await;
}

#[tokio::test]
async fn the_agent_killed_between_turns_closes_the_session() {
    let dir = tempfile::tempdir().unwrap();
    e2e::killed_between_turns(&backend(), template(dir.path()), &|| processes_in(dir.path())).await;
}

#[tokio::test]
async fn a_dropped_session_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    e2e::dropped_leaves_no_process(&backend(), template(dir.path()), &|| processes_in(dir.path())).await;
}

#[tokio::test]
async fn cancel_mid_turn_sends_session_cancel_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = backend().open_session(template(dir.path())).await.unwrap();
    assert!(session.is_warm());
    let pid = session.process_id().unwrap();
    let mut record = SessionRecord::default();
    let slow = session.send("slow").await.unwrap();
    let control = slow.control();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        control.cancel();
    });
    let started = Instant::now();
    let completion = record.record(slow, Answers::none()).await;
    assert!(matches!(completion, Err(AgentError::Cancelled)), "{completion:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "the agent stopped at session/cancel, before the grace period");
    let next = record.turn(&mut session, "after").await.as_ref().unwrap().final_text.clone().unwrap_or_default();
    assert_eq!(next, "echo: user_turns=2 messages=3 last=after");
    assert_eq!(session.process_id(), Some(pid));
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
    assert!(processes_in(dir.path()).is_empty());
}

#[tokio::test]
async fn a_failed_turn_leaves_the_session_usable() {
    let dir = tempfile::tempdir().unwrap();
    let mut session = backend().open_session(template(dir.path())).await.unwrap();
    let mut record = SessionRecord::default();
    let refused = record.turn(&mut session, "refuse").await;
    assert!(matches!(refused, Err(AgentError::AgentFailed { .. })), "{refused:?}");
    let next = record.turn(&mut session, "again").await.as_ref().unwrap().final_text.clone().unwrap_or_default();
    assert_eq!(next, "echo: user_turns=2 messages=3 last=again");
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
}
