//! Property tests of the stored-session readers (`agent_api::history`): the session files the
//! pinned CLIs wrote and OpenCode's export (`tests/fixtures/history`), mutated at random (lines dropped, repeated,
//! swapped, cut, bytes flipped, fields replaced by other JSON values or removed, random lines
//! added), read back with zero panics: every read ends with one completion, every event is valid
//! against the universal schema, and the only problems are the unreadable lines themselves.

use std::path::Path;

use agent_api::history::read_store_file;
use agent_api::kit::Protocol;
use agent_api::AgentKind;
use agent_api_codex::history::StoredCodexSession;
use agent_api_conformance::props::{cases, check_run, file_lines, mutation, record_within};
use agent_api_gemini::history::StoredGeminiSession;
use agent_api_opencode::history::{export_lines, StoredOpenCodeSession};
use agent_api_qwen::history::StoredQwenSession;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

/// The lines an OpenCode export becomes (the reader's input).
fn opencode_lines() -> Vec<Vec<u8>> {
    let text =
        std::fs::read(agent_bench::fixtures_dir().join("history/opencode/shell.export.json"))
            .unwrap();
    export_lines(&serde_json::from_slice(&text).unwrap())
        .iter()
        .map(|l| l.to_string().into_bytes())
        .collect()
}

fn fixture_lines(path: &str) -> Vec<Vec<u8>> {
    file_lines(&agent_bench::fixtures_dir().join("history").join(path))
}

/// Reads the mutated file through `protocol` and checks the run.
fn check(
    kind: &'static str,
    lines: &[Vec<u8>],
    protocol: Box<dyn Protocol>,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    std::fs::write(&path, lines.join(&b'\n')).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let run = runtime.block_on(async {
        let handle = read_store_file(
            AgentKind::new(kind).unwrap(),
            Path::new(&path),
            protocol,
            true,
            true,
        )
        .await
        .unwrap();
        record_within(handle).await
    })?;
    check_run(&run)
}

proptest! {
    #![proptest_config(cases(64))]

    #[test]
    fn mutated_claude_code_session_files_read_without_panics(mutations in prop::collection::vec(mutation(), 0..12)) {
        let mut lines = fixture_lines("claude_code/shell.jsonl");
        for m in mutations {
            agent_api_conformance::props::apply(&mut lines, m);
        }
        check("claude_code", &lines, Box::new(agent_api_claude_code::history::stored_session()))?;
    }

    #[test]
    fn mutated_codex_rollouts_read_without_panics(mutations in prop::collection::vec(mutation(), 0..12), edit in any::<bool>()) {
        let mut lines = fixture_lines(if edit { "codex/write_edit.jsonl" } else { "codex/shell.jsonl" });
        for m in mutations {
            agent_api_conformance::props::apply(&mut lines, m);
        }
        check("codex", &lines, Box::new(StoredCodexSession::default()))?;
    }

    #[test]
    fn mutated_gemini_and_qwen_chats_read_without_panics(mutations in prop::collection::vec(mutation(), 0..12), qwen in any::<bool>()) {
        let mut lines = fixture_lines(if qwen { "qwen/shell.jsonl" } else { "gemini/shell.jsonl" });
        for m in mutations {
            agent_api_conformance::props::apply(&mut lines, m);
        }
        if qwen {
            check("qwen", &lines, Box::new(StoredQwenSession::default()))?;
        } else {
            check("gemini", &lines, Box::new(StoredGeminiSession::default()))?;
        }
    }

    #[test]
    fn mutated_opencode_exports_read_without_panics(mutations in prop::collection::vec(mutation(), 0..12)) {
        let mut lines = opencode_lines();
        for m in mutations {
            agent_api_conformance::props::apply(&mut lines, m);
        }
        check("opencode", &lines, Box::new(StoredOpenCodeSession::default()))?;
    }

    #[test]
    fn random_lines_read_without_panics(lines in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 0..8)) {
        let lines: Vec<Vec<u8>> = lines.into_iter().map(|l| l.into_iter().filter(|b| *b != b'\n').collect()).collect();
        check("claude_code", &lines, Box::new(agent_api_claude_code::history::stored_session()))?;
        check("codex", &lines, Box::new(StoredCodexSession::default()))?;
        check("gemini", &lines, Box::new(StoredGeminiSession::default()))?;
        check("qwen", &lines, Box::new(StoredQwenSession::default()))?;
        check("opencode", &lines, Box::new(StoredOpenCodeSession::default()))?;
    }
}
