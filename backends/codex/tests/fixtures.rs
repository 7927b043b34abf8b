//! Every recorded Codex session under `tests/fixtures/codex/` (exec stdout and app-server
//! sessions of codex-cli 0.169.0) replays conformant through the backend's own converters.

use agent_api::run::Channel;
use std::path::{Path, PathBuf};

use agent_api::kit::replay::replay_file;
use agent_api::universal::{ContentPart, ItemKind, UniversalEventBody};
use agent_api::{AgentError, AgentWrapperEventKind};
use agent_api_codex::{CodexBackend, CodexConfig};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use serde_json::Value;

fn fixtures() -> PathBuf {
    agent_bench::fixtures_dir().join("codex")
}

fn files(interface: &str) -> Vec<PathBuf> {
    let dir = fixtures().join(interface);
    agent_bench::recordings_in(&dir)
}

async fn replay(path: &Path) -> RunRecord {
    let backend = CodexBackend::new(CodexConfig::default());
    let handle = replay_file(&backend, path, true)
        .await
        .expect("replay starts");
    record(handle).await
}

/// The assistant text the recording holds, read straight from the native lines: completed agent
/// messages only: an item that never completed is no answer, and the wrapper view drops its text.
fn native_assistant_text(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        let msg = if v.get("dir").is_some() {
            if v["dir"] != "recv" {
                continue;
            }
            v["msg"].clone()
        } else {
            v
        };
        if msg["type"] == "item.completed" && msg["item"]["type"] == "agent_message" {
            out.push_str(msg["item"]["text"].as_str().unwrap());
        }
        if msg["method"] == "item/completed" && msg["params"]["item"]["type"] == "agentMessage" {
            out.push_str(msg["params"]["item"]["text"].as_str().unwrap());
        }
    }
    out
}

fn check_common(path: &Path, run: &RunRecord) {
    assert_conformant(run);
    assert_eq!(
        run.assistant_text(),
        native_assistant_text(path),
        "{}: assistant text assembled once",
        path.display()
    );
    for event in run
        .wrapper_of(AgentWrapperEventKind::ToolCall)
        .chain(run.wrapper_of(AgentWrapperEventKind::ToolResult))
    {
        let data = event.data.as_ref().expect("tool events carry data");
        assert_eq!(data["schema"], "agent_api.tools.structured.v1");
        assert!(data["tool"]["kind"].is_string());
    }
    let first = &run.universal[0];
    assert_eq!(first.type_name(), "session.started");
    assert!(
        !first.synthetic,
        "{}: Codex starts its session natively",
        path.display()
    );
}

fn error_of(run: &RunRecord) -> &AgentError {
    run.completion.as_ref().expect_err("the run fails")
}

#[tokio::test]
async fn every_exec_fixture_replays_conformant() {
    for path in files("exec") {
        let run = replay(&path).await;
        check_common(&path, &run);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        match name.split('.').next().unwrap() {
            "error401_noretry" => assert!(
                matches!(error_of(&run), AgentError::Auth { .. }),
                "{name}: {:?}",
                run.completion
            ),
            "error500_noretry" | "error500_default_retries" => {
                assert!(
                    matches!(error_of(&run), AgentError::ServerError { .. }),
                    "{name}: {:?}",
                    run.completion
                )
            }
            _ => {
                let done = run
                    .completion
                    .as_ref()
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(done.native_session_id.is_some(), "{name}");
                assert!(done.usage.is_some(), "{name}");
            }
        }
    }
}

#[tokio::test]
async fn every_app_server_fixture_replays_conformant() {
    for path in files("app_server") {
        let run = replay(&path).await;
        check_common(&path, &run);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        match name.split('.').next().unwrap() {
            "error401" => {
                assert!(
                    matches!(error_of(&run), AgentError::Auth { .. }),
                    "{name}: {:?}",
                    run.completion
                );
                // The native error notification is a non-terminal error event, typed.
                assert!(run
                    .of_type("error")
                    .any(|e| matches!(&e.body, UniversalEventBody::Error(d) if d.code.as_deref() == Some("auth") && !d.is_terminal())));
                assert!(
                    !error_of(&run).to_string().contains("sk-test"),
                    "the API key is not echoed"
                );
            }
            "interrupt_stream" => assert!(
                matches!(error_of(&run), AgentError::Cancelled),
                "{name}: {:?}",
                run.completion
            ),
            _ => {
                let done = run
                    .completion
                    .as_ref()
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(done.native_session_id.is_some(), "{name}");
                assert!(done.usage.is_some(), "{name}");
            }
        }
    }
}

