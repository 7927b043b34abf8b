//! The generic `acp` backend against a small fake ACP agent (`fake_acp_agent`): every update kind,
//! newer-protocol and malformed messages, permissions by option kind, file-system traversal
//! attempts (nothing outside the working directory is touched), terminals not offered, stop
//! reasons, and cancel.

use std::time::Duration;

use agent_api::run::Channel;
use agent_api::universal::{ContentPart, ItemKind, ItemStatus};
use agent_api::{AgentBackend, AgentError, PermissionDecision, PermissionPolicy, RunRequest};
use agent_api_acp::{AcpBackend, AcpConfig, AcpOptions};
use agent_api_conformance::{
    assert_conformant, problems, record, record_answering, Answers, RunRecord,
};

fn backend() -> AcpBackend {
    AcpBackend::new(AcpConfig::default())
}

fn request(prompt: &str, cwd: &std::path::Path) -> RunRequest {
    let options = AcpOptions::default().command([env!("CARGO_BIN_EXE_fake_acp_agent")]);
    RunRequest::new(prompt)
        .with_working_dir(cwd)
        .with_options(&options)
        .with_timeout(Duration::from_secs(30))
}

async fn run(prompt: &str, cwd: &std::path::Path, answers: Option<Answers>) -> RunRecord {
    let handle = backend()
        .run(request(prompt, cwd))
        .await
        .expect("run starts");
    let run = match answers {
        Some(answers) => record_answering(handle, answers).await,
        None => record(handle).await,
    };
    // The malformed lines the fake sends on purpose are the only findings allowed.
    let problems: Vec<String> = problems(&run)
        .into_iter()
        .filter(|p| !p.contains("is agent.unparsed"))
        .collect();
    assert!(problems.is_empty(), "{problems:?}");
    run
}

fn final_text(run: &RunRecord) -> String {
    run.completion
        .as_ref()
        .ok()
        .and_then(|c| c.final_text.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn every_update_kind_maps_and_unknown_or_malformed_ones_never_fail_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = run("updates", dir.path(), None).await;
    assert_eq!(final_text(&run), "Done.");
    assert_eq!(run.assistant_messages()[0], "Hello there");
    assert_eq!(run.text_on(&Channel::Reasoning), "thinking");
    let result = run
        .completed_items(ItemKind::ToolResult)
        .pop()
        .expect("a tool result");
    assert_eq!(result.status, ItemStatus::Completed);
    let tool = result.tool.expect("tools facet");
    assert_eq!(
        (tool.kind.as_str(), tool.exit_code, tool.bytes.stdout),
        ("command_execution", Some(0), 3)
    );
    assert!(tool.bytes.diff > 0);
    let labels = run.status_labels();
    for label in [
        "todo_list",
        "available_commands",
        "current_mode",
        "context_usage",
        "unknown_update",
        "unknown_notification",
    ] {
        assert!(
            labels.iter().any(|l| l == label),
            "{label} missing from {labels:?}"
        );
    }
    assert_eq!(
        run.of_type("agent.unparsed").count(),
        2,
        "the malformed update and the non-JSON line"
    );
    let started = serde_json::to_value(&run.universal[0].body)
        .unwrap()
        .to_string();
    assert!(
        started.contains("fake-acp"),
        "the agent's name from initialize: {started}"
    );
}

#[tokio::test]
async fn permission_decisions_pick_the_option_by_its_kind() {
    let cases = [
        (PermissionDecision::Allow, "outcome: once"),
        (PermissionDecision::AllowForSession, "outcome: always"),
        (PermissionDecision::Deny { message: None }, "outcome: no"),
    ];
    for (decision, said) in cases {
        let dir = tempfile::tempdir().unwrap();
        let run = run(
            "permission",
            dir.path(),
            Some(Answers::permissions(decision)),
        )
        .await;
        assert_eq!(final_text(&run), said);
        assert_eq!(
            (
                run.of_type("permission.requested").count(),
                run.of_type("permission.resolved").count()
            ),
            (1, 1)
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let request = request("permission", dir.path()).with_permissions(PermissionPolicy::DenyAll);
    let run = record(backend().run(request).await.unwrap()).await;
    assert_eq!(final_text(&run), "outcome: no");
}

#[tokio::test]
async fn cancel_with_a_pending_permission_answers_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let run = run(
        "permission",
        dir.path(),
        Some(Answers::cancel_at_permission()),
    )
    .await;
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    assert_eq!(run.of_type("permission.resolved").count(), 1);
}

#[tokio::test]
async fn traversal_attempts_never_touch_a_file_outside_the_cwd() {
    let outer = tempfile::tempdir().unwrap();
    let cwd = outer.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let secret = outer.path().join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    std::os::unix::fs::symlink(outer.path(), cwd.join("link")).unwrap();
    let run = run(&format!("fs {}", secret.display()), &cwd, None).await;
    let report = final_text(&run);
    let parts: Vec<&str> = report.split("; ").collect();
    assert_eq!(parts.len(), 8, "{report}");
    assert!(parts[..6].iter().all(|p| p.contains("refused")), "{report}");
    assert_eq!(&parts[6..], ["write ok ", "read ok pwned"], "{report}");
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "secret",
        "the outside file is untouched"
    );
    assert!(
        !outer.path().join("planted.txt").exists(),
        "nothing is created outside through the link"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("inside.txt")).unwrap(),
        "pwned"
    );
    assert!(!report.contains("read ok secret"));
    assert_eq!(
        run.status_labels()
            .iter()
            .filter(|l| *l == "fs_refused")
            .count(),
        6
    );
}

