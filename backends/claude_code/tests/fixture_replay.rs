//! Every recorded Claude Code 2.1.197 fixture (print stdout and two-way control sessions)
//! replays conformant through the backend's own protocol.

use agent_api::run::Channel;
use std::path::{Path, PathBuf};

use agent_api::kit::replay::replay_file;
use agent_api::universal::{ContentPart, ItemKind, ItemRole, ItemStatus, UniversalEventBody};
use agent_api::{AgentError, AgentWrapperEventKind};
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use serde_json::Value;

/// The repository's Claude Code recordings (`tests/fixtures/claude_code`).
fn fixture_root() -> PathBuf {
    let dir = agent_bench::fixtures_dir().join("claude_code");
    assert!(
        dir.is_dir(),
        "Claude Code fixtures not found at {}",
        dir.display()
    );
    dir
}

fn fixtures() -> Vec<PathBuf> {
    let mut all = Vec::new();
    for interface in ["print", "control"] {
        for entry in std::fs::read_dir(fixture_root().join(interface)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".stdout.jsonl") || name.ends_with(".session.jsonl") {
                all.push(path);
            }
        }
    }
    all.sort();
    assert!(
        all.len() >= 24,
        "expected the 17 print and 7 control fixtures, found {}",
        all.len()
    );
    all
}

/// The native lines the CLI printed (the `recv` side of a session).
fn native_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            match v.get("dir").and_then(Value::as_str) {
                Some("recv") => match v.get("msg")? {
                    Value::String(s) => serde_json::from_str(s).ok(),
                    other => Some(other.clone()),
                },
                Some(_) => None,
                None => Some(v),
            }
        })
        .collect()
}

async fn replay(path: &Path) -> RunRecord {
    let backend = ClaudeCodeBackend::new(ClaudeCodeConfig::default());
    let handle = replay_file(&backend, path, true).await.unwrap();
    record(handle).await
}

/// Texts of completed assistant answer items, in order.
#[tokio::test]
async fn every_fixture_replays_conformant_with_text_equal_to_the_cli_result() {
    for path in fixtures() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let run = replay(&path).await;
        assert_conformant(&run);
        let lines = native_lines(&path);
        let results: Vec<&Value> = lines.iter().filter(|l| l["type"] == "result").collect();
        let items = run.assistant_messages();
        // Streamed text appears exactly once: the wrapper's assistant text is the items' text.
        assert_eq!(
            run.assistant_text(),
            items.concat(),
            "{name}: streamed text differs from the items' text"
        );
        match results.last() {
            Some(last) if last["is_error"] == false => {
                let want = last["result"].as_str().unwrap();
                let got = items
                    .iter()
                    .rev()
                    .find(|t| !t.is_empty())
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(
                    got, want,
                    "{name}: last assistant text differs from the CLI's result"
                );
                let completion = run
                    .completion
                    .as_ref()
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(completion.final_text.as_deref(), Some(want), "{name}");
                assert_eq!(
                    completion.native_session_id.as_deref(),
                    last["session_id"].as_str(),
                    "{name}"
                );
                assert!(
                    completion
                        .usage
                        .as_ref()
                        .is_some_and(|u| u.output_tokens.is_some()),
                    "{name}: no usage"
                );
            }
            Some(_) => {
                assert!(
                    run.completion.is_err(),
                    "{name}: an error result must fail the run"
                );
                // The synthetic API-error message is not assistant text.
                assert!(
                    items.iter().all(String::is_empty),
                    "{name}: error text leaked as assistant text: {items:?}"
                );
            }
            None => {
                assert!(
                    matches!(
                        run.completion,
                        Err(AgentError::ProcessExited {
                            exit_code: Some(1),
                            ..
                        })
                    ),
                    "{name}: {:?}",
                    run.completion
                )
            }
        }
        let terminal = run.wrapper_of(AgentWrapperEventKind::Error).count();
        assert_eq!(
            terminal,
            usize::from(run.completion.is_err()),
            "{name}: terminal Error events"
        );
    }
}

#[tokio::test]
async fn api_error_fixtures_are_typed_and_reported_once() {
    let root = fixture_root().join("print");
    let run = replay(&root.join("error401.stdout.jsonl")).await;
    assert!(
        matches!(&run.completion, Err(AgentError::Auth { message }) if message.contains("Invalid API key")),
        "{:?}",
        run.completion
    );
    for name in ["error500_retries1", "error500_default_retries"] {
        let run = replay(&root.join(format!("{name}.stdout.jsonl"))).await;
        assert!(
            matches!(
                run.completion,
                Err(AgentError::ServerError {
                    status: Some(500),
                    ..
                })
            ),
            "{name}: {:?}",
            run.completion
        );
        // One failure, one error event: the terminal one (the CLI's API-error message is not told twice).
        let errors: Vec<_> = run.of_type("error").collect();
        assert_eq!(errors.len(), 1, "{name}");
        let UniversalEventBody::Error(error) = &errors[0].body else {
            unreachable!()
        };
        assert!(
            errors[0].is_terminal_error() && error.message.contains("API Error: 500"),
            "{name}: {}",
            error.message
        );
        let retries = run.universal.iter().filter(|e| matches!(&e.body, UniversalEventBody::ItemCompleted(d) if d.item.content.iter().any(|p| matches!(p, ContentPart::Status { label, .. } if label == "api_retry")))).count();
        assert_eq!(
            retries,
            if name == "error500_retries1" { 1 } else { 10 },
            "{name}"
        );
    }
}

