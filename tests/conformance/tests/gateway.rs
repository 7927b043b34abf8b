//! The gateway routes by kind and refuses what a backend cannot do before anything runs.

use std::sync::Arc;

use agent_api::capabilities as caps;
use agent_api::{AgentError, AgentKind, Gateway, RunRequest, SessionSelector};
use agent_api_scripted::ScriptedBackend;

fn gateway() -> Gateway {
    let mut gateway = Gateway::new();
    gateway.register(Arc::new(ScriptedBackend::new())).unwrap();
    gateway
}

#[test]
fn registered_kinds_are_listed_with_their_capabilities() {
    let gateway = gateway();
    let kind = AgentKind::from_static("scripted");
    assert_eq!(gateway.kinds(), vec![kind.clone()]);
    assert!(gateway.capabilities(&kind).unwrap().contains(caps::TOOLS_STRUCTURED_V1));
}

#[test]
fn registering_a_kind_twice_is_refused() {
    let mut gateway = gateway();
    assert!(matches!(gateway.register(Arc::new(ScriptedBackend::new())), Err(AgentError::DuplicateBackend { .. })));
}

#[tokio::test]
async fn an_unknown_kind_is_a_typed_error() {
    let err = gateway().run(&AgentKind::from_static("nobody"), RunRequest::new("hi")).await.err().unwrap();
    assert!(matches!(err, AgentError::UnknownBackend { ref kind } if kind == "nobody"));
}

#[tokio::test]
async fn a_feature_the_backend_lacks_is_refused_naming_the_capability() {
    let gateway = gateway();
    let kind = AgentKind::from_static("scripted");
    let cases = [
        (RunRequest::new("hi").with_session(SessionSelector::Resume("s1".into())), caps::SESSION_RESUME),
        (RunRequest::new("hi").with_session(SessionSelector::Fork("s1".into())), caps::SESSION_FORK),
        (RunRequest::new("hi").with_variant("high"), caps::VARIANTS),
    ];
    for (request, capability) in cases {
        match gateway.run(&kind, request).await {
            Err(AgentError::UnsupportedCapability { capability: got, kind }) => {
                assert_eq!(got, capability);
                assert_eq!(kind, "scripted");
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("ran a request needing {capability}"),
        }
    }
}

#[tokio::test]
async fn invalid_requests_fail_before_spawning() {
    let gateway = gateway();
    let kind = AgentKind::from_static("scripted");
    assert!(matches!(gateway.run(&kind, RunRequest::new("  ")).await, Err(AgentError::InvalidRequest { .. })));
    let missing_dir = RunRequest::new("hi").with_working_dir("/nonexistent/dir/for/tests");
    assert!(matches!(gateway.run(&kind, missing_dir).await, Err(AgentError::InvalidRequest { .. })));
}

#[tokio::test]
async fn a_supported_request_runs_through_the_gateway() {
    let request = RunRequest::new("hi").with_extension(agent_api_scripted::EXT_SCENARIO, "text".into());
    let handle = gateway().run(&AgentKind::from_static("scripted"), request).await.unwrap();
    let (_, completion) = handle.collect_wrapper().await;
    assert_eq!(completion.unwrap().final_text.as_deref(), Some("You said: hi"));
}

/// Waits until the run has events waiting for the (paused) caller; returns their counted bytes.
async fn buffered_once_waiting(events: &agent_api::UniversalEvents) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while events.buffered_bytes() == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    events.buffered_bytes()
}

#[tokio::test]
async fn the_byte_budget_comes_from_the_request_or_else_from_the_gateway() {
    use futures::StreamExt;
    let kind = AgentKind::from_static("scripted");
    let text = || RunRequest::new("hi").with_extension(agent_api_scripted::EXT_SCENARIO, "text".into());
    // A one-byte budget: every batch takes all of it, so a paused caller holds exactly one byte's worth.
    let requests = [(gateway().with_buffer_budget(1), text()), (gateway(), text().with_buffer_budget(1))];
    for (gateway, request) in requests {
        let (events, completion) = gateway.run(&kind, request).await.unwrap().into_universal();
        assert_eq!(buffered_once_waiting(&events).await, 1);
        let all: Vec<_> = tokio::time::timeout(std::time::Duration::from_secs(20), events.collect()).await.expect("the run ends");
        assert!(completion.await.is_ok());
        assert_eq!(all.last().unwrap().type_name(), "session.ended");
    }
    let (events, _completion) = gateway().run(&kind, text()).await.unwrap().into_universal();
    assert!(buffered_once_waiting(&events).await > 1, "the default budget holds more than one byte");
}
