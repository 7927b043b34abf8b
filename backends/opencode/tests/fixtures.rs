//! Every recorded OpenCode `run` log and `serve` session under `tests/fixtures/opencode/`
//! (opencode 1.18.33) replays conformant through the backend's own converters, with the final
//! text and outcome of the live run.

use std::path::{Path, PathBuf};

use agent_api::kit::replay::replay_file;
use agent_api::universal::ItemStatus;
use agent_api::{AgentError, AgentWrapperEventKind};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use agent_api_opencode::{OpenCodeBackend, OpenCodeConfig};
use serde_json::Value;

fn files(interface: &str) -> Vec<PathBuf> {
    let dir = agent_bench::fixtures_dir().join("opencode").join(interface);
    agent_bench::recordings_in(&dir)
}

async fn replay(path: &Path) -> RunRecord {
    let backend = OpenCodeBackend::new(OpenCodeConfig::default());
    record(
        replay_file(&backend, path, true)
            .await
            .expect("replay starts"),
    )
    .await
}

/// The last finished assistant text part, read straight from the native lines.
fn native_final_text(path: &Path) -> Option<String> {
    let mut last = None;
    for line in std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        let v: Value = serde_json::from_str(line).unwrap();
        let part = match v.get("dir") {
            Some(dir)
                if dir == "event" && v["msg"]["payload"]["type"] == "message.part.updated" =>
            {
                v["msg"]["payload"]["properties"]["part"].clone()
            }
            Some(_) => continue,
            None if v["type"] == "text" => v["part"].clone(),
            None => continue,
        };
        if part["type"] == "text"
            && part["time"]["end"].is_u64()
            && part["text"].as_str().is_some_and(|t| !t.is_empty())
        {
            last = part["text"].as_str().map(str::to_string);
        }
    }
    last
}

fn name(path: &Path) -> String {
    path.file_name()
        .unwrap()
        .to_string_lossy()
        .split('.')
        .next()
        .unwrap()
        .to_string()
}

fn check(path: &Path, run: &RunRecord) {
    assert_conformant(run);
    for event in run
        .wrapper_of(AgentWrapperEventKind::ToolCall)
        .chain(run.wrapper_of(AgentWrapperEventKind::ToolResult))
    {
        let data = event.data.as_ref().expect("tool events carry data");
        assert_eq!(
            data["schema"],
            "agent_api.tools.structured.v1",
            "{}",
            path.display()
        );
    }
    let expected_error = match name(path).as_str() {
        "error401" => Some("auth"),
        "error500_retry_after_ms" => Some("server_error"),
        "sigint_slow" => Some("process_exited"),
        "abort" => Some("cancelled"),
        _ => None,
    };
    match (&run.completion, expected_error) {
        (Ok(done), None) => {
            assert_eq!(
                done.final_text,
                native_final_text(path),
                "{}: final text",
                path.display()
            );
            assert!(
                done.native_session_id
                    .as_deref()
                    .is_some_and(|id| id.starts_with("ses_")),
                "{}",
                path.display()
            );
        }
        (Err(error), Some(code)) => assert_eq!(error.code(), code, "{}: {error}", path.display()),
        (other, expected) => panic!(
            "{}: completion {other:?}, expected error {expected:?}",
            path.display()
        ),
    }
    let terminal = run
        .universal
        .iter()
        .filter(|e| e.type_name() == "error" && e.is_terminal_error())
        .count();
    assert_eq!(
        terminal,
        usize::from(expected_error.is_some()),
        "{}: one terminal error for a failed run",
        path.display()
    );
}

#[tokio::test]
async fn every_run_fixture_replays_conformant_with_the_live_outcome() {
    for path in files("run") {
        let run = replay(&path).await;
        check(&path, &run);
    }
}

#[tokio::test]
async fn every_serve_fixture_replays_conformant_with_the_live_outcome() {
    for path in files("serve") {
        let run = replay(&path).await;
        check(&path, &run);
    }
}

#[tokio::test]
async fn a_run_401_is_a_typed_authentication_error() {
    let path = agent_bench::fixtures_dir().join("opencode/run/error401.stdout.jsonl");
    let run = replay(&path).await;
    assert!(
        matches!(run.completion, Err(AgentError::Auth { .. })),
        "{:?}",
        run.completion
    );
}

#[tokio::test]
async fn a_run_500_is_a_server_error_with_its_status() {
    let path =
        agent_bench::fixtures_dir().join("opencode/run/error500_retry_after_ms.stdout.jsonl");
    let run = replay(&path).await;
    assert!(
        matches!(
            run.completion,
            Err(AgentError::ServerError {
                status: Some(500),
                ..
            })
        ),
        "{:?}",
        run.completion
    );
}

