//! The pinned real `amp` (`bash tests/bench/install-clis.sh`), in what works offline: no key,
//! an unreachable server, a server that never answers, and the permission round trip through
//! `amp permissions test`, which evaluates the settings and really runs the delegate program.
//! A missing binary fails loudly (it is installed by the project itself, `tests/run.sh`); with
//! `AGENT_API_E2E=skip` each test prints a `SKIPPED` line instead, as every end-to-end test does.

use std::path::PathBuf;
use std::time::Duration;

use agent_api::kit::Protocol;
use agent_api::kit::ProtocolHarness;
use agent_api::run::ControlCommand;
use agent_api::{
    AgentBackend, AgentError, PermissionDecision, PermissionPolicy, RunRequest, SessionSelector,
};
use agent_api_amp::delegate::DelegateChannel;
use agent_api_amp::DIALECT;
use agent_api_amp::{
    AmpBackend, AmpConfig, AmpOptions, AmpProtocol, Interface, SUPPORTED_VERSIONS,
};
use agent_api_conformance::{assert_conformant, record};
use agent_api_stream_json::StreamJson;
use serde_json::Value;

/// The pinned `amp`, or `None` (after a loud line) under `AGENT_API_E2E=skip`.
fn installed() -> Option<PathBuf> {
    let found = agent_bench::clis::cli_dir()
        .map(|dir| dir.join("amp"))
        .filter(|amp| amp.is_file());
    if found.is_none() && std::env::var("AGENT_API_E2E").is_ok_and(|v| v == "skip") {
        eprintln!("SKIPPED (AGENT_API_E2E=skip): the pinned amp is not installed");
        return None;
    }
    Some(found.expect("the pinned amp is not installed: run `bash tests/bench/install-clis.sh` (or set AGENT_API_E2E=skip)"))
}

fn amp() -> PathBuf {
    installed().expect("checked by the test's first line")
}

fn helper() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_amp-permission-delegate"))
}

/// A backend on the real binary with a key and `AMP_URL`, in a scratch home.
fn backend(url: &str, home: &std::path::Path) -> AmpBackend {
    AmpBackend::new(
        AmpConfig::default()
            .with_binary(amp())
            .with_delegate_helper(helper())
            .with_env("AMP_API_KEY", "sk-test-not-a-key")
            .with_env("AMP_URL", url)
            .with_env("HOME", home.to_string_lossy())
            .with_working_dir(home),
    )
}

#[tokio::test]
async fn the_pinned_version_runs() {
    let Some(_) = installed() else { return };
    assert_eq!(
        agent_api::kit::detect::probe_version(&amp())
            .await
            .as_deref(),
        Some(SUPPORTED_VERSIONS[0])
    );
}

#[tokio::test]
async fn no_key_is_a_typed_auth_error_before_spawn() {
    let Some(_) = installed() else { return };
    let backend = AmpBackend::new(
        AmpConfig::default()
            .with_binary(amp())
            .with_delegate_helper(helper())
            .with_inherit_env(false),
    );
    let err = backend.run(RunRequest::new("hi")).await.unwrap_err();
    assert!(matches!(err, AgentError::Auth { .. }), "{err:?}");
}

#[tokio::test]
async fn a_closed_port_is_one_service_unreachable_error() {
    let Some(_) = installed() else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Two-way, one-way, and a resumed thread: amp takes each command line and fails the same way.
    let requests = [
        RunRequest::new("hi"),
        RunRequest::new("hi").with_options(&AmpOptions::default().interface(Interface::OneWay)),
        RunRequest::new("hi").with_session(SessionSelector::Resume(
            "T-5f1c0a2e-7d1b-4c55-9a39-2b8e5e0c1a01".into(),
        )),
    ];
    for request in requests {
        let home = tempfile::tempdir().unwrap();
        let backend = backend(&format!("http://127.0.0.1:{port}"), home.path());
        let run = record(
            backend
                .run(request.with_timeout(Duration::from_secs(60)))
                .await
                .unwrap(),
        )
        .await;
        assert_conformant(&run);
        assert!(
            matches!(run.completion, Err(AgentError::ServiceUnreachable { .. })),
            "{:?}",
            run.completion
        );
        assert_eq!(
            run.universal
                .iter()
                .filter(|e| e.is_terminal_error())
                .count(),
            1
        );
        assert_eq!(
            run.of_type("agent.unparsed").count(),
            0,
            "stderr is not a parse failure"
        );
    }
}

