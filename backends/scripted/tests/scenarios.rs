//! Every scripted scenario through both views, checked against the specs.

use agent_api::run::Channel;
use agent_api::universal::{ContentPart, UniversalEventBody};
use agent_api::{
    AgentBackend, AgentError, AgentWrapperEventKind, PermissionDecision, PermissionPolicy,
    RunRequest,
};
use agent_api_conformance::{assert_conformant, record, record_answering, Answers};
use agent_api_scripted::{Scenario, ScriptedBackend, ScriptedOptions, EXT_SCENARIO};

fn request(scenario: &str, prompt: &str) -> RunRequest {
    RunRequest::new(prompt).with_options(&ScriptedOptions::scenario(scenario).delay_ms(0))
}

async fn run(scenario: &str, answers: Answers) -> agent_api_conformance::RunRecord {
    let handle = ScriptedBackend::new()
        .run(request(scenario, "hello there"))
        .await
        .unwrap();
    record_answering(handle, answers).await
}

#[tokio::test]
async fn every_scenario_is_conformant_in_both_views() {
    for name in Scenario::NAMES {
        let answers = Answers::permissions(PermissionDecision::Allow).with_answer("hi");
        let run = run(name, answers).await;
        assert_conformant(&run);
    }
}

#[tokio::test]
async fn the_tour_exercises_every_universal_event_type_but_unparsed() {
    let run = run(
        "tour",
        Answers::permissions(PermissionDecision::Allow).with_answer("hi"),
    )
    .await;
    let completion = run.completion.as_ref().unwrap();
    for wanted in [
        "session.started",
        "item.started",
        "item.delta",
        "item.completed",
        "permission.requested",
        "permission.resolved",
        "question.requested",
        "question.resolved",
        "session.ended",
    ] {
        assert!(
            run.types().contains(&wanted),
            "no {wanted} in {:?}",
            run.types()
        );
    }
    assert_eq!(
        completion.final_text.as_deref(),
        Some("You said: hello there. The command printed: hi.")
    );
    assert!(run.assistant_text().contains("You chose hi."));
    let reasoning: String = run.text_on(&Channel::Reasoning);
    assert!(reasoning.contains("hello there"));
    assert_eq!(
        run.wrapper_of(AgentWrapperEventKind::ToolCall).count(),
        2,
        "start and complete of one call"
    );
    let result = run
        .wrapper_of(AgentWrapperEventKind::ToolResult)
        .last()
        .unwrap();
    let tool = &result.data.as_ref().unwrap()["tool"];
    assert_eq!(tool["exit_code"], 0);
    assert_eq!(tool["bytes"]["stdout"], 3);
    assert_eq!(tool["kind"], "command_execution");
    let usage = completion.usage.as_ref().unwrap();
    assert!(usage.output_tokens.unwrap() > 0);
}

#[tokio::test]
async fn the_user_prompt_is_synthesized_as_a_daemon_message() {
    let run = run("text", Answers::none()).await;
    let user = run
        .of_type("item.completed")
        .find_map(|e| match &e.body {
            UniversalEventBody::ItemCompleted(d)
                if d.item.role == Some(agent_api::universal::ItemRole::User) =>
            {
                Some((e.synthetic, d.item.clone()))
            }
            _ => None,
        })
        .expect("a user message item");
    assert!(user.0);
    assert_eq!(user.1.native_item_id, None);
    assert_eq!(
        user.1.content,
        vec![ContentPart::Text {
            text: "hello there".into()
        }]
    );
}