#[tokio::test]
async fn bash_fixtures_map_to_command_execution_with_exit_code_and_byte_counts() {
    let run = replay(&fixture_root().join("print/bash_partial.stdout.jsonl")).await;
    let calls = run.completed_items(ItemKind::ToolCall);
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(call.tool.as_ref().unwrap().kind, "command_execution");
    let ContentPart::ToolCall {
        name,
        arguments,
        call_id,
    } = &call.content[0]
    else {
        panic!("{call:?}")
    };
    assert_eq!(name, "Bash");
    assert_eq!(
        serde_json::from_str::<Value>(arguments).unwrap()["command"],
        "echo hi > out.txt && cat out.txt"
    );
    let parent = call
        .parent_id
        .clone()
        .expect("a tool call's parent is its message");
    assert!(run
        .universal
        .iter()
        .any(|e| matches!(&e.body, UniversalEventBody::ItemStarted(d) if d.item.item_id == parent && d.item.kind == ItemKind::Message)));
    // The input streamed as deltas on the tool_call item.
    assert_eq!(
        run.universal.iter().filter(|e| matches!(&e.body, UniversalEventBody::ItemDelta(d) if *d.item_id == *call.item_id)).count(),
        2
    );
    let results = run.completed_items(ItemKind::ToolResult);
    let meta = results[0].tool.as_ref().unwrap();
    assert_eq!(
        (meta.kind.as_str(), meta.exit_code, meta.bytes.stdout),
        ("command_execution", Some(0), 2)
    );
    assert_eq!(results[0].parent_id.as_deref(), Some(call.item_id.as_str()));
    assert!(
        matches!(&results[0].content[0], ContentPart::ToolResult { call_id: c, output } if c == call_id && output == "hi")
    );
    let facet = run
        .wrapper_of(AgentWrapperEventKind::ToolResult)
        .last()
        .unwrap()
        .data
        .clone()
        .unwrap();
    assert_eq!(facet["tool"]["exit_code"], 0);
    assert_eq!(facet["tool"]["status"], "completed");
    let summary =
        agent_api::run::RunSummary::from_events(&run.universal, run.completion.as_ref().ok());
    let summed = &summary.tool_calls[0];
    assert_eq!(
        (summed.name.as_str(), summed.command.as_deref()),
        ("Bash", Some("echo hi > out.txt && cat out.txt"))
    );
    assert_eq!((summed.exit_code, summed.output_bytes), (Some(0), 2));

    let denied = replay(&fixture_root().join("print/bash_denied.stdout.jsonl")).await;
    let result = &denied.completed_items(ItemKind::ToolResult)[0];
    assert_eq!(result.status, ItemStatus::Failed);
    assert_eq!(
        denied.completion.as_ref().unwrap().data.as_ref().unwrap()["permission_denials"],
        1
    );
}

#[tokio::test]
async fn write_and_edit_fixtures_carry_file_refs_with_diffs() {
    for fixture in [
        "print/write_accept_edits.stdout.jsonl",
        "control/write_can_use_tool.session.jsonl",
    ] {
        let run = replay(&fixture_root().join(fixture)).await;
        let refs: Vec<(String, agent_api::universal::FileAction, Option<String>)> = run
            .completed_items(ItemKind::ToolResult)
            .iter()
            .flat_map(|i| i.content.clone())
            .filter_map(|p| match p {
                ContentPart::FileRef { path, action, diff } => Some((path, action, diff)),
                _ => None,
            })
            .collect();
        assert_eq!(refs.len(), 2, "{fixture}");
        assert!(refs[0].0.ends_with("/created.txt"));
        assert_eq!(refs[0].1, agent_api::universal::FileAction::Write);
        assert!(
            refs[0].2.as_deref().unwrap().contains("+created by mock"),
            "{fixture}"
        );
        assert_eq!(refs[1].1, agent_api::universal::FileAction::Patch);
        assert!(
            refs[1]
                .2
                .as_deref()
                .unwrap()
                .contains("-created by mock\n+edited by mock"),
            "{fixture}"
        );
        let calls = run.completed_items(ItemKind::ToolCall);
        assert!(
            calls
                .iter()
                .all(|c| c.tool.as_ref().unwrap().kind == "file_change"),
            "{fixture}"
        );
    }
}

