//! The chat stores of Gemini CLI and Qwen Code (`agent_api.history.*`): the files the pinned CLIs
//! wrote (`tests/fixtures/history/{gemini,qwen}`), and end to end: after a real run on the bench,
//! the store lists that chat and reads it back with the live run's final text and tool calls.

use std::path::Path;
use std::time::Duration;

use agent_api::history::{SessionQuery, SessionStore};
use agent_api::universal::ItemKind;
use agent_api::{AgentBackend, AgentError, PermissionPolicy, RunRequest};
use agent_api_acp::AcpConfig;
use agent_api_conformance::{assert_conformant, record, RunRecord};
use agent_api_gemini::history::GeminiSessionStore;
use agent_api_gemini::GeminiBackend;
use agent_api_gemini::{GeminiInterface, GeminiOptions, HeadlessApproval};
use agent_api_qwen::history::QwenSessionStore;
use agent_api_qwen::QwenBackend;
use agent_api_qwen::{QwenInterface, QwenOptions};
use agent_bench::sandbox::GEMINI_MODEL;
use agent_bench::{Cli, ModelServer, Sandbox};
use serde_json::Value;

const GEMINI_ID: &str = "ee446fbf-5034-4b10-b158-b8e30f9a921d";
const QWEN_ID: &str = "5552f927-3e8f-4baf-a9b1-dbf114526179";

fn fixture(path: &str) -> String {
    std::fs::read_to_string(agent_bench::fixtures_dir().join("history").join(path)).unwrap()
}

/// A `~/.gemini` holding the recorded chat where the CLI puts it.
fn gemini_store() -> (tempfile::TempDir, GeminiSessionStore) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("tmp/shell");
    std::fs::create_dir_all(project.join("chats")).unwrap();
    std::fs::write(project.join(".project_root"), "/home/dev/work/shell").unwrap();
    std::fs::write(
        project.join("chats/session-2026-11-23T17-17-ee446fbf.jsonl"),
        fixture("gemini/shell.jsonl"),
    )
    .unwrap();
    let store = GeminiSessionStore::new(dir.path());
    (dir, store)
}

/// A `~/.qwen` holding the recorded chat where the CLI puts it.
fn qwen_store() -> (tempfile::TempDir, QwenSessionStore) {
    let dir = tempfile::tempdir().unwrap();
    let chats = dir.path().join("projects/-home-dev-work-shell/chats");
    std::fs::create_dir_all(&chats).unwrap();
    std::fs::write(
        chats.join(format!("{QWEN_ID}.jsonl")),
        fixture("qwen/shell.jsonl"),
    )
    .unwrap();
    let store = QwenSessionStore::new(dir.path());
    (dir, store)
}

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

/// Lists `store` (all, in the recorded cwd, elsewhere) and reads `id` back: the shell scenario.
async fn check_recorded(store: &dyn SessionStore, id: &str, answer_starts: &str) {
    let sessions = store.list_sessions(&SessionQuery::all()).await.unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].id, id);
    assert_eq!(
        sessions[0].cwd.as_deref(),
        Some(Path::new("/home/dev/work/shell"))
    );
    assert_eq!(sessions[0].first_prompt.as_deref(), Some("run the command"));
    assert_eq!(
        store
            .list_sessions(&SessionQuery::in_dir("/home/dev/work/shell"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(store
        .list_sessions(&SessionQuery::in_dir("/elsewhere"))
        .await
        .unwrap()
        .is_empty());

    let run = record(store.read_session(id, true).await.unwrap()).await;
    assert_conformant(&run);
    let completion = run.completion.as_ref().unwrap();
    assert!(
        completion
            .final_text
            .as_deref()
            .unwrap()
            .starts_with(answer_starts),
        "{:?}",
        completion.final_text
    );
    assert_eq!(completion.native_session_id.as_deref(), Some(id));
    let calls = tool_calls(&run);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "run_shell_command");
    assert_eq!(calls[0].1["command"], "echo hi > out.txt && cat out.txt");
    assert_eq!(run.completed_items(ItemKind::ToolResult).len(), 1);
    assert!(matches!(
        store.read_session("no-such-chat", false).await,
        Err(AgentError::SessionNotFound { .. })
    ));
}

#[tokio::test]
async fn the_recorded_gemini_chat_is_listed_and_read_back() {
    let (_dir, store) = gemini_store();
    check_recorded(&store, GEMINI_ID, "Tool finished. Output was: ").await;
}

#[tokio::test]
async fn the_recorded_qwen_chat_is_listed_and_read_back() {
    let (_dir, store) = qwen_store();
    check_recorded(
        &store,
        QWEN_ID,
        "Tool finished. Output was: Command: echo hi",
    )
    .await;
}

fn backend(sandbox: &Sandbox, qwen: bool) -> std::sync::Arc<dyn AgentBackend> {
    let mut config = AcpConfig::with_binary(&sandbox.program).working_dir(&sandbox.cwd);
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    if qwen {
        std::sync::Arc::new(QwenBackend::new(config))
    } else {
        std::sync::Arc::new(GeminiBackend::new(config))
    }
}

/// After a live run of `request`, the store lists the run's session and reads it back the same.
async fn check_live(backend: &dyn AgentBackend, cwd: &Path, request: RunRequest) {
    let live = record(
        backend
            .run(request.with_timeout(Duration::from_secs(120)))
            .await
            .unwrap(),
    )
    .await;
    assert_conformant(&live);
    let completion = live.completion.as_ref().unwrap();
    let id = completion.native_session_id.clone().unwrap();
    let store = backend.session_store().expect("a session store");
    let listed = store
        .list_sessions(&SessionQuery::in_dir(cwd))
        .await
        .unwrap();
    let session = listed
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("{id} not in {listed:?}"));
    assert_eq!(session.first_prompt.as_deref(), Some("run the command"));
    let stored = record(store.read_session(&id, false).await.unwrap()).await;
    assert_conformant(&stored);
    assert!(completion
        .final_text
        .as_deref()
        .unwrap()
        .starts_with("Tool finished. Output was: "));
    assert_eq!(
        stored.completion.as_ref().unwrap().final_text,
        completion.final_text
    );
    assert_eq!(tool_calls(&live).len(), 1);
    assert_eq!(tool_calls(&stored), tool_calls(&live));
}

#[tokio::test]
async fn e2e_a_real_gemini_headless_chat_is_listed_and_read_back_as_the_live_run() {
    let Some(_) = agent_bench::e2e_enabled_or_explain(Cli::Gemini) else {
        return;
    };
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::Gemini, &server, "shell").unwrap();
    let options = GeminiOptions::default()
        .interface(GeminiInterface::Headless)
        .approval_mode(HeadlessApproval::Yolo);
    let request = RunRequest::new("run the command")
        .with_model(GEMINI_MODEL)
        .with_options(&options);
    check_live(&*backend(&sandbox, false), &sandbox.cwd, request).await;
}

#[tokio::test]
async fn e2e_a_real_qwen_stream_json_chat_is_listed_and_read_back_as_the_live_run() {
    let Some(_) = agent_bench::e2e_enabled_or_explain(Cli::Qwen) else {
        return;
    };
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::Qwen, &server, "shell").unwrap();
    let request = RunRequest::new("run the command")
        .with_options(&QwenOptions::default().interface(QwenInterface::StreamJson))
        .with_permissions(PermissionPolicy::ApproveAll);
    check_live(&*backend(&sandbox, true), &sandbox.cwd, request).await;
}
