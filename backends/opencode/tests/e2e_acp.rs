//! `opencode acp` end to end: the real pinned opencode 1.18.33 against the bench's scripted
//! model server, through the `acp` interface of the `opencode` kind. Without the CLI these fail
//! with install instructions, unless AGENT_API_E2E=skip.

mod common;

use agent_api::universal::{DecidedBy, ItemKind, PermissionStatus};
use agent_api::{AgentError, PermissionDecision, PermissionPolicy, RunRequest};
use agent_api_conformance::{assert_conformant, RunRecord};
use agent_api_opencode::Interface;
use common::*;

fn one_permission(run: &RunRecord, approved: bool) {
    assert_eq!(
        run.of_type("permission.requested").count(),
        1,
        "{:?}",
        run.types()
    );
    let resolved: Vec<_> = run.of_type("permission.resolved").collect();
    assert_eq!(resolved.len(), 1, "{:?}", run.types());
    let status = resolved[0].permission().map(|p| p.status);
    let expected = if approved {
        PermissionStatus::Approved
    } else {
        PermissionStatus::Denied
    };
    assert_eq!(
        (status, resolved[0].decided_by()),
        (Some(expected), Some(DecidedBy::Caller))
    );
}

#[tokio::test]
async fn acp_text_streams_deltas_with_usage_and_session() {
    let Some((_server, sandbox)) = setup("text").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox, Interface::Acp),
        RunRequest::new("say hi"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    let done = run.completion.as_ref().expect("the run completes");
    assert_eq!(done.final_text.as_deref(), Some("Hello from mock"));
    assert!(
        done.native_session_id
            .as_deref()
            .is_some_and(|id| id.starts_with("ses_")),
        "{:?}",
        done.native_session_id
    );
    assert!(
        run.of_type("item.delta").filter(|e| !e.synthetic).count() >= 2,
        "{:?}",
        run.types()
    );
    let started = serde_json::to_value(&run.universal[0].body)
        .unwrap()
        .to_string();
    assert!(
        started.contains("OpenCode"),
        "the agent's name is in session.started: {started}"
    );
}

#[tokio::test]
async fn acp_shell_follows_the_callers_decision() {
    for (decision, runs) in [
        (PermissionDecision::Allow, true),
        (PermissionDecision::Deny { message: None }, false),
    ] {
        let Some((_server, sandbox)) = setup("shell").await else {
            return;
        };
        let request = RunRequest::new("run the command").with_permissions(PermissionPolicy::Ask);
        let run = drive(
            &backend(&sandbox, Interface::Acp),
            request,
            decision.clone(),
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(run.completion.is_ok(), "{decision:?}: {:?}", run.completion);
        one_permission(&run, runs);
        assert_eq!(sandbox.cwd.join("out.txt").exists(), runs, "{decision:?}");
        assert_eq!(
            run.completed_items(ItemKind::ToolCall).len(),
            1,
            "{decision:?}: {:?}",
            run.types()
        );
    }
}

#[tokio::test]
async fn acp_file_write_goes_through_fs_write_text_file_inside_the_cwd() {
    let Some((_server, sandbox)) = setup("write_edit").await else {
        return;
    };
    let request = RunRequest::new("create the file").with_permissions(PermissionPolicy::Ask);
    let run = drive(
        &backend(&sandbox, Interface::Acp),
        request,
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert!(
        run.of_type("permission.requested").count() >= 1,
        "edits are asked for"
    );
    let written: Vec<String> = run
        .status_labels()
        .into_iter()
        .filter(|l| l == "fs_write")
        .collect();
    assert!(
        !written.is_empty(),
        "OpenCode wrote through the client: {:?}",
        run.status_labels()
    );
    assert!(sandbox.cwd.join("created.txt").exists());
}

/// OpenCode 1.18.33's ACP interface drops the model's HTTP status: a failed prompt is a JSON-RPC
/// -32603 whose data is only `{"errorName": "APIError", "service": "session"}`, so 401 and 500
/// all end as one `agent_failed` terminal error carrying OpenCode's (redacted, bounded)
/// explanation, the overload (429) too, after OpenCode's own retries, which ACP does not report.
/// The `serve` and `run` interfaces keep the status and type them (`model_api_errors_are_typed`).
#[tokio::test]
async fn acp_401_500_and_overload_end_with_one_terminal_error() {
    for (scenario, says) in [
        ("error401", "Incorrect API key"),
        ("error500", "mock internal server error"),
        ("overloaded", "overloaded"),
    ] {
        let Some((_server, sandbox)) = setup(scenario).await else {
            return;
        };
        let run = drive(
            &backend(&sandbox, Interface::Acp),
            RunRequest::new("say hi"),
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert_conformant(&run);
        let error = run.completion.as_ref().expect_err("the run fails");
        assert!(
            matches!(error, AgentError::AgentFailed { .. }),
            "{scenario}: {error}"
        );
        assert!(error.to_string().contains(says), "{scenario}: {error}");
        assert!(
            !error.to_string().contains("sk-test"),
            "the key is not echoed"
        );
        assert_eq!(
            run.universal
                .iter()
                .filter(|e| e.is_terminal_error())
                .count(),
            1,
            "{scenario}"
        );
    }
}

#[tokio::test]
async fn acp_cancel_mid_turn_leaves_no_process() {
    let Some((_server, sandbox)) = setup("slow_text").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox, Interface::Acp),
        RunRequest::new("talk slowly"),
        PermissionDecision::Allow,
        true,
    )
    .await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    assert_eq!(
        run.universal
            .iter()
            .filter(|e| e.is_terminal_error())
            .count(),
        1
    );
    wait_until_gone(&sandbox.cwd).await;
}

#[tokio::test]
async fn acp_skip_permission_prompts_runs_without_asking() {
    let Some((_server, sandbox)) = setup("shell").await else {
        return;
    };
    let request = RunRequest::new("run the command")
        .with_permissions(PermissionPolicy::DenyAll)
        .with_skip_permission_prompts(true);
    let run = drive(
        &backend(&sandbox, Interface::Acp),
        request,
        PermissionDecision::Deny { message: None },
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert_eq!(
        run.of_type("permission.requested").count(),
        0,
        "OpenCode was told not to ask"
    );
    assert!(sandbox.cwd.join("out.txt").exists());
}

#[tokio::test]
async fn acp_resumes_its_session_with_session_load() {
    let Some((_server, sandbox)) = setup("echo").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Acp);
    let first = drive(
        &backend,
        RunRequest::new("first turn"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    let id = first
        .completion
        .as_ref()
        .unwrap()
        .native_session_id
        .clone()
        .expect("a session id");
    let request = RunRequest::new("second turn")
        .with_session(agent_api::SessionSelector::Resume(id.clone().into()));
    let second = drive(&backend, request, PermissionDecision::Allow, false).await;
    assert_conformant(&second);
    let done = second.completion.as_ref().unwrap();
    assert_eq!(done.native_session_id.as_deref(), Some(id.as_str()));
    assert!(
        done.final_text
            .as_deref()
            .is_some_and(|t| t.contains("user_turns=2")),
        "{:?}",
        done.final_text
    );
}
