//! OpenCode's session store (`agent_api.history.*`), read through `opencode export`: the export
//! the pinned CLI printed (`tests/fixtures/history/opencode`), and end to end: after a real
//! `run` on the bench, the store lists that session and reads it back with the live run's final
//! text and tool calls.

mod common;

use std::path::Path;

use agent_api::history::{read_store_lines, SessionQuery};
use agent_api::kit::line_source;
use agent_api::kit::lines::DEFAULT_LINE_CAP;
use agent_api::universal::{ItemKind, ItemRole};
use agent_api::{AgentBackend, AgentError, AgentKind, PermissionDecision, RunRequest};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use agent_api_opencode::history::{export_lines, StoredOpenCodeSession};
use agent_api_opencode::Interface;
use common::*;
use serde_json::Value;

/// Name, arguments and call id of every completed tool call.
fn tool_calls(run: &RunRecord) -> Vec<(String, Value, String)> {
    run.completed_items(ItemKind::ToolCall)
        .iter()
        .filter_map(|item| {
            item.tool_call().map(|c| {
                (
                    c.name.to_string(),
                    c.arguments_json().unwrap_or(Value::Null),
                    c.call_id.to_string(),
                )
            })
        })
        .collect()
}

#[tokio::test]
async fn the_recorded_export_reads_back_as_the_run_it_was() {
    let text = std::fs::read_to_string(
        agent_bench::fixtures_dir().join("history/opencode/shell.export.json"),
    )
    .unwrap();
    let export: Value = serde_json::from_str(&text).unwrap();
    let lines: String = export_lines(&export)
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    let source = line_source(std::io::Cursor::new(lines.into_bytes()), DEFAULT_LINE_CAP);
    let kind = AgentKind::new("opencode").unwrap();
    let run = record(read_store_lines(
        kind,
        source,
        Box::new(StoredOpenCodeSession::default()),
        true,
        true,
    ))
    .await;
    assert_conformant(&run);
    let completion = run.completion.as_ref().unwrap();
    assert_eq!(
        completion.final_text.as_deref(),
        Some("Tool finished. Output was: hi")
    );
    assert_eq!(
        completion.native_session_id.as_deref(),
        Some("ses_df68d4c61ffetfgeNcfvICqCh7")
    );
    let calls = tool_calls(&run);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].0.as_str(), calls[0].2.as_str()),
        ("bash", "call_mock_1")
    );
    assert_eq!(calls[0].1["command"], "echo hi > out.txt && cat out.txt");
    let users: Vec<String> = run
        .completed_items(ItemKind::Message)
        .iter()
        .filter(|i| i.role == Some(ItemRole::User))
        .map(|i| i.text())
        .collect();
    assert_eq!(
        users,
        ["\"run the command\""],
        "the prompt as OpenCode stored it"
    );
}

#[tokio::test]
async fn e2e_a_real_run_is_listed_and_read_back_as_the_live_run() {
    let Some((_server, sandbox)) = setup("shell").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Run);
    let live = drive(
        &backend,
        RunRequest::new("run the command"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&live);
    let completion = live.completion.as_ref().unwrap();
    let id = completion.native_session_id.clone().unwrap();

    let store = backend
        .session_store()
        .expect("OpenCode has a session store");
    let listed = store
        .list_sessions(&SessionQuery::in_dir(&sandbox.cwd))
        .await
        .unwrap();
    let session = listed
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("{id} not in {listed:?}"));
    assert_eq!(session.cwd.as_deref(), Some(Path::new(&sandbox.cwd)));
    assert!(session.title.is_some());

    let stored = record(store.read_session(&id, false).await.unwrap()).await;
    assert_conformant(&stored);
    assert_eq!(
        completion.final_text.as_deref(),
        Some("Tool finished. Output was: hi")
    );
    assert_eq!(
        stored.completion.as_ref().unwrap().final_text,
        completion.final_text
    );
    assert_eq!(tool_calls(&live).len(), 1);
    assert_eq!(tool_calls(&stored), tool_calls(&live));
    assert!(matches!(
        store.read_session("ses_nothing_here", false).await,
        Err(AgentError::SessionNotFound { .. })
    ));
}
