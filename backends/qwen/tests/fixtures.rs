//! Every Qwen Code 0.15.10 recording the bench recorder made (`tests/bench/recorded/qwen/`: `acp`,
//! `control` = two-way stream-json, `print`) replays conformant through the `qwen` kind, with the
//! final text and outcome of the live run.

use std::path::{Path, PathBuf};

use agent_api::kit::replay::replay_file;
use agent_api::run::Channel;
use agent_api::universal::{ItemKind, ItemStatus};
use agent_api::AgentError;
use agent_api_acp::AcpConfig;
use agent_api_conformance::{assert_conformant, record, RunRecord};
use agent_api_qwen::QwenBackend;
use agent_bench::record::default_out_dir;
use agent_bench::Interface;

fn files(interface: Interface) -> Vec<PathBuf> {
    let dir = default_out_dir(interface);
    agent_bench::recordings_in(&dir)
}

async fn replay(path: &Path) -> RunRecord {
    let backend = QwenBackend::new(AcpConfig::default());
    let run = record(
        replay_file(&backend, path, true)
            .await
            .expect("replay starts"),
    )
    .await;
    assert_conformant(&run);
    run
}

fn scenario(path: &Path) -> String {
    path.file_name()
        .unwrap()
        .to_string_lossy()
        .split('.')
        .next()
        .unwrap()
        .to_string()
}

/// What every interface's recording of `name` must show.
fn check(interface: Interface, name: &str, run: &RunRecord) {
    let text = run
        .completion
        .as_ref()
        .ok()
        .and_then(|c| c.final_text.clone())
        .unwrap_or_default();
    match name {
        "text" => assert_eq!(text, "Hello from mock", "{interface}"),
        "reasoning" => {
            assert_eq!(text, "Hello after thinking", "{interface}");
            assert!(
                !run.text_on(&Channel::Reasoning).is_empty(),
                "{interface}: {:?}",
                run.types()
            );
        }
        "shell" => {
            assert!(
                text.starts_with("Tool finished. Output was: ") && text.contains("Output: hi"),
                "{interface}: {text}"
            );
            let results = run.completed_items(ItemKind::ToolResult);
            let shell = results.iter().find(|i| {
                i.tool
                    .as_ref()
                    .is_some_and(|t| t.kind == "command_execution")
            });
            assert_eq!(
                shell.map(|i| i.status),
                Some(ItemStatus::Completed),
                "{interface}: {:?}",
                run.types()
            );
            let command = shell.and_then(|i| i.tool.as_ref()?.command.as_deref());
            assert_eq!(
                command,
                Some(agent_bench::scenario::SHELL_COMMAND),
                "{interface}: the typed command"
            );
        }
        "write_edit" => {
            assert!(text.starts_with("Edit finished."), "{interface}: {text}");
            let results = run.completed_items(ItemKind::ToolResult);
            assert!(
                results
                    .iter()
                    .filter(|i| i.status == ItemStatus::Completed)
                    .count()
                    >= 2,
                "{interface}: {:?}",
                run.types()
            );
        }
        "error401" => assert!(
            matches!(run.completion, Err(AgentError::Auth { .. })),
            "{interface}: {:?}",
            run.completion
        ),
        "error500" => {
            assert!(
                matches!(
                    run.completion,
                    Err(AgentError::ServerError {
                        status: Some(500),
                        ..
                    })
                ),
                "{interface}: {:?}",
                run.completion
            )
        }
        other => panic!("a recording this test does not know: {interface} {other}"),
    }
    if name.starts_with("error") {
        assert_eq!(
            run.universal
                .iter()
                .filter(|e| e.is_terminal_error())
                .count(),
            1,
            "{interface} {name}"
        );
        assert!(
            !format!("{:?}", run.completion).contains("sk-test"),
            "{interface} {name}"
        );
    } else {
        let done = run
            .completion
            .as_ref()
            .unwrap_or_else(|e| panic!("{interface} {name}: {e}"));
        assert!(done.native_session_id.is_some(), "{interface} {name}");
    }
}

#[tokio::test]
async fn every_qwen_acp_session_replays_with_the_live_outcome() {
    for path in files(Interface::QwenAcp) {
        let run = replay(&path).await;
        let name = scenario(&path);
        check(Interface::QwenAcp, &name, &run);
        if name == "shell" || name == "write_edit" {
            assert!(run.of_type("permission.requested").count() >= 1, "{name}");
            assert_eq!(
                run.of_type("permission.requested").count(),
                run.of_type("permission.resolved").count(),
                "{name}"
            );
        }
        if !name.starts_with("error") {
            assert!(
                run.completion.as_ref().unwrap().usage.is_some(),
                "{name}: usage from the chunks' _meta"
            );
        }
        if name == "write_edit" {
            // Absolute in the permission request, relative in the update: one absolute path.
            let mut items = run.completed_items(ItemKind::ToolCall);
            items.extend(run.completed_items(ItemKind::ToolResult));
            let paths: Vec<String> = items
                .iter()
                .map(|c| serde_json::to_string(&c.content).unwrap())
                .collect();
            assert_eq!(paths.len(), 4, "two calls and their results");
            assert!(
                paths
                    .iter()
                    .all(|p| p.contains("\"/home/dev/work/write_edit/created.txt\"")),
                "{paths:?}"
            );
        }
    }
}

#[tokio::test]
async fn every_qwen_stream_json_recording_replays_with_the_live_outcome() {
    for interface in [Interface::QwenControl, Interface::QwenPrint] {
        for path in files(interface) {
            let run = replay(&path).await;
            check(interface, &scenario(&path), &run);
        }
    }
}

/// A replay reads a recording's stderr as a live run reads Qwen's debug log: the retry lines of
/// the live error500 run (its debug log's, which the recorder does not keep, given here as a
/// `meta.json`'s stderr would give them) show as the same `api_retry` statuses before the typed
/// error, on every interface's recording.
#[tokio::test]
async fn a_replay_shows_the_retries_its_stderr_reports() {
    let log = "2026-11-25T19:00:00.000Z [WARN] [RETRY] Attempt 1 failed with status 500. Retrying with backoff... Error: 500\n\
               2026-11-25T19:00:01.500Z [WARN] [RETRY] Attempt 2 failed with status 500. Retrying with backoff... Error: 500\n";
    let mut replayed = 0;
    for interface in [Interface::QwenAcp, Interface::QwenPrint] {
        for path in files(interface) {
            if scenario(&path) != "error500" {
                continue;
            }
            let file = tokio::fs::File::open(&path).await.unwrap();
            let options =
                agent_api::kit::replay::ReplayOptions::beside(&path).stderr(Some(log.to_string()));
            let backend = QwenBackend::new(AcpConfig::default());
            let run = record(
                agent_api::kit::replay::replay(&backend, file, options)
                    .await
                    .expect("replay starts"),
            )
            .await;
            assert_conformant(&run);
            let retries = run
                .status_labels()
                .iter()
                .filter(|l| *l == "api_retry")
                .count();
            assert_eq!(retries, 2, "{}: {:?}", path.display(), run.types());
            assert!(run.completion.is_err(), "{}", path.display());
            replayed += 1;
        }
    }
    assert_eq!(replayed, 2, "the acp and print recordings of error500");
}