#[tokio::test]
async fn app_server_text_streams_native_deltas_and_reports_this_turns_usage() {
    let run = replay(&fixtures().join("app_server/text.session.jsonl")).await;
    let native = run.of_type("item.delta").filter(|e| !e.synthetic).count();
    let synthetic = run.of_type("item.delta").filter(|e| e.synthetic).count();
    assert_eq!(
        (native, synthetic),
        (3, 1),
        "three native agent deltas; the echoed user message gets the one synthetic delta"
    );
    let done = run.completion.as_ref().unwrap();
    assert_eq!(done.final_text.as_deref(), Some("Hello from mock"));
    assert_eq!(
        done.native_session_id.as_deref(),
        Some("01a2013a-0253-7b91-934e-e052f9d1bf5c")
    );
    let usage = done.usage.as_ref().unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (Some(120), Some(12))
    );
}

#[tokio::test]
async fn exec_usage_reads_the_snake_case_fields_of_turn_completed() {
    // exec --json spells usage in snake_case, the app server in camelCase: a camelCase-only
    // reader reported 0 tokens here.
    let run = replay(&fixtures().join("exec/reasoning.stdout.jsonl")).await;
    let usage = run.completion.as_ref().unwrap().usage.clone().unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.reasoning_tokens,
            usage.cached_input_tokens
        ),
        (Some(120), Some(12), Some(7), Some(0))
    );
}

#[tokio::test]
async fn app_server_resume_counts_only_the_new_turns_usage() {
    let run = replay(&fixtures().join("app_server/resume_p2.session.jsonl")).await;
    let usage = run.completion.as_ref().unwrap().usage.clone().unwrap();
    assert_eq!(
        usage.input_tokens,
        Some(120),
        "the resumed thread's earlier usage is not counted"
    );
}

#[tokio::test]
async fn app_server_reasoning_becomes_a_reasoning_item() {
    let run = replay(&fixtures().join("app_server/reasoning.session.jsonl")).await;
    let reasoning = run.text_on(&Channel::Reasoning);
    assert!(
        reasoning.starts_with("**Planning a greeting**"),
        "{reasoning}"
    );
    let item = run.universal.iter().find_map(|e| match &e.body {
        UniversalEventBody::ItemCompleted(d) if d.item.is_reasoning() => Some(d.item.clone()),
        _ => None,
    });
    let item = item.expect("a completed reasoning item");
    assert!(
        matches!(&item.content[0], ContentPart::Reasoning { text, .. } if text == "**Planning a greeting** I should greet the user.")
    );
}

#[tokio::test]
async fn app_server_approvals_are_permission_events_resolved_by_the_recorded_answers() {
    for (name, approved) in [
        ("shell_approve", true),
        ("shell_decline", false),
        ("patch_approve", true),
    ] {
        let run = replay(&fixtures().join(format!("app_server/{name}.session.jsonl"))).await;
        let requested: Vec<_> = run.of_type("permission.requested").collect();
        let resolved: Vec<_> = run.of_type("permission.resolved").collect();
        assert_eq!((requested.len(), resolved.len()), (1, 1), "{name}");
        let UniversalEventBody::PermissionResolved(p) = &resolved[0].body else {
            unreachable!()
        };
        assert_eq!(
            p.status == agent_api::universal::PermissionStatus::Approved,
            approved,
            "{name}"
        );
    }
}

/// A file-change approval names only its item: the permission shows the item's paths and diff,
/// so the person approving sees what will be written.
#[tokio::test]
async fn a_file_change_approval_shows_its_paths_and_diff() {
    let run = replay(&fixtures().join("app_server/patch_approve.session.jsonl")).await;
    let requested = run
        .of_type("permission.requested")
        .next()
        .expect("one request");
    let UniversalEventBody::PermissionRequested(p) = &requested.body else {
        unreachable!()
    };
    assert_eq!(
        p.details.file.as_deref(),
        Some("/home/dev/work/appserver_patch_approve/hello.txt")
    );
    assert_eq!(
        p.details.diff.as_deref(),
        Some("--- /home/dev/work/appserver_patch_approve/hello.txt\nHello from apply_patch\n")
    );
}

