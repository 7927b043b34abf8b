//! Transcript shapes other Claude Code versions (and CLIs speaking its protocol) write, hand
//! written from the shapes quoted in issue 20 (`tests/fixtures/handwritten/README.md`), and the
//! agents' own session files, which a replay refuses.

use std::path::PathBuf;

use agent_api::kit::replay::replay_file;
use agent_api::AgentError;
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_conformance::{assert_conformant, record, RunRecord};

fn fixture(path: &str) -> PathBuf {
    agent_bench::fixtures_dir().join(path)
}

async fn replay(path: &str) -> RunRecord {
    let backend = ClaudeCodeBackend::new(ClaudeCodeConfig::default());
    let run = record(replay_file(&backend, &fixture(path), false).await.unwrap()).await;
    assert_conformant(&run);
    run
}

/// The message of the run's typed `AgentFailed` error.
fn failure(run: &RunRecord) -> String {
    match &run.completion {
        Err(AgentError::AgentFailed { message }) => message.clone(),
        other => panic!("expected AgentFailed, got {other:?}"),
    }
}

#[tokio::test]
async fn an_error_subtype_fails_the_turn_even_when_is_error_is_false() {
    let run = replay("handwritten/claude_error_max_turns_2_1_0.stdout.jsonl").await;
    // The CLI's own turn limit is the request's limit reached (issue 24), typed.
    assert!(
        matches!(
            run.completion,
            Err(AgentError::LimitReached {
                limit: agent_api::run::LimitKind::Turns
            })
        ),
        "{:?}",
        run.completion
    );
    // One failure, one error event: the driver's terminal one.
    assert_eq!(run.of_type("error").count(), 1);

    let run = replay("handwritten/claude_error_during_execution_2_1_0.stdout.jsonl").await;
    let message = failure(&run);
    assert!(message.contains("failed during execution"), "{message}");
    assert!(
        message.contains("Tool permission stream closed before a response was received"),
        "{message}"
    );
}

#[tokio::test]
async fn a_success_subtype_flagged_as_an_error_fails_without_saying_success() {
    let run = replay("handwritten/claude_success_is_error.stdout.jsonl").await;
    let message = failure(&run);
    assert!(message.contains("Prompt is too long"), "{message}");
    assert!(!message.contains("success"), "{message}");
    assert_eq!(run.of_type("error").count(), 1);
}

#[tokio::test]
async fn assistant_lines_without_a_message_id_are_each_their_own_message() {
    let run = replay("handwritten/claude_assistant_without_ids.stdout.jsonl").await;
    assert_eq!(
        run.assistant_messages(),
        ["First, let me think about this.", "The answer is 4."]
    );
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("The answer is 4.")
    );
}

#[tokio::test]
async fn its_own_session_files_are_refused_naming_what_they_look_like() {
    let backend = ClaudeCodeBackend::new(ClaudeCodeConfig::default());
    let path = "history/claude_code/shell.jsonl";
    match replay_file(&backend, &fixture(path), false).await {
        Err(error @ AgentError::StoredSessionFile { looks_like }) => {
            assert_eq!(looks_like, agent_api_claude_code::history::STORE_FILE);
            assert!(error.to_string().contains("Claude Code session"), "{error}");
        }
        Err(other) => panic!("{path}: expected StoredSessionFile, got {other}"),
        Ok(_) => panic!("{path}: a stored session file replayed as a recording"),
    }
}
