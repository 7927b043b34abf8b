//! Codex's own session store (`agent_api.history.*`): rollout files the pinned CLI wrote
//! (`tests/fixtures/history/codex`), and end to end: after a real exec run on the bench, the
//! store lists that thread and reads it back with the live run's final text and tool calls.

use std::path::Path;
use std::time::Duration;

use agent_api::history::{SessionQuery, SessionStore};
use agent_api::universal::{ItemKind, UniversalEventBody};
use agent_api::{AgentBackend, AgentError, PermissionPolicy, RunRequest};
use agent_api_codex::history::CodexSessionStore;
use agent_api_codex::{CodexBackend, CodexConfig, CodexOptions, Mode};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use agent_bench::{Cli, Sandbox};
use serde_json::Value;

const SHELL_ID: &str = "01a2095d-3909-75d1-b1b7-31a6d798b11b";
const WRITE_EDIT_ID: &str = "01a20966-b968-7501-9fc8-ec5dff593daf";

/// A CODEX_HOME holding the recorded rollouts where the CLI puts them, plus `extra` lines
/// appended to a copy of the shell rollout under another id.
fn store_with(extra: &[&str]) -> (tempfile::TempDir, CodexSessionStore) {
    let home = tempfile::tempdir().unwrap();
    let day = home.path().join("sessions/2026/11/23");
    std::fs::create_dir_all(&day).unwrap();
    let fixture = |name: &str| {
        std::fs::read_to_string(agent_bench::fixtures_dir().join("history/codex").join(name))
            .unwrap()
    };
    std::fs::write(
        day.join(format!("rollout-2026-11-23T17-03-54-{SHELL_ID}.jsonl")),
        fixture("shell.jsonl"),
    )
    .unwrap();
    std::fs::write(
        day.join(format!("rollout-2026-11-23T17-14-16-{WRITE_EDIT_ID}.jsonl")),
        fixture("write_edit.jsonl"),
    )
    .unwrap();
    if !extra.is_empty() {
        let mangled = format!("{}{}\n", fixture("shell.jsonl"), extra.join("\n"));
        std::fs::write(
            day.join("rollout-2026-11-23T18-00-00-mangled-1.jsonl"),
            mangled,
        )
        .unwrap();
    }
    let store = CodexSessionStore::new(home.path());
    (home, store)
}

/// Name and arguments of every completed tool call (exec's item ids are not the rollout's).
fn tool_calls(run: &RunRecord) -> Vec<(String, Value)> {
    run.completed_items(ItemKind::ToolCall)
        .iter()
        .filter_map(|item| {
            item.tool_call().map(|c| {
                (
                    c.name.to_string(),
                    c.arguments_json().unwrap_or(Value::Null),
                )
            })
        })
        .collect()
}

#[tokio::test]
async fn the_recorded_rollouts_are_listed_with_cwd_and_first_prompt() {
    let (_home, store) = store_with(&[]);
    let sessions = store.list_sessions(&SessionQuery::all()).await.unwrap();
    let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), 2);
    assert!(
        ids.contains(&SHELL_ID) && ids.contains(&WRITE_EDIT_ID),
        "{ids:?}"
    );
    let shell = sessions.iter().find(|s| s.id == SHELL_ID).unwrap();
    assert_eq!(
        shell.cwd.as_deref(),
        Some(Path::new("/home/dev/work/shell"))
    );
    assert_eq!(shell.first_prompt.as_deref(), Some("run the command"));
    assert!(shell.size.is_some_and(|s| s > 1000) && shell.time.is_some());
    let only_shell = store
        .list_sessions(&SessionQuery::in_dir("/home/dev/work/shell"))
        .await
        .unwrap();
    assert_eq!(
        only_shell.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [SHELL_ID]
    );
}