#[tokio::test]
async fn serve_permissions_replay_with_one_request_and_one_resolution() {
    for (scenario, approved) in [
        ("shell_permission_once", true),
        ("shell_permission_reject", false),
    ] {
        let path =
            agent_bench::fixtures_dir().join(format!("opencode/serve/{scenario}.session.jsonl"));
        let run = replay(&path).await;
        assert_eq!(run.of_type("permission.requested").count(), 1, "{scenario}");
        let resolved: Vec<_> = run.of_type("permission.resolved").collect();
        assert_eq!(resolved.len(), 1, "{scenario}");
        let data = serde_json::to_value(resolved[0]).unwrap();
        assert_eq!(
            data["data"]["status"],
            if approved { "approved" } else { "denied" },
            "{scenario}: {data}"
        );
        let results = run.completed_items(agent_api::universal::ItemKind::ToolResult);
        assert_eq!(results.len(), 1, "{scenario}");
        let status = if approved {
            ItemStatus::Completed
        } else {
            ItemStatus::Failed
        };
        assert_eq!(
            results[0].status, status,
            "{scenario}: a rejected tool fails"
        );
    }
}

#[tokio::test]
async fn serve_text_streams_native_deltas() {
    let path = agent_bench::fixtures_dir().join("opencode/serve/reasoning.session.jsonl");
    let run = replay(&path).await;
    let deltas = run
        .universal
        .iter()
        .filter(|e| e.type_name() == "item.delta" && !e.synthetic)
        .count();
    assert!(deltas > 3, "native deltas stream: {deltas}");
    assert!(run.types().contains(&"item.completed"));
    let reasoning = run.universal.iter().any(|e| {
        serde_json::to_value(e)
            .unwrap()
            .to_string()
            .contains("The user wants a greeting")
    });
    assert!(reasoning, "the reasoning is in the transcript");
}

#[tokio::test]
async fn every_acp_fixture_replays_through_the_opencode_kind_with_the_live_outcome() {
    for path in files("acp") {
        let run = replay(&path).await;
        assert_conformant(&run);
        let name = name(&path);
        let text = run
            .completion
            .as_ref()
            .ok()
            .and_then(|c| c.final_text.clone());
        match name.as_str() {
            "cancel" => assert!(
                matches!(run.completion, Err(AgentError::Cancelled)),
                "{:?}",
                run.completion
            ),
            "text" => assert_eq!(text.as_deref(), Some("Hello from mock")),
            "reasoning" => {
                assert_eq!(text.as_deref(), Some("Hello after thinking"));
                assert!(!run.text_on(&agent_api::run::Channel::Reasoning).is_empty());
            }
            "shell_allow_once" => {
                assert_eq!(text.as_deref(), Some("Shell done. Tool output was: hi | "))
            }
            "shell_reject_once" => assert!(run.completion.is_ok(), "{:?}", run.completion),
            other => panic!("a recording this test does not know: {other}"),
        }
        if name.starts_with("shell") {
            assert_eq!(
                (
                    run.of_type("permission.requested").count(),
                    run.of_type("permission.resolved").count()
                ),
                (1, 1),
                "{name}"
            );
        }
    }
}

/// The committed serve recording of one text turn, changed by `edit`, replayed.
async fn replay_edited(edit: impl Fn(&str) -> String) -> RunRecord {
    let text = std::fs::read_to_string(
        agent_bench::fixtures_dir().join("opencode/serve/text.session.jsonl"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edited.session.jsonl");
    std::fs::write(&path, edit(&text)).unwrap();
    replay(&path).await
}

/// A client that sent its prompt with the synchronous `POST /session/{id}/message` (whose answer
/// comes once the turn is over) replays as one that used `prompt_async` (issue 39).
#[tokio::test]
async fn a_serve_recording_prompted_with_the_synchronous_message_call_replays() {
    let run = replay_edited(|text| text.replace("/prompt_async", "/message")).await;
    assert_eq!(
        run.completion
            .as_ref()
            .map(|c| c.final_text.clone())
            .unwrap_or_else(|e| panic!("{e}"))
            .as_deref(),
        Some("Hello from mock")
    );
}

/// A recording of two turns on one session (a second prompt after the first `session.idle`)
/// replays both turns (issue 39).
#[tokio::test]
async fn a_serve_recording_of_two_turns_replays_both() {
    let run = replay_edited(|text| {
        let second = text
            .lines()
            .skip_while(|l| !l.contains("/prompt_async"))
            .collect::<Vec<_>>()
            .join("\n");
        // The second turn's messages, parts and events are its own.
        let second = second
            .replace("msg_2014", "msg_9014")
            .replace("prt_2014", "prt_9014")
            .replace("evt_2014", "evt_9014");
        format!(
            "{text}\n{}",
            second.replace("Hello from mock", "Hello again")
        )
    })
    .await;
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert_eq!(run.assistant_messages(), ["Hello from mock", "Hello again"]);
}
