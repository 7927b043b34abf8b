//! The gateway routes by kind and refuses what a backend cannot do before anything runs.

use std::sync::Arc;

use agent_api::capabilities as caps;
use agent_api::{AgentError, AgentKind, Gateway, RunRequest};
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
    assert!(gateway
        .capabilities(&kind)
        .unwrap()
        .contains(caps::TOOLS_STRUCTURED_V1));
}

#[test]
fn registering_a_kind_twice_is_refused() {
    let mut gateway = gateway();
    assert!(matches!(
        gateway.register(Arc::new(ScriptedBackend::new())),
        Err(AgentError::DuplicateBackend { .. })
    ));
}

#[tokio::test]
async fn an_unknown_kind_is_a_typed_error() {
    let err = gateway()
        .run(&AgentKind::from_static("nobody"), RunRequest::new("hi"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, AgentError::UnknownBackend { ref kind } if kind == "nobody"));
}

#[tokio::test]
async fn a_feature_the_backend_lacks_is_refused_naming_the_capability() {
    let gateway = gateway();
    let kind = AgentKind::from_static("scripted");
    let mut with_image = agent_api::Prompt::from("hi");
    with_image.images.push("cat.png".into());
    let mut with_file = agent_api::Prompt::from("hi");
    with_file.attachments.push("notes.txt".into());
    let cases = [
        (RunRequest::new(with_image), caps::IMAGES),
        (RunRequest::new(with_file), caps::FILE_ATTACHMENTS),
        (RunRequest::new("hi").with_variant("high"), caps::VARIANTS),
    ];
    for (request, capability) in cases {
        match gateway.run(&kind, request).await {
            Err(AgentError::UnsupportedCapability {
                capability: got,
                kind,
            }) => {
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
    assert!(matches!(
        gateway.run(&kind, RunRequest::new("  ")).await,
        Err(AgentError::InvalidRequest { .. })
    ));
    let missing_dir = RunRequest::new("hi").with_working_dir("/nonexistent/dir/for/tests");
    assert!(matches!(
        gateway.run(&kind, missing_dir).await,
        Err(AgentError::WorkingDir { .. })
    ));
}

#[tokio::test]
async fn a_supported_request_runs_through_the_gateway() {
    let request =
        RunRequest::new("hi").with_extension(agent_api_scripted::EXT_SCENARIO, "text".into());
    let handle = gateway()
        .run(&AgentKind::from_static("scripted"), request)
        .await
        .unwrap();
    let (_, completion) = handle.collect_wrapper().await;
    assert_eq!(
        completion.unwrap().final_text.as_deref(),
        Some("You said: hi")
    );
}

#[tokio::test]
async fn with_installed_registers_what_discovery_finds_with_its_version() {
    use agent_api::kit::detect::BackendProbe;
    let dir = tempfile::tempdir().unwrap();
    let cli = dir.path().join("fakecli");
    std::fs::write(&cli, "#!/bin/sh\necho 'fakecli 1.2.3 (build \u{1b}[2J)'\n").unwrap();
    std::fs::set_permissions(&cli, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Only this test reads these variables (names unique to it).
    std::env::set_var("AGENT_API_DISCOVERY_FOUND_BIN", &cli);
    std::env::remove_var("AGENT_API_DISCOVERY_MISSING_BIN");
    let build = |_| Arc::new(ScriptedBackend::new()) as Arc<dyn agent_api::kit::replay::Replay>;
    let probes = [
        BackendProbe::new(
            AgentKind::from_static("discovery_found"),
            "fakecli-not-on-path",
            &["1.2.3"],
            build,
        ),
        BackendProbe::new(
            AgentKind::from_static("discovery_missing"),
            "fakecli-not-on-path",
            &["1.2.3"],
            build,
        ),
    ];
    let (gateway, found) = Gateway::with_installed(&probes).await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].kind.as_str(), "discovery_found");
    assert_eq!(found[0].binary, cli);
    assert_eq!(found[0].version.as_deref(), Some("1.2.3"));
    assert!(found[0].supported);
    assert_eq!(gateway.kinds(), vec![AgentKind::from_static("scripted")]);
}

/// Waits until the run has events waiting for the (paused) caller; returns their counted bytes.
async fn buffered_once_waiting(events: &agent_api::run::UniversalEvents) -> usize {
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
    let text =
        || RunRequest::new("hi").with_extension(agent_api_scripted::EXT_SCENARIO, "text".into());
    // A one-byte budget: every batch takes all of it, so a paused caller holds exactly one byte's worth.
    let requests = [
        (gateway().with_buffer_budget(1), text()),
        (gateway(), text().with_buffer_budget(1)),
    ];
    for (gateway, request) in requests {
        let (events, completion) = gateway.run(&kind, request).await.unwrap().into_universal();
        assert_eq!(buffered_once_waiting(&events).await, 1);
        let all: Vec<_> =
            tokio::time::timeout(std::time::Duration::from_secs(20), events.collect())
                .await
                .expect("the run ends");
        assert!(completion.await.is_ok());
        assert_eq!(all.last().unwrap().type_name(), "session.ended");
    }
    let (events, _completion) = gateway().run(&kind, text()).await.unwrap().into_universal();
    assert!(
        buffered_once_waiting(&events).await > 1,
        "the default budget holds more than one byte"
    );
}
