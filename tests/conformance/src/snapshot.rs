//! The end-to-end snapshot check every backend advertising `agent_api.session.snapshot` runs on
//! its real CLI and the bench's `echo` model (`spec/run-protocol.md` §8): a session's first turn
//! in one home, its snapshot as bytes, then the session opened from them in another, empty home
//! (another working directory too) answers with two user turns seen.

use std::sync::Arc;

use agent_api::{AgentBackend, Gateway, RunRequest, SessionSnapshot};

async fn answer(session: &mut agent_api::Session, prompt: &str) -> String {
    let (_, completion) = session
        .send(prompt)
        .await
        .unwrap_or_else(|e| panic!("sending {prompt:?}: {e}"))
        .collect_wrapper()
        .await;
    completion
        .unwrap_or_else(|e| panic!("turn {prompt:?}: {e}"))
        .final_text
        .unwrap_or_default()
}

/// `here` runs the first turn in its home; `there` (the same agent with another, empty home and
/// working directory) goes on from the snapshot. `context` is the user turns the agent adds to
/// every conversation of its own (Qwen Code's environment message). Returns the snapshot.
pub async fn goes_on_in_an_empty_home(
    here: Arc<dyn AgentBackend>,
    there: Arc<dyn AgentBackend>,
    template: RunRequest,
    context: usize,
) -> SessionSnapshot {
    let kind = here.info().kind.clone();
    let mut first_gateway = Gateway::new();
    first_gateway.register(here).unwrap();
    let mut second_gateway = Gateway::new();
    second_gateway.register(there).unwrap();

    let mut first = first_gateway
        .open_session(&kind, template.clone())
        .await
        .unwrap();
    let said = answer(&mut first, "My name is Ada").await;
    assert!(
        said.contains(&format!("user_turns={}", context + 1)),
        "turn 1: {said}"
    );
    let bytes = first
        .snapshot()
        .await
        .unwrap_or_else(|e| panic!("snapshot: {e}"))
        .to_bytes()
        .unwrap();
    first.close().await.unwrap();

    let snapshot = SessionSnapshot::from_bytes(&bytes).unwrap();
    assert!(snapshot.is_native(), "{:?}", snapshot.continuity);
    let mut again = second_gateway
        .open_session(&kind, template.with_snapshot(snapshot.clone()))
        .await
        .unwrap_or_else(|e| panic!("opening from the snapshot: {e}"));
    let said = answer(&mut again, "What is my name?").await;
    assert!(
        said.contains(&format!("user_turns={}", context + 2)),
        "the session did not go on natively in the other home: {said}"
    );
    again.close().await.unwrap();
    snapshot
}

/// [`goes_on_in_an_empty_home`] for one-shot runs: the first run's session exported from `here`
/// ([`AgentBackend::export_snapshot`]), the next run started from it on `there`.
pub async fn a_run_goes_on_in_an_empty_home(
    here: Arc<dyn AgentBackend>,
    there: Arc<dyn AgentBackend>,
    template: RunRequest,
    context: usize,
) -> SessionSnapshot {
    let kind = here.info().kind.clone();
    let mut first = template.clone();
    first.prompt = "My name is Ada".into();
    let (_, completion) = here.run(first).await.unwrap().collect_wrapper().await;
    let completion = completion.unwrap_or_else(|e| panic!("run 1: {e}"));
    let said = completion.final_text.clone().unwrap_or_default();
    assert!(
        said.contains(&format!("user_turns={}", context + 1)),
        "run 1: {said}"
    );
    let session = completion.session.clone().expect("the run's session");
    let bytes = here
        .export_snapshot(&template, &session)
        .await
        .unwrap_or_else(|e| panic!("snapshot: {e}"))
        .to_bytes()
        .unwrap();

    let snapshot = SessionSnapshot::from_bytes(&bytes).unwrap();
    let mut gateway = Gateway::new();
    gateway.register(there).unwrap();
    let mut next = template.with_snapshot(snapshot.clone());
    next.prompt = "What is my name?".into();
    let (_, completion) = gateway
        .run(&kind, next)
        .await
        .unwrap_or_else(|e| panic!("run 2 from the snapshot: {e}"))
        .collect_wrapper()
        .await;
    let said = completion
        .unwrap_or_else(|e| panic!("run 2: {e}"))
        .final_text
        .unwrap_or_default();
    assert!(
        said.contains(&format!("user_turns={}", context + 2)),
        "the run did not go on natively in the other home: {said}"
    );
    snapshot
}