/// Links an agent plants in its working directory (a dangling link to a file outside, a link to a
/// folder outside, a hard link to a file outside, read and written: fault row 105) and a FIFO:
/// every request through them is refused
/// with a JSON-RPC error and a status naming the path, nothing outside changes, and the FIFO
/// answers at once.
#[tokio::test]
async fn planted_links_and_fifos_are_refused_and_nothing_outside_changes() {
    let outer = tempfile::tempdir().unwrap();
    let cwd = outer.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let secret = outer.path().join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    std::os::unix::fs::symlink(outer.path().join("planted.txt"), cwd.join("dangling")).unwrap();
    std::os::unix::fs::symlink(outer.path(), cwd.join("up")).unwrap();
    std::fs::hard_link(&secret, cwd.join("hard")).unwrap();
    let fifo =
        std::ffi::CString::new(cwd.join("pipe").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let ops =
        "fsops write:dangling write:up/secret.txt write:up/new/planted.txt write:hard read:hard read:pipe write:pipe read:up/secret.txt write:ok.txt";
    let run = tokio::time::timeout(Duration::from_secs(60), run(ops, &cwd, None))
        .await
        .expect("a FIFO must not hang the run");
    let report = final_text(&run);
    let parts: Vec<&str> = report.split("; ").collect();
    assert_eq!(parts.len(), 9, "{report}");
    assert!(
        parts[..8]
            .iter()
            .all(|p| p.starts_with("write refused") || p.starts_with("read refused")),
        "{report}"
    );
    assert_eq!(parts[8], "write ok ", "{report}");
    assert!(!report.contains("secret"), "{report}");
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "secret",
        "the outside file is untouched"
    );
    assert!(
        !outer.path().join("planted.txt").exists() && !outer.path().join("new").exists(),
        "nothing is created outside"
    );
    let refusals: Vec<&str> = run
        .universal
        .iter()
        .filter_map(|e| e.completed_item())
        .flat_map(|item| &item.content)
        .filter_map(|part| match part {
            ContentPart::Status {
                label,
                detail: Some(detail),
            } if label == "fs_refused" || label == "fs_failed" => Some(detail.as_str()),
            _ => None,
        })
        .collect();
    for name in ["dangling", "up/secret.txt", "hard", "pipe"] {
        assert!(
            refusals
                .iter()
                .any(|d| d.contains(&format!("{}/{name}", cwd.display()))),
            "no status names {name}: {refusals:?}"
        );
    }
}