#[tokio::test]
async fn a_denied_permission_fails_the_tool_result_and_the_run_goes_on() {
    let run = run(
        "permission",
        Answers::permissions(PermissionDecision::Deny { message: None }),
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok());
    let tool_result = run
        .wrapper_of(AgentWrapperEventKind::ToolResult)
        .last()
        .unwrap();
    assert_eq!(
        tool_result.data.as_ref().unwrap()["tool"]["status"],
        "failed"
    );
    let resolved = run.of_type("permission.resolved").next().unwrap();
    match &resolved.body {
        UniversalEventBody::PermissionResolved(p) => {
            assert_eq!(p.status, agent_api::universal::PermissionStatus::Denied)
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_approve_all_policy_answers_permissions_without_the_caller() {
    let request = request("permission", "go").with_permissions(PermissionPolicy::ApproveAll);
    let run = record(ScriptedBackend::new().run(request).await.unwrap()).await;
    assert_conformant(&run);
    assert_eq!(run.of_type("permission.resolved").count(), 1);
    assert!(run.completion.is_ok());
}

#[tokio::test]
async fn an_agent_error_ends_the_stream_with_one_terminal_error_matching_the_completion() {
    let run = run("error", Answers::none()).await;
    assert_conformant(&run);
    assert!(matches!(
        run.completion,
        Err(AgentError::ServerError { .. })
    ));
    let errors: Vec<_> = run.wrapper_of(AgentWrapperEventKind::Error).collect();
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].message.as_deref(),
        Some(run.completion.as_ref().unwrap_err().to_string().as_str())
    );
    assert_eq!(run.universal.last().unwrap().type_name(), "session.ended");
}

#[tokio::test]
async fn long_text_is_split_into_bounded_text_events_that_join_back() {
    let run = run("long_text", Answers::none()).await;
    assert_conformant(&run);
    let pieces: Vec<_> = run
        .wrapper
        .iter()
        .filter(|e| e.is_on(&Channel::Assistant))
        .collect();
    assert!(pieces.len() >= 3);
    assert_eq!(run.assistant_text(), "0123456789".repeat(15_000));
}

#[tokio::test]
async fn an_unknown_scenario_is_a_typed_error_before_the_run_starts() {
    let err = ScriptedBackend::new()
        .run(request("nope", "x"))
        .await
        .err()
        .unwrap();
    assert!(matches!(err, AgentError::InvalidExtension { ref key, .. } if key == EXT_SCENARIO));
    let err = ScriptedBackend::new()
        .run(RunRequest::new("x").with_extension("backend.scripted.bogus", 1.into()))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, AgentError::UnknownExtension { ref key, .. } if key == "backend.scripted.bogus")
    );
    let wrong_shape =
        RunRequest::new("x").with_extension(agent_api_scripted::EXT_DELAY_MS, "soon".into());
    let err = ScriptedBackend::new().run(wrong_shape).await.err().unwrap();
    assert!(
        matches!(err, AgentError::InvalidExtension { ref key, .. } if key == agent_api_scripted::EXT_DELAY_MS),
        "{err}"
    );
}

#[tokio::test]
async fn answering_an_unknown_permission_id_is_a_typed_error() {
    let handle = ScriptedBackend::new()
        .run(request("permission", "x"))
        .await
        .unwrap();
    let control = handle.control();
    let err = control
        .respond_permission("perm_missing", PermissionDecision::Allow)
        .await
        .unwrap_err();
    assert!(matches!(err, AgentError::UnknownPermission { .. }));
    control.cancel();
    let run = record(handle).await;
    assert!(matches!(run.completion, Err(AgentError::Cancelled)));
}

#[tokio::test]
async fn who_decided_is_recorded_for_the_caller_the_policy_a_cancel_and_a_timeout() {
    use agent_api::universal::DecidedBy;
    let decided_by = |run: &agent_api_conformance::RunRecord| -> Vec<Option<DecidedBy>> {
        run.of_type("permission.resolved")
            .map(|e| e.decided_by())
            .collect()
    };
    let caller = run(
        "permission",
        Answers::permissions(PermissionDecision::Allow),
    )
    .await;
    assert_eq!(decided_by(&caller), [Some(DecidedBy::Caller)]);
    let policy = record(
        ScriptedBackend::new()
            .run(request("permission", "x").with_permissions(PermissionPolicy::DenyAll))
            .await
            .unwrap(),
    )
    .await;
    assert_conformant(&policy);
    assert_eq!(decided_by(&policy), [Some(DecidedBy::Policy)]);
    let cancelled = run("permission", Answers::cancel_at_permission()).await;
    assert_conformant(&cancelled);
    assert_eq!(decided_by(&cancelled), [Some(DecidedBy::Cancel)]);
    let timeout = request("permission", "x").with_timeout(std::time::Duration::from_millis(300));
    let timed_out = record(ScriptedBackend::new().run(timeout).await.unwrap()).await;
    assert_conformant(&timed_out);
    assert!(
        matches!(timed_out.completion, Err(AgentError::Timeout { .. })),
        "{:?}",
        timed_out.completion
    );
    assert_eq!(decided_by(&timed_out), [Some(DecidedBy::Timeout)]);
}
