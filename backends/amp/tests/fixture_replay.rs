//! Every hand-written Amp transcript (`tests/fixtures/amp`) replays conformant through the
//! backend's own protocol, with the final text of its last `result`.

use std::path::{Path, PathBuf};

use agent_api::kit::replay::replay_file;
use agent_api::run::LimitKind;
use agent_api::universal::{ContentPart, FileAction, ItemKind, PermissionStatus, UniversalItem};
use agent_api::AgentError;
use agent_api_amp::{AmpBackend, AmpConfig};
use agent_api_conformance::{assert_conformant, record, RunRecord};

fn fixture(name: &str) -> PathBuf {
    let path = agent_bench::fixtures_dir().join("amp").join(name);
    assert!(path.is_file(), "missing fixture {}", path.display());
    path
}

/// Every completed item, in order.
fn items(run: &RunRecord) -> Vec<UniversalItem> {
    run.universal
        .iter()
        .filter_map(|e| e.completed_item())
        .cloned()
        .collect()
}

async fn replay(path: &Path) -> RunRecord {
    let handle = replay_file(&AmpBackend::new(AmpConfig::default()), path, true)
        .await
        .unwrap();
    record(handle).await
}

fn all() -> Vec<PathBuf> {
    let files = agent_bench::recordings_in(&agent_bench::fixtures_dir().join("amp"));
    assert_eq!(
        files.len(),
        10,
        "expected the ten transcripts of the README"
    );
    files
}

#[tokio::test]
async fn every_transcript_replays_conformant() {
    for path in all() {
        let run = replay(&path).await;
        assert_conformant(&run);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let unparsed = run
            .universal
            .iter()
            .filter(|e| e.type_name() == "agent.unparsed")
            .count();
        assert_eq!(unparsed, 0, "{name}: unparsed lines");
        if !name.starts_with("error") && !name.starts_with("max_turns") {
            let completion = run
                .completion
                .as_ref()
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let last = run
                .assistant_messages()
                .into_iter()
                .rev()
                .find(|t| !t.is_empty())
                .unwrap_or_default();
            assert_eq!(
                completion.final_text.as_deref(),
                Some(last.as_str()),
                "{name}"
            );
        }
    }
}

#[tokio::test]
async fn error_results_are_one_typed_terminal_error() {
    let run = replay(&fixture("error.stdout.jsonl")).await;
    match &run.completion {
        Err(AgentError::AgentFailed { message }) => {
            assert!(message.contains("connection reset"), "{message}")
        }
        other => panic!("error.stdout.jsonl: {other:?}"),
    }
    // Hitting the turn limit is the typed limit error, as the SDK's own limit gives.
    let max_turns = replay(&fixture("max_turns.stdout.jsonl")).await;
    assert!(
        matches!(
            max_turns.completion,
            Err(AgentError::LimitReached {
                limit: LimitKind::Turns
            })
        ),
        "{:?}",
        max_turns.completion
    );
    for run in [&run, &max_turns] {
        assert_eq!(
            run.universal
                .iter()
                .filter(|e| e.is_terminal_error())
                .count(),
            1,
            "one terminal error"
        );
    }
}

#[tokio::test]
async fn thinking_is_reasoning_and_usage_is_counted() {
    let run = replay(&fixture("thinking.stdout.jsonl")).await;
    let reasoning: Vec<String> = items(&run)
        .iter()
        .map(UniversalItem::reasoning_text)
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(reasoning, ["The user wants 2+2. That is 4."]);
    let usage = run.completion.as_ref().unwrap().usage.clone().unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_input_tokens
        ),
        (Some(304), Some(36), Some(64))
    );
}

#[tokio::test]
async fn delegated_permissions_replay_with_the_recorded_answer() {
    for (name, approved) in [
        ("shell_allowed.session.jsonl", true),
        ("shell_denied.session.jsonl", false),
    ] {
        let run = replay(&fixture(name)).await;
        let resolved: Vec<bool> = run
            .universal
            .iter()
            .filter(|e| e.type_name() == "permission.resolved")
            .filter_map(|e| {
                e.permission()
                    .map(|p| p.status == PermissionStatus::Approved)
            })
            .collect();
        assert_eq!(resolved, [approved], "{name}");
        assert_eq!(
            run.universal
                .iter()
                .filter(|e| e.type_name() == "permission.requested")
                .count(),
            1,
            "{name}"
        );
    }
}

#[tokio::test]
async fn file_edits_and_sub_agents_map_to_their_items() {
    let run = replay(&fixture("edit.stdout.jsonl")).await;
    let files: Vec<(String, FileAction)> = items(&run)
        .into_iter()
        .flat_map(|i| i.content.clone())
        .filter_map(|p| match p {
            ContentPart::FileRef { path, action, .. } => Some((path, action)),
            _ => None,
        })
        .collect();
    assert_eq!(
        files,
        [
            ("/work/project/README.md".to_string(), FileAction::Patch),
            ("/work/project/notes.txt".to_string(), FileAction::Write)
        ]
    );
    let run = replay(&fixture("subagent.stdout.jsonl")).await;
    let items = items(&run);
    let task = items
        .iter()
        .find(|i| i.kind == ItemKind::ToolCall && i.native_item_id.as_deref() == Some("toolu_task"))
        .unwrap();
    let nested = items
        .iter()
        .filter(|i| {
            i.kind == ItemKind::Message && i.parent_id.as_deref() == Some(task.item_id.as_str())
        })
        .count();
    assert_eq!(
        nested, 2,
        "the sub-agent's messages hang under its Task call"
    );
}