/// Fault row 107: usage reported mid-run (two model calls of 5,000 tokens) counts against
/// `max_total_tokens` even when the prompt's response then reports a smaller total.
#[tokio::test]
async fn usage_reported_mid_run_counts_against_the_token_limit_over_a_smaller_final_figure() {
    let dir = tempfile::tempdir().unwrap();
    let unlimited = run("usage", dir.path(), None).await;
    let usage = unlimited
        .completion
        .as_ref()
        .unwrap()
        .usage
        .clone()
        .unwrap();
    assert_eq!(usage.total_tokens(), Some(10_000), "{usage:?}");
    let handle = backend()
        .run(request("usage", dir.path()).with_max_total_tokens(100))
        .await
        .unwrap();
    let limited = record(handle).await;
    assert_conformant(&limited);
    // A response whose unstable `usage` misses a count still ends the turn at once.
    let partial = tokio::time::timeout(
        Duration::from_secs(10),
        run("usage-partial", dir.path(), None),
    )
    .await
    .expect("a response with a partial usage ends the turn");
    assert_eq!(final_text(&partial), "counted");
    assert!(
        matches!(
            limited.completion,
            Err(AgentError::LimitReached {
                limit: agent_api::run::LimitKind::TotalTokens
            })
        ),
        "{:?}",
        limited.completion
    );
}

#[tokio::test]
async fn terminals_are_not_offered_and_stop_reasons_map() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        final_text(&run("terminal", dir.path(), None).await),
        "terminal: refused"
    );
    let refused = run("refuse", dir.path(), None).await;
    assert!(
        matches!(refused.completion, Err(AgentError::AgentFailed { .. })),
        "{:?}",
        refused.completion
    );
    let max = run("max", dir.path(), None).await;
    let done = max.completion.as_ref().unwrap();
    assert_eq!(done.data.as_ref().unwrap()["stop_reason"], "max_tokens");
}

#[tokio::test]
async fn cancel_mid_turn_sends_session_cancel_and_ends_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let handle = backend().run(request("slow", dir.path())).await.unwrap();
    let control = handle.control();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        control.cancel();
    });
    let started = std::time::Instant::now();
    let run = record(handle).await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the agent stopped at session/cancel, before the grace period"
    );
    assert!(
        run.completed_items(ItemKind::Message)
            .iter()
            .all(|m| m.status == ItemStatus::Failed),
        "a cut turn is no answer"
    );
}

#[tokio::test]
async fn images_go_inline_and_attachments_as_file_links() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("dot.png");
    std::fs::write(&png, b"png!").unwrap();
    let notes = dir.path().join("my notes.md");
    std::fs::write(&notes, "x").unwrap();
    let mut request = request("blocks", dir.path());
    request.prompt.images.push(png);
    request.prompt.attachments.push(notes.clone());
    let run = record(backend().run(request).await.expect("run starts")).await;
    assert_conformant(&run);
    let link = format!("file://{}", notes.display()).replace(' ', "%20");
    assert_eq!(
        final_text(&run),
        format!("blocks: text; image image/png cG5nIQ==; link {link}")
    );
}

#[tokio::test]
async fn an_image_for_an_agent_that_takes_only_text_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("dot.png");
    std::fs::write(&png, b"png!").unwrap();
    let mut request = request("blocks", dir.path()).with_env("FAKE_ACP_TEXT_ONLY", "1");
    request.prompt.images.push(png);
    let run = record(backend().run(request).await.expect("run starts")).await;
    assert_conformant(&run);
    match &run.completion {
        Err(AgentError::UnsupportedCapability { capability, .. }) => {
            assert_eq!(capability, "agent_api.input.images")
        }
        other => panic!("want the typed refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn an_image_that_is_not_an_image_file_is_refused_before_spawn() {
    let dir = tempfile::tempdir().unwrap();
    let mut request = request("blocks", dir.path());
    request.prompt.images.push(dir.path().join("notes.txt"));
    assert!(matches!(
        backend().run(request).await.err(),
        Some(AgentError::InvalidRequest { .. })
    ));
}
