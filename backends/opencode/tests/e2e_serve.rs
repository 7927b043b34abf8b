//! `opencode serve` end to end: the real pinned opencode 1.18.33 against the bench's scripted
//! model server. Without the CLI these fail with install instructions, unless AGENT_API_E2E=skip.

mod common;

use agent_api::run::Channel;
use agent_api::universal::{ContentPart, DecidedBy, ItemKind, ItemStatus, UniversalEventBody};
use agent_api::{AgentError, PermissionDecision, PermissionPolicy, RunRequest, SessionSelector};
use agent_api_conformance::assert_conformant;
use agent_api_opencode::Interface;
use common::*;

fn resolutions(run: &agent_api_conformance::RunRecord) -> Vec<(bool, Option<DecidedBy>)> {
    run.universal
        .iter()
        .filter_map(|e| match &e.body {
            UniversalEventBody::PermissionResolved(r) => Some((
                r.status == agent_api::universal::PermissionStatus::Approved,
                r.decided_by,
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn serve_text_streams_native_deltas_with_usage() {
    let Some((_server, sandbox)) = setup("reasoning").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox, Interface::Serve),
        RunRequest::new("think then say hi"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    let done = run.completion.as_ref().expect("the run completes");
    assert_eq!(done.final_text.as_deref(), Some("Hello after thinking"));
    assert!(done
        .native_session_id
        .as_deref()
        .is_some_and(|id| id.starts_with("ses_")));
    assert!(done.usage.as_ref().and_then(|u| u.input_tokens).is_some());
    assert!(run.of_type("item.delta").filter(|e| !e.synthetic).count() >= 2);
    assert!(
        run.wrapper.iter().any(|e| e.is_on(&Channel::Reasoning)),
        "{:?}",
        run.types()
    );
}

#[tokio::test]
async fn serve_shell_by_policy_and_by_caller_each_has_one_request_and_one_resolution() {
    let cases = [
        (
            PermissionPolicy::ApproveAll,
            PermissionDecision::Allow,
            true,
            DecidedBy::Policy,
        ),
        (
            PermissionPolicy::DenyAll,
            PermissionDecision::Allow,
            false,
            DecidedBy::Policy,
        ),
        (
            PermissionPolicy::Ask,
            PermissionDecision::Allow,
            true,
            DecidedBy::Caller,
        ),
        (
            PermissionPolicy::Ask,
            PermissionDecision::AllowForSession,
            true,
            DecidedBy::Caller,
        ),
        (
            PermissionPolicy::Ask,
            PermissionDecision::Deny { message: None },
            false,
            DecidedBy::Caller,
        ),
    ];
    for (policy, decision, runs, by) in cases {
        let Some((_server, sandbox)) = setup("shell").await else {
            return;
        };
        let request = RunRequest::new("run the command").with_permissions(policy.clone());
        let run = drive(
            &backend(&sandbox, Interface::Serve),
            request,
            decision.clone(),
            false,
        )
        .await;
        assert_conformant(&run);
        assert!(
            run.completion.is_ok(),
            "{policy:?}/{decision:?}: {:?}",
            run.completion
        );
        assert_eq!(
            run.of_type("permission.requested").count(),
            1,
            "{policy:?}/{decision:?}"
        );
        assert_eq!(
            resolutions(&run),
            [(runs, Some(by))],
            "{policy:?}/{decision:?}"
        );
        assert_eq!(
            sandbox.cwd.join("out.txt").exists(),
            runs,
            "{policy:?}/{decision:?}"
        );
        let result = &run.completed_items(ItemKind::ToolResult)[0];
        assert_eq!(
            result.status,
            if runs {
                ItemStatus::Completed
            } else {
                ItemStatus::Failed
            }
        );
        if runs {
            let tool = result.tool.as_ref().expect("tools facet");
            assert_eq!((tool.exit_code, tool.bytes.stdout), (Some(0), 3));
        }
    }
}

#[tokio::test]
async fn serve_file_write_carries_its_diff() {
    let Some((_server, sandbox)) = setup("write_edit").await else {
        return;
    };
    let request = RunRequest::new("create the file").with_permissions(PermissionPolicy::ApproveAll);
    let run = drive(
        &backend(&sandbox, Interface::Serve),
        request,
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert!(sandbox.cwd.join("created.txt").exists());
    assert!(
        run.of_type("permission.requested").count() >= 1,
        "edits are asked for"
    );
    let results = run.completed_items(ItemKind::ToolResult);
    let diffs = results
        .iter()
        .flat_map(|i| &i.content)
        .filter(|p| matches!(p, ContentPart::FileRef { diff: Some(_), .. }))
        .count();
    assert!(diffs >= 1, "a file ref with a diff");
    assert!(results
        .iter()
        .any(|i| i.tool.as_ref().is_some_and(|t| t.bytes.diff > 0)));
}

#[tokio::test]
async fn serve_model_api_401_500_and_overload_end_with_one_typed_terminal_error() {
    model_api_errors_are_typed(Interface::Serve).await;
}

#[tokio::test]
async fn serve_resumes_continues_and_forks_its_session_on_the_same_server() {
    let Some((_server, sandbox)) = setup("echo").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
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
    let second = drive(
        &backend,
        RunRequest::new("second turn").with_session(SessionSelector::Resume(id.clone().into())),
        PermissionDecision::Allow,
        false,
    )
    .await;
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
    let last = drive(
        &backend,
        RunRequest::new("third turn").with_session(SessionSelector::ResumeLast),
        PermissionDecision::Allow,
        false,
    )
    .await;
    let done = last.completion.as_ref().unwrap();
    assert_eq!(
        done.native_session_id.as_deref(),
        Some(id.as_str()),
        "the last session"
    );
    assert!(
        done.final_text
            .as_deref()
            .is_some_and(|t| t.contains("user_turns=3")),
        "{:?}",
        done.final_text
    );
    let fork = drive(
        &backend,
        RunRequest::new("fourth turn").with_session(SessionSelector::Fork(id.clone().into())),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&fork);
    let done = fork.completion.as_ref().unwrap();
    assert!(
        done.native_session_id.as_deref().is_some_and(|f| f != id),
        "a new session: {:?}",
        done.native_session_id
    );
    assert!(
        done.final_text
            .as_deref()
            .is_some_and(|t| t.contains("user_turns=4")),
        "{:?}",
        done.final_text
    );
}

#[tokio::test]
async fn serve_abort_mid_turn_cancels_and_leaves_no_process() {
    let Some((_server, sandbox)) = setup("slow_text").await else {
        return;
    };
    let needle = sandbox.cwd.clone();
    {
        let backend = backend(&sandbox, Interface::Serve);
        let run = drive(
            &backend,
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
    }
    // The run was the server's only user: its process group is gone with it.
    wait_until_gone(&needle).await;
}

#[tokio::test]
async fn serve_questions_go_through_the_question_path() {
    let Some((_server, sandbox)) = setup("question").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox, Interface::Serve),
        RunRequest::new("ask me"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert_eq!(
        run.of_type("question.requested").count(),
        2,
        "{:?}",
        run.types()
    );
    assert_eq!(run.of_type("question.resolved").count(), 2);
    let text = run
        .completion
        .as_ref()
        .unwrap()
        .final_text
        .clone()
        .unwrap_or_default();
    assert!(text.starts_with("You answered:"), "{text}");
}

#[tokio::test]
async fn serve_cancel_resolves_an_unanswered_permission_as_cancelled() {
    use futures::StreamExt;
    let Some((_server, sandbox)) = setup("shell").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Serve);
    let handle = agent_api::AgentBackend::run(&backend, RunRequest::new("run the command"))
        .await
        .unwrap();
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    let mut universal = Vec::new();
    while let Some(event) = events.next().await {
        if event.type_name() == "permission.requested" {
            control.cancel();
        }
        universal.push(event);
    }
    assert!(matches!(completion.await, Err(AgentError::Cancelled)));
    let resolved: Vec<_> = universal
        .iter()
        .filter_map(|e| match &e.body {
            UniversalEventBody::PermissionResolved(r) => Some(r.decided_by),
            _ => None,
        })
        .collect();
    assert_eq!(resolved, [Some(DecidedBy::Cancel)]);
    assert!(!sandbox.cwd.join("out.txt").exists(), "nothing ran");
}

#[tokio::test]
async fn serve_skip_permission_prompts_runs_without_asking() {
    let Some((_server, sandbox)) = setup("shell").await else {
        return;
    };
    let request = RunRequest::new("run the command")
        .with_permissions(PermissionPolicy::DenyAll)
        .with_skip_permission_prompts(true);
    let run = drive(
        &backend(&sandbox, Interface::Serve),
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

/// A session of two turns recorded live from `opencode serve` replays with both turns' answers,
/// the second as the run's final text (issue 53): whether its client prompted with `prompt_async`
/// once the first turn was idle, or with the synchronous `/message` call, its second prompt then
/// written before the first turn's events (and its `session.idle`).
#[tokio::test]
async fn serve_a_live_recorded_session_of_two_turns_replays_both_answers() {
    for prompting in [Prompting::AsyncOnIdle, Prompting::SyncThenEvents] {
        let Some((_server, sandbox)) = setup("echo").await else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("two_turns.session.jsonl");
        record_serve_session(
            &sandbox,
            prompting,
            &["first turn", "second turn"],
            std::time::Duration::from_secs(2),
            &path,
        )
        .await;
        let backend = agent_api_opencode::OpenCodeBackend::new(Default::default());
        let run = agent_api_conformance::record(
            agent_api::kit::replay::replay_file(&backend, &path, true)
                .await
                .expect("the replay starts"),
        )
        .await;
        let answers = run.assistant_messages();
        assert!(
            answers.len() == 2
                && answers[0].contains("last=first turn")
                && answers[1].contains("last=second turn"),
            "{prompting:?}: both turns' answers are replayed: {answers:?}; the recording's lines: {:?}",
            outline(&path)
        );
        let done = run.completion.as_ref().expect("the replay completes");
        assert!(
            done.final_text
                .as_deref()
                .is_some_and(|t| t.contains("last=second turn")),
            "{prompting:?}: {:?}",
            done.final_text
        );
        assert_conformant(&run);
    }
}

/// Each line of a session recording as `dir` and, for events, their type (a failure's summary).
fn outline(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let line: serde_json::Value = serde_json::from_str(l).unwrap();
            let kind = line
                .pointer("/msg/payload/type")
                .or(line.pointer("/msg/path"));
            format!(
                "{} {}",
                line["dir"],
                kind.unwrap_or(&serde_json::Value::Null)
            )
        })
        .collect()
}
