//! A finished run sums up what it did, for callers who do not stream.

use agent_api::run::ToolStatus;
use agent_api::universal::{DecidedBy, PermissionStatus};
use agent_api::{AgentBackend, PermissionDecision, PermissionPolicy, RunRequest};
use agent_api_conformance::{record_answering, Answers};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};

fn permission_run(policy: PermissionPolicy) -> RunRequest {
    RunRequest::new("hi")
        .with_options(&ScriptedOptions::scenario("permission").delay_ms(0))
        .with_permissions(policy)
}

#[tokio::test]
async fn an_approved_tool_call_is_summed_up_with_its_command_exit_code_and_decision() {
    let (summary, completion) = ScriptedBackend::new()
        .run(permission_run(PermissionPolicy::ApproveAll))
        .await
        .unwrap()
        .collect_summary()
        .await;
    let completion = completion.unwrap();
    assert_eq!(summary.final_text, completion.final_text);
    assert_eq!(summary.native_session_id, completion.native_session_id);
    assert_eq!(summary.tool_calls.len(), 1, "{summary:?}");
    let call = &summary.tool_calls[0];
    assert_eq!(
        (call.command.as_deref(), call.exit_code, call.status),
        (Some("echo hi"), Some(0), ToolStatus::Completed)
    );
    assert!(call.output_bytes > 0);
    assert_eq!(summary.permissions.len(), 1);
    assert_eq!(
        (
            summary.permissions[0].status,
            summary.permissions[0].decided_by
        ),
        (PermissionStatus::Approved, Some(DecidedBy::Policy))
    );
    assert_eq!(
        summary.permissions[0].call_id.as_deref(),
        Some(call.call_id.as_str()),
        "the permission names its tool call"
    );
    assert_eq!(
        summary.permissions[0].category,
        Some(agent_api::request::ToolCategory::Shell)
    );
}

#[tokio::test]
async fn a_denied_tool_call_is_summed_up_as_failed_and_denied_by_the_caller() {
    let handle = ScriptedBackend::new()
        .run(permission_run(PermissionPolicy::Ask))
        .await
        .unwrap();
    let run = record_answering(
        handle,
        Answers::permissions(PermissionDecision::Deny { message: None }),
    )
    .await;
    let summary =
        agent_api::run::RunSummary::from_events(&run.universal, run.completion.as_ref().ok());
    assert_eq!(
        summary.tool_calls[0].status,
        ToolStatus::Failed,
        "{summary:?}"
    );
    assert_eq!(
        (
            summary.permissions[0].status,
            summary.permissions[0].decided_by
        ),
        (PermissionStatus::Denied, Some(DecidedBy::Caller))
    );
}

#[tokio::test]
async fn a_replayed_run_sums_up_its_text_usage_and_files_changed() {
    use agent_api::universal::FileAction;
    let path = agent_bench::fixtures_dir().join("amp/edit.stdout.jsonl");
    let backend = agent_api_amp::AmpBackend::new(agent_api_amp::AmpConfig::default());
    let handle = agent_api::kit::replay::replay_file(&backend, &path, false)
        .await
        .unwrap();
    let (summary, completion) = handle.collect_summary().await;
    let completion = completion.unwrap();
    assert!(
        summary.final_text.as_deref().is_some_and(|t| !t.is_empty()),
        "{summary:?}"
    );
    assert_eq!(summary.final_text, completion.final_text);
    assert!(
        summary
            .usage
            .as_ref()
            .and_then(|u| u.output_tokens)
            .is_some(),
        "usage: {:?}",
        summary.usage
    );
    let expected = [
        ("/work/project/README.md".to_string(), FileAction::Patch),
        ("/work/project/notes.txt".to_string(), FileAction::Write),
    ];
    assert_eq!(summary.files_changed, expected);
    let paths: Vec<_> = summary
        .tool_calls
        .iter()
        .filter_map(|c| c.path.as_deref())
        .collect();
    assert_eq!(
        paths,
        ["/work/project/README.md", "/work/project/notes.txt"],
        "{:?}",
        summary.tool_calls
    );
    assert!(summary
        .tool_calls
        .iter()
        .all(|c| c.status == ToolStatus::Completed
            && c.category == Some(agent_api::request::ToolCategory::FileWrite)));
}
