//! Sessions on the scripted agent (`spec/run-protocol.md` §8): turns on one live agent, one
//! transcript, delimiters, one turn at a time, cancel, a dying agent, close and drop.

use std::time::Duration;

use agent_api::{AgentError, AgentKind, Gateway, RunRequest};
use agent_api_conformance::session::{assert_session_conformant, SessionRecord};
use agent_api_conformance::Answers;
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};

fn gateway() -> (Gateway, AgentKind) {
    let mut gateway = Gateway::new();
    gateway
        .register(std::sync::Arc::new(ScriptedBackend::new()))
        .unwrap();
    (gateway, agent_api_scripted::KIND)
}

fn template(scenario: &str, delay_ms: u64) -> RunRequest {
    RunRequest::new("").with_options(&ScriptedOptions::scenario(scenario).delay_ms(delay_ms))
}

#[tokio::test]
async fn three_turns_make_one_transcript_with_delimited_turns_and_their_own_answers() {
    let (gateway, kind) = gateway();
    let mut session = gateway
        .open_session(&kind, template("text", 0))
        .await
        .unwrap();
    assert!(session.is_warm());
    let mut record = SessionRecord::default();
    for (n, prompt) in ["one", "two", "three"].into_iter().enumerate() {
        let completion = record
            .turn(&mut session, prompt)
            .await
            .as_ref()
            .unwrap()
            .clone();
        let want = match n {
            0 => "You said: one".to_string(),
            n => format!("You said: {prompt} (turn {} of this session)", n + 1),
        };
        assert_eq!(
            completion.final_text.as_deref(),
            Some(want.as_str()),
            "each turn's final text is its own"
        );
        assert_eq!(completion.native_session_id, session.native_session_id());
    }
    assert!(record.turns[1]
        .universal
        .iter()
        .all(|e| e.type_name() != "session.started"));
    record.trailing = session.close().await.unwrap();
    assert_eq!(
        record.trailing.last().map(|e| e.type_name()),
        Some("session.ended")
    );
    assert_session_conformant(&record);
}

#[tokio::test]
async fn a_turn_in_progress_refuses_the_next_send_and_a_cancelled_turn_leaves_the_session_usable() {
    let (gateway, kind) = gateway();
    let mut session = gateway
        .open_session(&kind, template("slow", 5))
        .await
        .unwrap();
    let mut record = SessionRecord::default();
    assert!(record.turn(&mut session, "first").await.is_ok());

    let second = session.send("second").await.unwrap();
    assert!(matches!(
        session.send("too early").await,
        Err(AgentError::TurnInProgress)
    ));
    let control = second.control();
    let completion = record.record(second, Answers::cancel_at_delta()).await;
    assert!(
        matches!(completion, Err(AgentError::Cancelled)),
        "{completion:?}"
    );

    let third = record
        .turn(&mut session, "third")
        .await
        .as_ref()
        .unwrap()
        .clone();
    assert!(third.final_text.unwrap().starts_with("word0 word1"));
    // The second turn's control only ever cancelled the second turn.
    control.cancel();
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
}

#[tokio::test]
async fn a_dying_agent_fails_its_turn_once_and_every_later_send_is_session_closed() {
    let (gateway, kind) = gateway();
    let mut session = gateway
        .open_session(&kind, template("crash", 0))
        .await
        .unwrap();
    let mut record = SessionRecord::default();
    let completion = record.turn(&mut session, "hello").await;
    assert!(
        matches!(completion, Err(AgentError::ProcessExited { .. })),
        "{completion:?}"
    );
    let last = record.turns[0].universal.last().unwrap();
    assert_eq!(last.type_name(), "session.ended");
    let started = std::time::Instant::now();
    assert!(matches!(
        session.send("again").await,
        Err(AgentError::SessionClosed)
    ));
    assert!(matches!(
        session.send("and again").await,
        Err(AgentError::SessionClosed)
    ));
    assert!(started.elapsed() < Duration::from_secs(1));
    record.trailing = session.close().await.unwrap();
    assert!(
        record.trailing.is_empty(),
        "session.ended came with the failed turn"
    );
    assert_session_conformant(&record);
}

#[tokio::test]
async fn a_turn_times_out_on_its_own_clock_and_the_session_goes_on() {
    let (gateway, kind) = gateway();
    let request = template("slow", 20).with_timeout(Duration::from_millis(300));
    let mut session = gateway.open_session(&kind, request).await.unwrap();
    let mut record = SessionRecord::default();
    assert!(matches!(
        record.turn(&mut session, "slowly").await,
        Err(AgentError::Timeout { .. })
    ));
    // The interrupted agent ended the turn: the session takes the next one, on a clock of its own.
    assert!(matches!(
        record.turn(&mut session, "slowly again").await,
        Err(AgentError::Timeout { .. })
    ));
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
}

#[tokio::test]
async fn dropping_the_session_mid_turn_ends_the_turn_and_dropping_it_idle_is_quiet() {
    let (gateway, kind) = gateway();
    let mut session = gateway
        .open_session(&kind, template("slow", 20))
        .await
        .unwrap();
    let turn = session.send("hello").await.unwrap();
    drop(session);
    let (events, completion) =
        tokio::time::timeout(Duration::from_secs(5), turn.collect_universal())
            .await
            .expect("the turn ends");
    assert!(completion.is_err());
    assert_eq!(events.last().map(|e| e.type_name()), Some("session.ended"));
}

#[tokio::test]
async fn an_unknown_backend_and_an_empty_prompt_are_refused() {
    let (gateway, kind) = gateway();
    let error = gateway
        .open_session(&AgentKind::from_static("nope"), template("text", 0))
        .await
        .unwrap_err();
    assert!(matches!(error, AgentError::UnknownBackend { .. }));
    let mut session = gateway
        .open_session(&kind, template("text", 0))
        .await
        .unwrap();
    assert!(matches!(
        session.send("  ").await,
        Err(AgentError::InvalidRequest { .. })
    ));
}

#[tokio::test]
async fn a_session_resuming_per_turn_makes_the_same_transcript_from_one_run_per_turn() {
    let backend = std::sync::Arc::new(ScriptedBackend::new());
    let mut session = agent_api::Session::resuming(backend, template("slow", 2));
    assert!(!session.is_warm());
    assert_eq!(session.process_id(), None);
    let mut record = SessionRecord::default();
    assert!(record.turn(&mut session, "one").await.is_ok());
    let first_id = session
        .native_session_id()
        .expect("the first run reports its session");

    let second = session.send("two").await.unwrap();
    assert!(matches!(
        session.send("too early").await,
        Err(AgentError::TurnInProgress)
    ));
    let completion = record.record(second, Answers::cancel_at_delta()).await;
    assert!(
        matches!(completion, Err(AgentError::Cancelled)),
        "{completion:?}"
    );

    let third = record
        .turn(&mut session, "three")
        .await
        .as_ref()
        .unwrap()
        .clone();
    assert_eq!(
        third.native_session_id.as_deref(),
        Some(first_id.as_str()),
        "each turn resumes the previous one"
    );
    assert!(third.final_text.unwrap().starts_with("word0"));
    record.trailing = session.close().await.unwrap();
    let items: Vec<String> = record
        .universal()
        .iter()
        .filter_map(|e| match &e.body {
            agent_api::universal::UniversalEventBody::ItemStarted(d) => {
                Some(d.item.item_id.clone())
            }
            _ => None,
        })
        .collect();
    let unique: std::collections::HashSet<&String> = items.iter().collect();
    assert_eq!(
        unique.len(),
        items.len(),
        "item ids are unique across turns"
    );
    assert_session_conformant(&record);
}
