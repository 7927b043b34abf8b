//! A server that never starts listening is a typed error naming how long the backend waited,
//! and nothing of it is left running. Hermetic: a stand-in program, no OpenCode needed.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use agent_api::{AgentBackend, AgentError, RunRequest};
use agent_api_opencode::{OpenCodeBackend, OpenCodeConfig};

#[tokio::test]
async fn a_server_that_never_listens_is_server_not_ready_and_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("opencode");
    // Prints something else, then hangs like a server stuck in start-up (and leaves a child).
    std::fs::write(
        &program,
        "#!/bin/sh\necho starting\nsleep 300 &\nsleep 300\n",
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut config =
        OpenCodeConfig::with_binary(&program).startup_timeout(Duration::from_millis(1500));
    config.working_dir = Some(dir.path().to_path_buf());
    let backend = OpenCodeBackend::new(config);
    let error = backend
        .run(RunRequest::new("hi"))
        .await
        .expect_err("the server never listens");
    match &error {
        AgentError::ServerNotReady { waited } => {
            assert!(*waited >= Duration::from_millis(1500), "{waited:?}");
            assert!(
                error.to_string().contains(&format!("{waited:?}")),
                "the message says how long: {error}"
            );
        }
        other => panic!("expected ServerNotReady, got {other:?}"),
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !agent_bench::process::processes_in(dir.path()).is_empty()
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        agent_bench::process::processes_in(dir.path()),
        Vec::<i32>::new(),
        "the stand-in and its child are gone"
    );
}

/// The serve interface shares one server on this machine among runs: a launcher is refused before
/// anything starts (the run and acp interfaces take it; `tests/conformance/tests/launch_remote.rs`).
#[tokio::test]
async fn serve_refuses_a_launcher_before_starting_anything() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = OpenCodeConfig::with_binary(dir.path().join("never-started"));
    config.working_dir = Some(dir.path().to_path_buf());
    let backend = OpenCodeBackend::new(config);
    let launcher = agent_api::request::Launcher::Prefix(vec!["env".into()]);
    assert!(
        backend.info().capabilities.contains(launcher.capability()),
        "OpenCode advertises the launchers"
    );
    let error = backend
        .run(RunRequest::new("hi").with_launcher(launcher))
        .await
        .expect_err("serve takes no launcher");
    assert!(
        matches!(&error, AgentError::InvalidRequest { reason } if reason.contains("serve")),
        "{error}"
    );
}