#[tokio::test]
async fn a_server_that_never_answers_ends_by_timeout_or_cancel_with_no_process_left() {
    let Some(_) = installed() else { return };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    // Accept and hold every connection, answering nothing.
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    for cancel in [false, true] {
        let home = tempfile::tempdir().unwrap();
        let request =
            RunRequest::new("hi").with_timeout(Duration::from_secs(if cancel { 600 } else { 4 }));
        let handle = backend(&url, home.path()).run(request).await.unwrap();
        let control = handle.control();
        let recorder = tokio::spawn(record(handle));
        if cancel {
            tokio::time::sleep(Duration::from_secs(3)).await;
            control.cancel();
        }
        let run = tokio::time::timeout(Duration::from_secs(60), recorder)
            .await
            .expect("the run ends")
            .unwrap();
        assert_conformant(&run);
        match (&run.completion, cancel) {
            (Err(AgentError::Cancelled), true) | (Err(AgentError::Timeout { .. }), false) => {}
            (other, _) => panic!("cancel={cancel}: {other:?}"),
        }
        let left = agent_bench::process::processes_in(home.path());
        assert!(
            left.is_empty(),
            "processes left in the run's directory: {left:?}"
        );
    }
    server.abort();
}

/// `amp permissions test` on the run's settings, with the backend's own converter deciding each
/// delegated request: amp's verdict (`allow` / `reject`) and the transcript's events.
async fn round_trip(
    policy: PermissionPolicy,
    decide: impl FnOnce(&mut AmpProtocol, &mut ProtocolHarness, &str),
) -> (String, ProtocolHarness) {
    let mut channel = DelegateChannel::open(&helper(), None).unwrap();
    let settings = channel.settings_file();
    let mut protocol = AmpProtocol::live(
        StreamJson::print(DIALECT, "", false),
        policy,
        Some(channel.replies()),
    );
    let mut harness = ProtocolHarness::new();
    let home = tempfile::tempdir().unwrap();
    let child = tokio::process::Command::new(amp())
        .args(["permissions", "test", "--json", "--settings-file"])
        .arg(&settings)
        .args(["Bash", "--cmd", "echo hello"])
        .env("HOME", home.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let request = tokio::time::timeout(Duration::from_secs(30), channel.next_request())
        .await
        .expect("amp ran the delegate")
        .unwrap();
    assert_eq!(
        (request.tool.as_str(), request.input["cmd"].as_str()),
        ("Bash", Some("echo hello"))
    );
    protocol
        .on_line(&request.to_bytes(), &mut harness.ctx())
        .unwrap();
    decide(&mut protocol, &mut harness, &request.id);
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("amp answered")
        .unwrap();
    let verdict: Value = serde_json::from_slice(&output.stdout).unwrap();
    (
        verdict["action"].as_str().unwrap_or_default().to_string(),
        harness,
    )
}

fn resolved(harness: &mut ProtocolHarness) -> Vec<String> {
    harness
        .transcript
        .drain()
        .filter(|e| e.type_name() == "permission.resolved")
        .map(|e| serde_json::to_value(e).unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_permission_round_trip_allows_rejects_and_cancels() {
    let Some(_) = installed() else { return };
    let caller_allows = |p: &mut AmpProtocol, h: &mut ProtocolHarness, id: &str| {
        let command = ControlCommand::Permission {
            id: id.to_string(),
            decision: PermissionDecision::Allow,
        };
        p.on_control(command, &mut h.ctx()).unwrap();
    };
    let (verdict, mut harness) = round_trip(PermissionPolicy::Ask, caller_allows).await;
    assert_eq!(verdict, "allow");
    assert!(resolved(&mut harness)
        .iter()
        .any(|e| e.contains("\"approved\"") && e.contains("caller")));

    let (verdict, mut harness) = round_trip(PermissionPolicy::DenyAll, |_, _, _| {}).await;
    assert_eq!(verdict, "reject");
    assert!(resolved(&mut harness)
        .iter()
        .any(|e| e.contains("\"denied\"") && e.contains("policy")));

    // The caller never answers; the run is cancelled (the driver's soft interrupt).
    let never_then_cancel = |p: &mut AmpProtocol, h: &mut ProtocolHarness, _: &str| {
        assert!(
            !p.interrupt(&mut h.ctx()),
            "amp has no soft interrupt: the group is terminated"
        );
    };
    let (verdict, mut harness) = round_trip(PermissionPolicy::Ask, never_then_cancel).await;
    assert_eq!(verdict, "reject");
    assert_eq!(resolved(&mut harness).len(), 1);
}
