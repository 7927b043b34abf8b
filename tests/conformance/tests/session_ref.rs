//! Session handles on the scripted agent: a completion returns a [`SessionRef`] naming the agent,
//! the session and where it ran; resuming with it runs there whatever the request's own working
//! directory; a handle of another agent or a directory that is gone is refused before spawning.

use agent_api::request::SessionRef;
use agent_api::{AgentBackend, AgentError, AgentKind, RunRequest, SessionSelector};
use agent_api_scripted::ScriptedBackend;

async fn complete(
    backend: &ScriptedBackend,
    request: RunRequest,
) -> Result<agent_api::RunCompletion, AgentError> {
    backend.run(request).await?.collect_wrapper().await.1
}

#[tokio::test]
async fn a_resume_through_the_handle_runs_in_the_sessions_directory() {
    let (home, elsewhere) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let backend = ScriptedBackend::new();
    let first = complete(
        &backend,
        RunRequest::new("hello").with_working_dir(home.path()),
    )
    .await
    .unwrap();
    let session = first
        .session
        .clone()
        .expect("the completion carries the session's handle");
    let id = first.native_session_id.clone().unwrap();
    assert_eq!(
        session,
        SessionRef::new(agent_api_scripted::KIND, id.clone(), home.path())
    );

    let again = RunRequest::new("again")
        .with_working_dir(elsewhere.path())
        .with_session(SessionSelector::Resume(session));
    assert_eq!(again.session_working_dir(), Some(home.path()));
    let second = complete(&backend, again).await.unwrap();
    assert_eq!(
        second.final_text.as_deref(),
        Some("You said: again (turn 2 of this session)")
    );
    let resumed = second.session.unwrap();
    assert_eq!(
        (resumed.id.as_str(), resumed.working_dir()),
        (id.as_str(), Some(home.path())),
        "it ran where the session lives"
    );
}

#[tokio::test]
async fn a_bare_id_resumes_in_the_requests_directory() {
    let (home, elsewhere) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let backend = ScriptedBackend::new();
    let first = complete(
        &backend,
        RunRequest::new("hello").with_working_dir(home.path()),
    )
    .await
    .unwrap();
    let bare = SessionSelector::Resume(first.native_session_id.unwrap().into());
    let second = complete(
        &backend,
        RunRequest::new("again")
            .with_working_dir(elsewhere.path())
            .with_session(bare),
    )
    .await
    .unwrap();
    assert_eq!(
        second.session.unwrap().working_dir(),
        Some(elsewhere.path())
    );
}

#[tokio::test]
async fn another_agents_handle_or_a_vanished_directory_is_refused_before_spawning() {
    let backend = ScriptedBackend::new();
    let dir = tempfile::tempdir().unwrap();
    let codex = SessionRef::new(AgentKind::new("codex").unwrap(), "t-1", dir.path());
    let err = complete(
        &backend,
        RunRequest::new("x").with_session(SessionSelector::Fork(codex)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, AgentError::InvalidRequest { .. }), "{err:?}");

    let gone = dir.path().join("gone");
    let ours = SessionRef::new(agent_api_scripted::KIND, "s-1", &gone);
    let err = complete(
        &backend,
        RunRequest::new("x").with_session(SessionSelector::Resume(ours)),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, AgentError::WorkingDir { .. }), "{err:?}");
}

#[tokio::test]
async fn a_caller_chosen_session_id_where_the_agent_cannot_take_one_fails_before_spawning() {
    let err = complete(
        &ScriptedBackend::new(),
        RunRequest::new("x").with_new_session_id("abc"),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, AgentError::UnsupportedCapability { capability, .. } if capability == agent_api::capabilities::SESSION_CALLER_ID),
        "{err:?}"
    );
}

/// A backend that cannot resume at all says so, even to another agent's handle: the capability
/// explains the refusal, not whose session it is (issue 39).
#[test]
fn a_backend_without_resume_refuses_any_handle_for_the_missing_capability() {
    let claude = AgentKind::from_static("claude_code");
    let handle = SessionRef::new(
        AgentKind::from_static("codex"),
        "thread-1",
        std::env::temp_dir(),
    );
    let request = RunRequest::new("again").with_session(SessionSelector::Resume(handle));
    let caps = agent_api::CapabilitySet::from_ids([agent_api::capabilities::RUN]);
    let err = agent_api::kit::validate_request(&claude, &caps, &[], &request).unwrap_err();
    assert!(
        matches!(&err, AgentError::UnsupportedCapability { capability, .. } if capability == agent_api::capabilities::SESSION_RESUME),
        "{err}"
    );
}
