//! Fault cases through a fake `codex` binary: a small shell script printing real Codex
//! app-server (or exec) lines, then crashing, hanging, leaving a server request unanswered,
//! printing invalid UTF-8 or a 20 MiB line. Each run must end typed, conformant, bounded, and
//! leave no process behind.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_api::universal::UniversalEventBody;
use agent_api::{AgentBackend, AgentError, RunRequest};
use agent_api_codex::{CodexBackend, CodexConfig};
use agent_api_conformance::{assert_conformant, record, record_answering, Answers};

/// The app-server handshake: each response only after the request it answers was read.
const HANDSHAKE: &str = r#"
read -r _; echo '{"id":1,"result":{"userAgent":"fake/0.169.0"}}'
read -r _
read -r _; echo '{"id":2,"result":{"thread":{"id":"thr_f","cliVersion":"0.169.0"},"model":"gpt-5.5"}}'
read -r _; echo '{"id":3,"result":{"turn":{"id":"turn_f","items":[],"status":"inProgress"}}}'
echo '{"method":"turn/started","params":{"threadId":"thr_f","turn":{"id":"turn_f","items":[],"status":"inProgress"}},"emittedAtMs":1}'
echo '{"method":"item/started","params":{"item":{"type":"agentMessage","id":"m1","text":""},"threadId":"thr_f","turnId":"turn_f","startedAtMs":1}}'
echo '{"method":"item/agentMessage/delta","params":{"itemId":"m1","delta":"Hel","threadId":"thr_f","turnId":"turn_f"}}'
"#;

const COMPLETE: &str = r#"
echo '{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"m1","text":"Hello"},"threadId":"thr_f","turnId":"turn_f","completedAtMs":2}}'
echo '{"method":"turn/completed","params":{"threadId":"thr_f","turn":{"id":"turn_f","items":[],"status":"completed","error":null}}}'
while read -r _; do :; done
"#;

/// A background child whose pid is written to `$DIR/child.pid`, then the script waits on it.
const HANG: &str = "sleep 600 & echo $! > \"$DIR/child.pid\"\nwait\n";

struct Fake {
    dir: tempfile::TempDir,
    backend: CodexBackend,
}

fn fake(body: &str) -> Fake {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("codex");
    let text = format!("#!/bin/bash\nDIR='{}'\n{body}", dir.path().display());
    std::fs::write(&script, text).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let backend = CodexBackend::new(CodexConfig::with_binary(&script));
    Fake { dir, backend }
}

fn child_pid(dir: &Path) -> Option<i32> {
    std::fs::read_to_string(dir.join("child.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether `pid` is a live (not zombie) process.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

async fn assert_gone(dir: &Path) {
    let pid = child_pid(dir).expect("the fake wrote its child's pid");
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(pid), "process {pid} outlived the run");
}

#[tokio::test]
async fn a_crash_mid_stream_is_a_typed_process_exit() {
    let f = fake(&format!("{HANDSHAKE}\nexit 3\n"));
    let run = record(f.backend.run(RunRequest::new("hi")).await.unwrap()).await;
    assert_conformant(&run);
    assert!(
        matches!(
            run.completion,
            Err(AgentError::ProcessExited {
                exit_code: Some(3),
                ..
            })
        ),
        "{:?}",
        run.completion
    );
    // The cut message is no answer: it fails, and the wrapper view does not output "Hel".
    assert_eq!(run.assistant_text(), "");
    assert!(
        run.wrapper.iter().any(|e| e
            .data
            .as_ref()
            .is_some_and(|d| d["discarded"]["bytes"] == 3)),
        "{:?}",
        run.wrapper
    );
}

#[tokio::test]
async fn an_exec_crash_mid_stream_is_a_typed_process_exit() {
    let f = fake(
        r#"
echo '{"type":"thread.started","thread_id":"t1"}'
echo '{"type":"turn.started"}'
echo '{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}'
kill -SEGV $$
"#,
    );
    let request = RunRequest::new("hi")
        .with_options(&agent_api_codex::CodexOptions::default().mode(agent_api_codex::Mode::Exec));
    let run = record(f.backend.run(request).await.unwrap()).await;
    assert_conformant(&run);
    assert!(
        matches!(
            run.completion,
            Err(AgentError::ProcessExited {
                signal: Some(11),
                ..
            })
        ),
        "{:?}",
        run.completion
    );
}

#[tokio::test]
async fn a_hang_ends_in_a_typed_timeout_with_no_process_left() {
    let f = fake(&format!("{HANDSHAKE}\n{HANG}"));
    let request = RunRequest::new("hi").with_timeout(Duration::from_millis(800));
    let run = record(f.backend.run(request).await.unwrap()).await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Timeout { .. })),
        "{:?}",
        run.completion
    );
    assert_gone(f.dir.path()).await;
}

