//! The session a run resumes or forks is checked before anything is spawned (issue 46 item 14,
//! fault row 104): an id that could read as a flag or a path never reaches Claude Code's argv,
//! Claude Code's ids are UUIDs, and a UUID its own store does not hold is `SessionNotFound`.
//! The backend's binary does not exist, so a request that got past the checks fails to spawn.

use agent_api::request::Launcher;
use agent_api::{AgentBackend, AgentError, RunRequest, SessionSelector};
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};

const STORED: &str = "cd13f027-f751-4948-87e6-a722e591af62";
const UNKNOWN: &str = "3f0c2a7e-1111-4222-8333-444455556666";

/// A backend whose home holds one stored session, `STORED`, and whose binary is missing.
fn backend() -> (tempfile::TempDir, ClaudeCodeBackend) {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join(".claude/projects/-work-project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join(format!("{STORED}.jsonl")), "{}\n").unwrap();
    let config = ClaudeCodeConfig::default()
        .with_binary(home.path().join("no-such-claude"))
        .with_inherit_env(false)
        .with_env("HOME", home.path().to_str().unwrap());
    (home, ClaudeCodeBackend::new(config))
}

fn resuming(id: &str) -> RunRequest {
    RunRequest::new("hi").with_session(SessionSelector::Resume(id.into()))
}

#[tokio::test]
async fn an_id_that_reads_as_a_flag_or_a_path_is_refused_before_spawn() {
    let (_home, backend) = backend();
    for id in [
        "--dangerously-skip-permissions",
        "-p",
        "../../../../etc/passwd",
        "/etc/passwd",
        "a b",
    ] {
        for selector in [
            SessionSelector::Resume(id.into()),
            SessionSelector::Fork(id.into()),
        ] {
            let request = RunRequest::new("hi").with_session(selector);
            assert!(
                matches!(
                    backend.validate(&request),
                    Err(AgentError::InvalidRequest { .. })
                ),
                "{id}"
            );
            let refused = backend.run(request).await.err();
            assert!(
                matches!(refused, Some(AgentError::InvalidRequest { .. })),
                "{id}: {refused:?}"
            );
        }
    }
}

#[tokio::test]
async fn claude_codes_session_ids_are_uuids() {
    let (_home, backend) = backend();
    for id in ["ses_1", "abc", "T-0f3c"] {
        let refused = backend.run(resuming(id)).await.err();
        assert!(
            matches!(&refused, Some(AgentError::InvalidRequest { reason }) if reason.contains("UUID")),
            "{id}: {refused:?}"
        );
    }
}

#[tokio::test]
async fn a_uuid_the_store_does_not_hold_is_not_found_and_a_stored_one_goes_on_to_spawn() {
    let (_home, backend) = backend();
    let unknown = backend.run(resuming(UNKNOWN)).await.err();
    assert!(
        matches!(&unknown, Some(AgentError::SessionNotFound { id }) if id == UNKNOWN),
        "{unknown:?}"
    );
    let fork = RunRequest::new("hi").with_session(SessionSelector::Fork(UNKNOWN.into()));
    assert!(matches!(
        backend.validate(&fork),
        Err(AgentError::SessionNotFound { .. })
    ));
    // The stored session passes every check; the missing binary is what stops it (at spawn).
    let stored = backend.run(resuming(STORED)).await.err();
    assert!(
        matches!(stored, Some(AgentError::BinaryNotFound { .. })),
        "{stored:?}"
    );
}

#[tokio::test]
async fn a_run_that_does_not_read_the_backends_own_store_is_not_checked_for_existence() {
    let (_home, backend) = backend();
    // Another machine's store, or another home, may hold the session: only the grammar is checked.
    let elsewhere = resuming(UNKNOWN).with_launcher(Launcher::Prefix(vec!["env".into()]));
    assert!(backend.validate(&elsewhere).is_ok());
    let other_home = resuming(UNKNOWN).with_env("CLAUDE_CONFIG_DIR", "/elsewhere");
    assert!(backend.validate(&other_home).is_ok());
}