#[tokio::test]
async fn the_recorded_rollouts_read_back_as_the_exec_runs_they_were() {
    let (_home, store) = store_with(&[]);
    let run = record(store.read_session(SHELL_ID, true).await.unwrap()).await;
    assert_conformant(&run);
    let completion = run.completion.as_ref().unwrap();
    assert!(completion
        .final_text
        .as_deref()
        .unwrap()
        .starts_with("Tool finished. Output was: "));
    assert_eq!(completion.native_session_id.as_deref(), Some(SHELL_ID));
    assert_eq!(
        tool_calls(&run),
        [(
            "exec_command".to_string(),
            serde_json::json!({ "command": "/bin/bash -lc 'echo hi > out.txt && cat out.txt'" })
        )]
    );
    assert_eq!(
        run.completed_items(ItemKind::ToolResult)[0]
            .tool
            .as_ref()
            .unwrap()
            .exit_code,
        Some(0)
    );

    let run = record(store.read_session(WRITE_EDIT_ID, false).await.unwrap()).await;
    assert_conformant(&run);
    let calls = tool_calls(&run);
    assert_eq!(
        calls.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        ["apply_patch", "apply_patch"]
    );
    assert_eq!(
        calls[0].1["changes"][0]["path"],
        "/home/dev/work/write_edit/created.txt"
    );
    assert_eq!(calls[0].1["changes"][0]["kind"], "add");
    assert_eq!(calls[1].1["changes"][0]["kind"], "update");
}

#[tokio::test]
async fn unreadable_rollout_lines_become_unparsed_and_the_read_goes_on() {
    let extra = [
        "not json",
        r#"{"timestamp":"t","type":"new_kind","payload":{}}"#,
        r#"{"type":"event_msg"}"#,
        r#"{"type":"event_msg","payload":{"type":"item_completed"}}"#,
    ];
    let (_home, store) = store_with(&extra);
    let run = record(store.read_session("mangled-1", false).await.unwrap()).await;
    let reasons: Vec<String> = run
        .universal
        .iter()
        .filter_map(|e| match &e.body {
            UniversalEventBody::AgentUnparsed(d) => Some(d.error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert!(run.completion.is_ok(), "{:?}", run.completion);
}

#[tokio::test]
async fn unknown_and_path_like_ids_are_not_found() {
    let (_home, store) = store_with(&[]);
    for id in ["no-such-thread", "../sessions", ""] {
        assert!(
            matches!(
                store.read_session(id, false).await,
                Err(AgentError::SessionNotFound { .. })
            ),
            "{id}"
        );
    }
}

#[tokio::test]
async fn e2e_a_real_exec_thread_is_listed_and_read_back_as_the_live_run() {
    let Some((_server, sandbox)) = agent_bench::e2e_bench_or_explain(Cli::Codex, "shell").await
    else {
        return;
    };
    let backend = backend(&sandbox);
    let request = RunRequest::new("run the command")
        .with_options(&CodexOptions::default().mode(Mode::Exec))
        .with_permissions(PermissionPolicy::ApproveAll)
        .with_timeout(Duration::from_secs(120));
    let live = record(backend.run(request).await.unwrap()).await;
    assert_conformant(&live);
    let completion = live.completion.as_ref().unwrap();
    let id = completion.native_session_id.clone().unwrap();

    let store = backend.session_store().expect("Codex has a session store");
    let listed = store
        .list_sessions(&SessionQuery::in_dir(&sandbox.cwd))
        .await
        .unwrap();
    let session = listed
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("{id} not in {listed:?}"));
    assert_eq!(session.first_prompt.as_deref(), Some("run the command"));

    let stored = record(store.read_session(&id, false).await.unwrap()).await;
    assert_conformant(&stored);
    assert_eq!(
        stored.completion.as_ref().unwrap().final_text,
        completion.final_text
    );
    assert!(completion
        .final_text
        .as_deref()
        .unwrap()
        .starts_with("Tool finished. Output was: "));
    assert_eq!(tool_calls(&stored), tool_calls(&live));
    assert_eq!(tool_calls(&live).len(), 1);
}

/// A backend running the sandbox's CLI with its environment and `-c` overrides.
fn backend(sandbox: &Sandbox) -> CodexBackend {
    let overrides: Vec<String> = sandbox
        .base_args
        .windows(2)
        .filter(|pair| pair[0] == "-c")
        .map(|pair| pair[1].clone())
        .collect();
    let mut config = CodexConfig::with_binary(&sandbox.program)
        .config_overrides(overrides)
        .working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.env(key, value);
    }
    CodexBackend::new(config)
}