#[tokio::test]
async fn app_server_commands_and_patches_carry_their_facets_and_diffs() {
    let run = replay(&fixtures().join("app_server/shell_approve.session.jsonl")).await;
    let result = run
        .wrapper_of(AgentWrapperEventKind::ToolResult)
        .last()
        .unwrap();
    let tool = &result.data.as_ref().unwrap()["tool"];
    assert_eq!(tool["kind"], "command_execution");
    assert_eq!(tool["exit_code"], 0);
    assert_eq!(
        tool["bytes"]["stdout"],
        "profile: cannot rehash: /usr/local/bin isn't writable\nhi\n".len()
    );
    assert_eq!(tool["phase"], "complete");

    let declined = replay(&fixtures().join("app_server/shell_decline.session.jsonl")).await;
    let last = declined
        .wrapper_of(AgentWrapperEventKind::ToolResult)
        .last()
        .unwrap();
    assert_eq!(
        last.data.as_ref().unwrap()["tool"]["status"],
        "failed",
        "a declined command fails"
    );

    let patch = replay(&fixtures().join("app_server/patch_approve.session.jsonl")).await;
    let tool = &patch
        .wrapper_of(AgentWrapperEventKind::ToolResult)
        .last()
        .unwrap()
        .data
        .as_ref()
        .unwrap()["tool"];
    assert_eq!(tool["kind"], "file_change");
    assert_eq!(tool["bytes"]["diff"], "Hello from apply_patch\n".len());
    let diff_item = patch.universal.iter().find_map(|e| match &e.body {
        UniversalEventBody::ItemCompleted(d)
            if d.item.kind == ItemKind::Status
                && d.item
                    .content
                    .iter()
                    .any(|p| matches!(p, ContentPart::FileRef { .. })) =>
        {
            Some(d.item.clone())
        }
        _ => None,
    });
    let diff_item = diff_item.expect("turn/diff/updated becomes a status item with file_ref parts");
    assert!(diff_item.content.iter().any(
        |p| matches!(p, ContentPart::FileRef { path, diff: Some(d), .. } if path == "hello.txt" && d.contains("+Hello from apply_patch"))
    ));
    let diff_items = patch.universal.iter().filter(|e| matches!(&e.body, UniversalEventBody::ItemCompleted(d) if d.item.kind == ItemKind::Status && d.item.content.iter().any(|p| matches!(p, ContentPart::FileRef { .. })))).count();
    assert_eq!(diff_items, 1, "an unchanged repeated diff is reported once");
}

#[tokio::test]
async fn app_server_interrupt_fails_the_open_message() {
    let run = replay(&fixtures().join("app_server/interrupt_stream.session.jsonl")).await;
    let failed = run.universal.iter().any(|e| matches!(&e.body, UniversalEventBody::ItemCompleted(d) if d.item.kind == ItemKind::Message && d.item.status == agent_api::universal::ItemStatus::Failed && e.source == agent_api::universal::EventSource::Agent));
    assert!(
        failed,
        "the message the interrupt cut off is failed by the converter, before the session ends"
    );
}

#[tokio::test]
async fn exec_messages_get_one_synthetic_delta_and_tools_their_facets() {
    let run = replay(&fixtures().join("exec/shell_bypass.stdout.jsonl")).await;
    let deltas: Vec<_> = run.of_type("item.delta").collect();
    assert!(
        deltas.iter().all(|d| d.synthetic),
        "exec has no native deltas"
    );
    let tool = &run
        .wrapper_of(AgentWrapperEventKind::ToolResult)
        .last()
        .unwrap()
        .data
        .as_ref()
        .unwrap()["tool"];
    assert_eq!(
        (
            tool["kind"].as_str(),
            tool["exit_code"].as_i64(),
            tool["bytes"]["stdout"].as_u64()
        ),
        (Some("command_execution"), Some(0), Some(3))
    );
    let patch = replay(&fixtures().join("exec/patch.stdout.jsonl")).await;
    let tool = &patch
        .wrapper_of(AgentWrapperEventKind::ToolCall)
        .last()
        .unwrap()
        .data
        .as_ref()
        .unwrap()["tool"];
    assert_eq!(tool["kind"], "file_change");
}

#[test]
fn the_typed_exec_path_matches_the_value_path_on_every_exec_fixture() {
    use agent_api::kit::replay::RecordingFormat;
    use agent_api::kit::replay::Replay;
    let backend = CodexBackend::new(CodexConfig::default());
    for path in files("exec") {
        let text = std::fs::read(&path).unwrap();
        let lines: Vec<&[u8]> = text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        agent_api_conformance::typed::assert_typed_matches_value(
            || {
                backend
                    .replay_protocol(RecordingFormat::NativeStdout)
                    .unwrap()
            },
            &lines,
        );
    }
}

/// Codex's "Reconnecting... n/m" notices are retries, not failures: each is an `api_retry`
/// status while it retries, and only the failure it gives up with is an error (issue 39).
#[tokio::test]
async fn exec_reconnect_notices_are_retry_statuses_not_errors() {
    let run = replay(&fixtures().join("exec/error500_default_retries.stdout.jsonl")).await;
    let retries: Vec<String> = run
        .universal
        .iter()
        .filter_map(|e| e.completed_item())
        .flat_map(|item| &item.content)
        .filter_map(|p| match p {
            ContentPart::Status { label, detail } if label == "api_retry" => detail.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 5, "{retries:?}");
    assert!(retries[0].starts_with("attempt 1 of 5"), "{retries:?}");
    let errors: Vec<_> = run.of_type("error").collect();
    assert!(
        errors
            .iter()
            .all(|e| !serde_json::to_string(e).unwrap().contains("Reconnecting")),
        "{errors:?}"
    );
    assert!(
        matches!(
            error_of(&run),
            AgentError::ServerError { .. } | AgentError::Overloaded { .. }
        ),
        "{:?}",
        run.completion
    );
}
