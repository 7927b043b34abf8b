//! Claude Code's own session store (`agent_api.history.*`): the stored file the pinned CLI wrote
//! (`tests/fixtures/history/claude_code`), and end to end: after a real run on the bench, the
//! store lists that session and reads it back with the live run's final text and tool calls.

use std::path::Path;
use std::time::Duration;

use agent_api::history::{SessionQuery, SessionStore};
use agent_api::universal::{ItemKind, UniversalEventBody};
use agent_api::{AgentBackend, AgentError, PermissionPolicy, RunRequest};
use agent_api_claude_code::history::ClaudeSessionStore;
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use agent_bench::{Cli, Sandbox};
use serde_json::Value;

const STORED_ID: &str = "cd13f027-f751-4948-87e6-a722e591af62";

/// A config dir holding the recorded session file where the CLI puts it, plus `extra` lines
/// appended to a copy under another id.
fn store_with(extra: &[&str]) -> (tempfile::TempDir, ClaudeSessionStore) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("projects/-home-dev-work-shell");
    std::fs::create_dir_all(&project).unwrap();
    let recorded = std::fs::read_to_string(
        agent_bench::fixtures_dir().join("history/claude_code/shell.jsonl"),
    )
    .unwrap();
    std::fs::write(project.join(format!("{STORED_ID}.jsonl")), &recorded).unwrap();
    if !extra.is_empty() {
        std::fs::write(
            project.join("mangled-1.jsonl"),
            format!("{recorded}{}\n", extra.join("\n")),
        )
        .unwrap();
    }
    let store = ClaudeSessionStore::new(dir.path());
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

#[tokio::test]
async fn the_recorded_store_lists_its_session_with_cwd_and_first_prompt() {
    let (_dir, store) = store_with(&[]);
    let sessions = store.list_sessions(&SessionQuery::all()).await.unwrap();
    assert_eq!(sessions.len(), 1);
    let session = &sessions[0];
    assert_eq!(session.id, STORED_ID);
    assert_eq!(
        session.cwd.as_deref(),
        Some(Path::new("/home/dev/work/shell"))
    );
    assert_eq!(session.first_prompt.as_deref(), Some("run the command"));
    assert!(session.size.is_some_and(|s| s > 1000) && session.time.is_some());
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
}

#[tokio::test]
async fn the_recorded_session_reads_back_as_the_run_it_was() {
    let (_dir, store) = store_with(&[]);
    let run = record(store.read_session(STORED_ID, true).await.unwrap()).await;
    assert_conformant(&run);
    let completion = run.completion.as_ref().unwrap();
    assert_eq!(
        completion.final_text.as_deref(),
        Some("Tool finished. Output was: hi")
    );
    assert_eq!(completion.native_session_id.as_deref(), Some(STORED_ID));
    let calls = tool_calls(&run);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "Bash");
    assert_eq!(calls[0].1["command"], "echo hi > out.txt && cat out.txt");
    assert_eq!(
        run.completed_items(ItemKind::ToolResult)[0]
            .tool
            .as_ref()
            .unwrap()
            .exit_code,
        Some(0)
    );
    assert_eq!(
        run.assistant_messages(),
        ["I'll run a command.", "Tool finished. Output was: hi"]
    );
    assert_eq!(run.of_type("agent.unparsed").count(), 0);
}

#[tokio::test]
async fn unreadable_stored_lines_become_unparsed_and_the_read_goes_on() {
    let (_dir, store) = store_with(&[
        "not json at all",
        r#"{"type":"brand-new-kind","sessionId":"x"}"#,
        r#"[1,2]"#,
        "",
    ]);
    let run = record(store.read_session("mangled-1", false).await.unwrap()).await;
    // Conformance counts any agent.unparsed as a problem: here they are the point.
    let problems = agent_api_conformance::problems(&run);
    assert!(
        problems.iter().all(|p| p.contains("agent.unparsed")),
        "{problems:?}"
    );
    let reasons: Vec<String> = run
        .universal
        .iter()
        .filter_map(|e| match &e.body {
            UniversalEventBody::AgentUnparsed(d) => Some(d.error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons
            .iter()
            .all(|r| !r.is_empty() && !r.contains("brand-new-kind")),
        "{reasons:?}"
    );
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("Tool finished. Output was: hi")
    );
}

/// A store file with a 10 GiB first line (sparse) and one that is a link to a FIFO: the listing
/// reads at most `HEAD_BYTES` of the first, never waits on the second, and lists the others.
#[tokio::test]
async fn a_huge_or_unreadable_store_file_is_passed_over_and_the_rest_listed() {
    let (dir, store) = store_with(&[]);
    let project = dir.path().join("projects/-home-dev-work-shell");
    std::fs::File::create(project.join("huge.jsonl"))
        .unwrap()
        .set_len(10 << 30)
        .unwrap();
    let fifo = dir.path().join("fifo");
    let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    std::os::unix::fs::symlink(&fifo, project.join("piped.jsonl")).unwrap();
    let listed = tokio::time::timeout(
        Duration::from_secs(60),
        store.list_sessions(&SessionQuery::all()),
    )
    .await;
    let sessions = listed.expect("listing waited on a store file").unwrap();
    assert!(sessions.iter().any(|s| s.id == STORED_ID), "{sessions:?}");
    assert!(sessions.iter().all(|s| s.id != "piped"), "{sessions:?}");
    let read = tokio::time::timeout(Duration::from_secs(60), store.read_session("piped", false))
        .await
        .expect("reading waited on a FIFO");
    assert!(read.is_err(), "a FIFO is not read as a session");
}

#[tokio::test]
async fn unknown_and_path_like_ids_are_not_found() {
    let (_dir, store) = store_with(&[]);
    for id in ["no-such-session", "../projects", ""] {
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
async fn e2e_a_real_session_is_listed_and_read_back_as_the_live_run() {
    let Some((_server, sandbox)) =
        agent_bench::e2e_bench_or_explain(Cli::ClaudeCode, "shell").await
    else {
        return;
    };
    let backend = backend(&sandbox);
    let request = RunRequest::new("run the command")
        .with_permissions(PermissionPolicy::ApproveAll)
        .with_timeout(Duration::from_secs(120));
    let live = record(backend.run(request).await.unwrap()).await;
    assert_conformant(&live);
    let completion = live.completion.as_ref().unwrap();
    let id = completion.native_session_id.clone().unwrap();

    let store = backend
        .session_store()
        .expect("Claude Code has a session store");
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
    let stored_completion = stored.completion.as_ref().unwrap();
    assert_eq!(stored_completion.final_text, completion.final_text);
    assert_eq!(
        stored_completion.final_text.as_deref(),
        Some("Tool finished. Output was: hi")
    );
    assert_eq!(tool_calls(&stored), tool_calls(&live));
    assert_eq!(tool_calls(&live).len(), 1);
}

fn backend(sandbox: &Sandbox) -> ClaudeCodeBackend {
    let mut config = ClaudeCodeConfig::default()
        .with_binary(&sandbox.program)
        .with_inherit_env(false)
        .with_working_dir(&sandbox.cwd);
    for (key, value) in &sandbox.env {
        config = config.with_env(key, value);
    }
    ClaudeCodeBackend::new(config)
}