#[tokio::test]
async fn cancel_with_a_server_request_unanswered_is_typed_cancelled_with_no_process_left() {
    let approval = r#"echo '{"id":0,"method":"item/commandExecution/requestApproval","params":{"threadId":"thr_f","turnId":"turn_f","itemId":"call_1","startedAtMs":1,"command":"rm -rf /tmp/x","cwd":"/w"}}'"#;
    let f = fake(&format!("{HANDSHAKE}\n{approval}\n{HANG}"));
    let handle = f.backend.run(RunRequest::new("hi")).await.unwrap();
    let run = record_answering(handle, Answers::cancel_at_permission()).await;
    assert!(matches!(run.completion, Err(AgentError::Cancelled)));
    assert!(run.universal.iter().any(
        |e| matches!(&e.body, UniversalEventBody::PermissionResolved(p) if p.status == agent_api::universal::PermissionStatus::Denied)
    ));
    assert_gone(f.dir.path()).await;
}

#[tokio::test]
async fn invalid_utf8_is_replaced_and_reported_not_fatal() {
    let bad = r#"printf '{"method":"item/agentMessage/delta","params":{"itemId":"m1","delta":"lo\xff\xfe","threadId":"thr_f","turnId":"turn_f"}}\n'"#;
    let f = fake(&format!("{HANDSHAKE}\n{bad}\n{COMPLETE}"));
    let run = record(f.backend.run(RunRequest::new("hi")).await.unwrap()).await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert!(run
        .status_labels()
        .iter()
        .any(|s| s == "native_line_invalid_utf8"));
    assert!(run.assistant_text().starts_with("Hello") || run.assistant_text().starts_with("Hel"));
}

#[tokio::test]
async fn a_20_mib_line_is_skipped_with_one_bounded_status() {
    let huge = r#"{ printf '{"method":"item/agentMessage/delta","params":{"itemId":"m1","threadId":"thr_f","turnId":"turn_f","delta":"'; head -c 20971520 /dev/zero | tr '\0' 'a'; printf '"}}\n'; }"#;
    let f = fake(&format!("{HANDSHAKE}\n{huge}\n{COMPLETE}"));
    let run = record(f.backend.run(RunRequest::new("hi")).await.unwrap()).await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert_eq!(
        run.status_labels()
            .iter()
            .filter(|s| *s == "native_line_skipped")
            .count(),
        1
    );
    assert_eq!(
        run.assistant_text(),
        "Hel",
        "the oversized delta never reaches the stream"
    );
    assert!(run
        .wrapper
        .iter()
        .all(|e| e.text.as_ref().is_none_or(|t| t.len() <= 65_536)));
}

#[tokio::test]
async fn a_missing_binary_is_a_typed_error_before_anything_runs() {
    let backend = CodexBackend::new(CodexConfig::with_binary(PathBuf::from(
        "/nonexistent/codex",
    )));
    let err = backend
        .run(RunRequest::new("hi"))
        .await
        .expect_err("no run");
    assert!(
        matches!(
            err,
            AgentError::BinaryNotFound { .. } | AgentError::Spawn { .. }
        ),
        "{err}"
    );
}

#[test]
fn debug_of_the_config_and_backend_never_prints_env_values() {
    let config = CodexConfig::default().env("OPENAI_API_KEY", "sk-proj-LIVE");
    let backend = CodexBackend::new(config.clone());
    for shown in [format!("{config:?}"), format!("{backend:?}")] {
        assert!(
            !shown.contains("LIVE") && shown.contains("OPENAI_API_KEY"),
            "{shown}"
        );
    }
}