#[tokio::test]
async fn control_fixtures_resolve_permissions_as_the_client_answered() {
    for (name, approved) in [
        ("allow", true),
        ("allow_modified", true),
        ("no_initialize", true),
        ("deny", false),
    ] {
        let run = replay(&fixture_root().join(format!("control/{name}.session.jsonl"))).await;
        let requested: Vec<_> = run.of_type("permission.requested").collect();
        let resolved: Vec<_> = run.of_type("permission.resolved").collect();
        assert_eq!((requested.len(), resolved.len()), (1, 1), "{name}");
        let UniversalEventBody::PermissionResolved(data) = &resolved[0].body else {
            unreachable!()
        };
        assert_eq!(
            data.status == agent_api::universal::PermissionStatus::Approved,
            approved,
            "{name}"
        );
        assert!(
            data.action.starts_with("Bash: echo hi"),
            "{name}: {}",
            data.action
        );
        // The user's message comes from what the client sent.
        let user = run.universal.iter().find_map(|e| match &e.body {
            UniversalEventBody::ItemCompleted(d) if d.item.role == Some(ItemRole::User) => {
                Some(d.item.text())
            }
            _ => None,
        });
        assert_eq!(user.as_deref(), Some("run the command"), "{name}");
    }
}

#[tokio::test]
async fn thinking_fixture_gives_a_reasoning_item_before_the_answer() {
    let run = replay(&fixture_root().join("print/thinking.stdout.jsonl")).await;
    let reasoning: Vec<String> = run
        .universal
        .iter()
        .filter_map(|e| match &e.body {
            UniversalEventBody::ItemCompleted(d) if d.item.is_reasoning() => {
                d.item.content.iter().find_map(|p| match p {
                    ContentPart::Reasoning { text, .. } => Some(text.clone()),
                    _ => None,
                })
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        reasoning,
        ["The user said hello. I should greet them back."]
    );
    assert!(run.wrapper.iter().any(|e| e.is_on(&Channel::Reasoning)));
    assert_eq!(run.assistant_text(), "Hello after thinking");
}

#[tokio::test]
async fn multiturn_and_interrupt_sessions_keep_one_session_and_report_each_turn() {
    let run = replay(&fixture_root().join("control/multiturn.session.jsonl")).await;
    assert_eq!(run.of_type("session.started").count(), 1);
    let users: Vec<String> = run
        .universal
        .iter()
        .filter_map(|e| match &e.body {
            UniversalEventBody::ItemCompleted(d) if d.item.role == Some(ItemRole::User) => {
                Some(d.item.text())
            }
            _ => None,
        })
        .collect();
    assert_eq!(users, ["first message", "second message", "third message"]);
    assert_eq!(run.assistant_messages().len(), 3);

    let run = replay(&fixture_root().join("control/interrupt_stream.session.jsonl")).await;
    let items = run.assistant_messages();
    assert_eq!(items, ["word0 word1 word2 ", "Fast reply after interrupt"]);
    let statuses: Vec<String> = run.status_labels();
    for want in ["interrupt_requested", "interrupted", "turn_interrupted"] {
        assert!(
            statuses.iter().any(|s| s == want),
            "{want} missing from {statuses:?}"
        );
    }
}

#[tokio::test]
async fn system_init_starts_the_session_natively_with_its_metadata_before_the_user_message() {
    for path in fixtures() {
        let text = std::fs::read_to_string(&path).unwrap();
        if !text.contains(r#""subtype":"init""#) {
            continue;
        }
        let run = replay(&path).await;
        let first = &run.universal[0];
        assert!(
            !first.synthetic,
            "{}: session.started is synthetic",
            path.display()
        );
        match &first.body {
            UniversalEventBody::SessionStarted(started) => {
                let metadata = started
                    .metadata
                    .as_ref()
                    .unwrap_or_else(|| panic!("{}: no metadata", path.display()));
                assert!(
                    metadata.get("model").is_some_and(Value::is_string),
                    "{}: no model in {metadata}",
                    path.display()
                );
                assert!(
                    metadata.get("tools").is_some_and(Value::is_array),
                    "{}: no tools in {metadata}",
                    path.display()
                );
            }
            other => panic!("{}: first event is {other:?}", path.display()),
        }
        assert!(first.native_session_id.is_some(), "{}", path.display());
        let user = run
            .completed_items(ItemKind::Message)
            .into_iter()
            .find(|i| i.role == Some(ItemRole::User));
        if path.to_string_lossy().contains("/control/") {
            assert!(
                user.is_some(),
                "{}: the sent user message is missing",
                path.display()
            );
        }
    }
}
