//! Session snapshots on the scripted agent (`agent_api.session.snapshot`): a session taken out of
//! one home goes on in another, natively, and a snapshot that is damaged, another agent's or
//! hostile is refused with a typed error before anything is written.

use std::sync::Arc;

use agent_api::snapshot::{Continuity, SnapshotError};
use agent_api::{AgentError, Gateway, RunRequest, SessionSnapshot};
use agent_api_scripted::{ScriptedBackend, HOME_VAR, KIND};

fn gateway() -> Gateway {
    let mut gateway = Gateway::new();
    gateway.register(Arc::new(ScriptedBackend::new())).unwrap();
    gateway
}

fn in_home(home: &std::path::Path) -> RunRequest {
    RunRequest::new("")
        .with_env(HOME_VAR, home.to_string_lossy())
        .with_extension("backend.scripted.delay_ms", 0.into())
}

async fn answer(session: &mut agent_api::Session, prompt: &str) -> String {
    let (_, completion) = session.send(prompt).await.unwrap().collect_wrapper().await;
    completion.unwrap().final_text.unwrap()
}

#[tokio::test]
async fn a_session_snapshotted_in_one_home_goes_on_in_an_empty_other_home() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut first = gateway()
        .open_session(&KIND, in_home(a.path()))
        .await
        .unwrap();
    assert_eq!(
        answer(&mut first, "My name is Ada").await,
        "You said: My name is Ada"
    );
    let bytes = first.snapshot().await.unwrap().to_bytes().unwrap();
    first.close().await.unwrap();

    // Another backend (another host) with an empty home of its own.
    let snapshot = SessionSnapshot::from_bytes(&bytes).unwrap();
    assert_eq!(snapshot.continuity, Continuity::Native);
    let mut again = gateway()
        .open_session(&KIND, in_home(b.path()).with_snapshot(snapshot.clone()))
        .await
        .unwrap();
    assert_eq!(again.restored().unwrap().written.len(), 1);
    assert_eq!(
        answer(&mut again, "What is my name?").await,
        "You said: What is my name? (turn 2 of this session)"
    );
    assert_eq!(
        again.native_session_id().as_deref(),
        Some(snapshot.native_session_id.as_str())
    );
    // The restored file is the agent's own, with the home's private mode, and it grew.
    let file = b
        .path()
        .join("sessions")
        .join(format!("{}.jsonl", snapshot.native_session_id));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("My name is Ada") && text.contains("What is my name?"),
        "{text}"
    );
    again.close().await.unwrap();
}

#[tokio::test]
async fn a_snapshot_also_moves_a_session_kept_in_memory_and_a_one_shot_run_resumes_it() {
    let mut first = gateway()
        .open_session(&KIND, RunRequest::new(""))
        .await
        .unwrap();
    answer(&mut first, "one").await;
    answer(&mut first, "two").await;
    let snapshot = first.snapshot().await.unwrap();
    let other = gateway();
    let (_, completion) = other
        .run(&KIND, RunRequest::new("three").with_snapshot(snapshot))
        .await
        .unwrap()
        .collect_wrapper()
        .await;
    assert_eq!(
        completion.unwrap().final_text.as_deref(),
        Some("You said: three (turn 3 of this session)")
    );
}

#[tokio::test]
async fn a_home_that_went_on_past_the_snapshot_keeps_its_newer_file_and_says_so() {
    let home = tempfile::tempdir().unwrap();
    let gateway = gateway();
    let mut session = gateway
        .open_session(&KIND, in_home(home.path()))
        .await
        .unwrap();
    answer(&mut session, "one").await;
    let old = session.snapshot().await.unwrap();
    answer(&mut session, "two").await;
    session.close().await.unwrap();

    let mut again = gateway
        .open_session(&KIND, in_home(home.path()).with_snapshot(old))
        .await
        .unwrap();
    let restored = again.restored().unwrap().clone();
    assert_eq!(restored.kept_newer.len(), 1, "{restored:?}");
    assert!(restored.summary().contains("newest wins"));
    assert_eq!(
        answer(&mut again, "three").await,
        "You said: three (turn 3 of this session)"
    );
}

#[tokio::test]
async fn missing_truncated_corrupt_and_foreign_snapshots_are_typed_errors_and_write_nothing() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let gateway = gateway();
    let mut session = gateway
        .open_session(&KIND, in_home(a.path()))
        .await
        .unwrap();
    // Before any turn there is no session to take.
    assert!(matches!(
        session.snapshot().await,
        Err(AgentError::InvalidRequest { .. })
    ));
    answer(&mut session, "one").await;
    let snapshot = session.snapshot().await.unwrap();
    let bytes = snapshot.to_bytes().unwrap();

    // Cut short, or damaged: refused when read.
    assert!(matches!(
        SessionSnapshot::from_bytes(&bytes[..bytes.len() - 10]),
        Err(SnapshotError::Corrupt { .. })
    ));
    // The session's file missing from the snapshot.
    let mut missing = snapshot.clone();
    missing.files.clear();
    let err = gateway
        .open_session(&KIND, in_home(b.path()).with_snapshot(missing))
        .await
        .unwrap_err();
    assert!(
        matches!(err, AgentError::Snapshot(SnapshotError::Missing { .. })),
        "{err}"
    );
    // Another agent's.
    let mut foreign = snapshot.clone();
    foreign.agent = agent_api::AgentKind::new("codex").unwrap();
    let err = gateway
        .open_session(&KIND, in_home(b.path()).with_snapshot(foreign))
        .await
        .unwrap_err();
    assert!(
        matches!(err, AgentError::Snapshot(SnapshotError::WrongAgent { .. })),
        "{err}"
    );
    // A file name that climbs out of the home.
    let mut hostile = snapshot.clone();
    hostile.files[0].path = "../../escaped.jsonl".into();
    let err = gateway
        .open_session(&KIND, in_home(b.path()).with_snapshot(hostile))
        .await
        .unwrap_err();
    assert!(
        matches!(err, AgentError::Snapshot(SnapshotError::UnsafeName { .. })),
        "{err}"
    );
    // A snapshot that says replay is refused as such: the caller replays, flagged.
    let replay = snapshot.with_continuity(Continuity::Replay {
        reason: "over the bound".into(),
    });
    let err = gateway
        .open_session(&KIND, in_home(b.path()).with_snapshot(replay))
        .await
        .unwrap_err();
    assert!(
        matches!(err, AgentError::Snapshot(SnapshotError::ReplayOnly { .. })),
        "{err}"
    );
    assert_eq!(err.code(), "snapshot");
    assert_eq!(
        std::fs::read_dir(b.path()).unwrap().count(),
        0,
        "something was written"
    );
}

#[tokio::test]
async fn a_backend_driven_directly_refuses_a_snapshot_it_has_not_restored() {
    let backend = ScriptedBackend::new();
    let snapshot = SessionSnapshot::new(KIND, "scripted-1-1");
    let request = RunRequest::new("hi").with_snapshot(snapshot);
    let err = agent_api::AgentBackend::run(&backend, request.clone())
        .await
        .unwrap_err();
    assert!(matches!(err, AgentError::InvalidRequest { .. }), "{err}");
    // restore() is what the gateway does first.
    let err = agent_api::snapshot::restore(&backend, request)
        .await
        .unwrap_err();
    assert!(
        matches!(err, AgentError::Snapshot(SnapshotError::Missing { .. })),
        "{err}"
    );
}
