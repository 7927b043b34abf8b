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
    AcpBackend::new(AcpConfig::default())
}

fn request(prompt: &str, cwd: &std::path::Path) -> RunRequest {
    let options = AcpOptions::default().command([env!("CARGO_BIN_EXE_fake_acp_agent")]);
    RunRequest::new(prompt)
        .with_working_dir(cwd)
        .with_options(&options)
        .with_timeout(Duration::from_secs(30))
}

fn template(cwd: &std::path::Path) -> RunRequest {
    request("", cwd)
}

#[tokio::test]
async fn three_turns_on_one_agent_process_see_one_two_three_prompts() {
    let dir = tempfile::tempdir().unwrap();
    e2e::three_turns_on_one_process(&backend(), template(dir.path()), &|| {
        processes_in(dir.path())
    })
    .await;
}

#[tokio::test]
async fn a_cancelled_second_turn_then_a_good_third() {
    let dir = tempfile::tempdir().unwrap();
    e2e::cancelled_second_turn_then_a_good_third(&backend(), template(dir.path()), &|| {
        processes_in(dir.path())
    })
    .await;
}

#[tokio::test]
async fn the_agent_killed_between_turns_closes_the_session() {
    let dir = tempfile::tempdir().unwrap();
    e2e::killed_between_turns(&backend(), template(dir.path()), &|| {
        processes_in(dir.path())
    })
    .await;
}

#[tokio::test]
async fn a_dropped_session_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    e2e::dropped_leaves_no_process(&backend(), template(dir.path()), &|| {
        processes_in(dir.path())
    })
    .await;
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
    assert!(
        matches!(completion, Err(AgentError::Cancelled)),
        "{completion:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the agent stopped at session/cancel, before the grace period"
    );
    let next = record
        .turn(&mut session, "after")
        .await
        .as_ref()
        .unwrap()
        .final_text
        .clone()
        .unwrap_or_default();
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
    assert!(
        matches!(refused, Err(AgentError::AgentFailed { .. })),
        "{refused:?}"
    );
    let next = record
        .turn(&mut session, "again")
        .await
        .as_ref()
        .unwrap()
        .final_text
        .clone()
        .unwrap_or_default();
    assert_eq!(next, "echo: user_turns=2 messages=3 last=again");
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
}

/// The `history` status details of `events`.
fn history(events: &[agent_api::UniversalEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(agent_api_conformance::session::status_of)
        .filter(|(label, _)| *label == "history")
        .map(|(_, detail)| detail.unwrap_or_default().to_string())
        .collect()
}

const FIRST_EXCHANGE: [&str; 2] = [
    "user: first",
    "assistant: echo: user_turns=1 messages=1 last=first",
];

async fn first_run(cwd: &std::path::Path) -> String {
    let run =
        agent_api_conformance::record(backend().run(request("first", cwd)).await.unwrap()).await;
    run.completion
        .unwrap()
        .native_session_id
        .expect("a session id")
}

#[tokio::test]
async fn a_resumed_run_loads_the_session_and_its_replay_is_history_not_output() {
    let dir = tempfile::tempdir().unwrap();
    let id = first_run(dir.path()).await;
    let request =
        request("second", dir.path()).with_session(agent_api::SessionSelector::Resume(id.into()));
    let run = agent_api_conformance::record(backend().run(request).await.unwrap()).await;
    agent_api_conformance::assert_conformant(&run);
    let answer = "echo: user_turns=2 messages=3 last=second";
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some(answer)
    );
    assert_eq!(history(&run.universal), FIRST_EXCHANGE);
    assert_eq!(
        run.assistant_messages(),
        [answer],
        "the replayed answer is no new output"
    );
}

#[tokio::test]
async fn a_warm_session_opened_on_a_native_id_replays_the_history_inside_its_first_turn() {
    let dir = tempfile::tempdir().unwrap();
    let id = first_run(dir.path()).await;
    let template =
        template(dir.path()).with_session(agent_api::SessionSelector::Resume(id.clone().into()));
    let mut session = backend().open_session(template).await.unwrap();
    let mut record = SessionRecord::default();
    for (n, prompt) in ["second", "third"].into_iter().enumerate() {
        let done = record.turn(&mut session, prompt).await.as_ref().unwrap();
        let expected = format!(
            "echo: user_turns={} messages={} last={prompt}",
            n + 2,
            2 * n + 3
        );
        assert_eq!(done.final_text.as_deref(), Some(expected.as_str()));
    }
    assert_eq!(history(&record.turns[0].universal), FIRST_EXCHANGE);
    assert!(history(&record.turns[1].universal).is_empty());
    assert_eq!(session.native_session_id(), Some(id));
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
}

#[tokio::test]
async fn loading_an_unknown_session_is_session_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let request =
        request("hi", dir.path()).with_session(agent_api::SessionSelector::Resume("nope".into()));
    let run = agent_api_conformance::record(backend().run(request).await.unwrap()).await;
    assert!(
        matches!(&run.completion, Err(AgentError::SessionNotFound { id }) if id == "nope"),
        "{:?}",
        run.completion
    );
}
