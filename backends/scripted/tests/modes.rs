//! Plan mode offline (issue 53 item 4): the scripted agent offers `default` and `plan`; in plan
//! mode it runs no tool (it says what it would run) and ends with the exit-plan question every
//! real agent asks; a warm session switches between the two between turns, and approving the plan
//! leaves plan mode.

use agent_api::capabilities as caps;
use agent_api::kit::hitl::EXIT_PLAN_OPTIONS;
use agent_api::request::AgentMode;
use agent_api::{AgentBackend, AgentError, RunRequest, Session};
use agent_api_conformance::{
    assert_conformant, assert_exit_plan_asked, record_answering, run_answering_exit_plan, Answers,
    RunRecord,
};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};

fn request(scenario: &str, prompt: &str) -> RunRequest {
    RunRequest::new(prompt).with_options(&ScriptedOptions::scenario(scenario).delay_ms(0))
}

#[test]
fn the_scripted_agent_advertises_plan_mode_and_a_mode_switch() {
    let backend = ScriptedBackend::new();
    let capabilities = backend.info().capabilities.clone();
    assert!(capabilities.contains(caps::MODES));
    assert!(capabilities.contains(caps::SESSION_MODE_SWITCH));
    let ids: Vec<&str> = backend.info().modes.iter().map(|m| m.id).collect();
    assert_eq!(ids, ["plan"]);
    let unknown = backend.validate(&request("text", "hi").with_mode(AgentMode::parse("yolo")));
    assert!(
        matches!(unknown, Err(AgentError::UnknownMode { .. })),
        "{unknown:?}"
    );
}

#[tokio::test]
async fn a_plan_mode_run_runs_no_tool_and_ends_with_the_exit_plan_question() {
    let backend = ScriptedBackend::new();
    let (run, text) = run_answering_exit_plan(
        &backend,
        request("permission", "tidy the logs"),
        EXIT_PLAN_OPTIONS[1],
        "Answer \"tidy the logs\"",
    )
    .await;
    assert_eq!(text, "Staying in plan mode.");
    assert!(
        run.assistant_text()
            .contains("Plan mode: I would run `echo hi`"),
        "{}",
        run.assistant_text()
    );
    assert_eq!(run.of_type("permission.requested").count(), 0);
    assert!(
        run.completed_items(agent_api::universal::ItemKind::ToolCall)
            .is_empty(),
        "no tool call in plan mode"
    );
    // The default mode runs the tool as before.
    let handle = backend
        .run(request("permission", "tidy the logs"))
        .await
        .unwrap();
    let default = record_answering(
        handle,
        Answers::permissions(agent_api::PermissionDecision::Allow),
    )
    .await;
    assert_conformant(&default);
    assert_eq!(default.of_type("question.requested").count(), 0);
    assert_eq!(default.of_type("permission.requested").count(), 1);
}

async fn turn(session: &mut Session, prompt: &str, answer: Option<&str>) -> RunRecord {
    let handle = session.send(prompt).await.expect("the turn starts");
    let answers = match answer {
        Some(answer) => Answers::none().with_answer(answer),
        None => Answers::none(),
    };
    let run = record_answering(handle, answers).await;
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    run
}

#[tokio::test]
async fn a_warm_session_switches_to_plan_and_back_and_an_approved_plan_leaves_plan_mode() {
    let backend = ScriptedBackend::new();
    let mut session = backend.open_session(request("text", "")).await.unwrap();
    let first = turn(&mut session, "one", None).await;
    assert_eq!(first.of_type("question.requested").count(), 0);

    session.set_mode(AgentMode::Plan).await.unwrap();
    let planned = turn(&mut session, "two", Some(EXIT_PLAN_OPTIONS[1])).await;
    assert_exit_plan_asked(&planned, "Answer \"two\"");
    assert!(
        planned
            .status_labels()
            .contains(&"mode_changed".to_string()),
        "{:?}",
        planned.status_labels()
    );
    // Kept planning: the next turn plans again; approving it leaves plan mode.
    let approved = turn(&mut session, "three", Some(EXIT_PLAN_OPTIONS[0])).await;
    assert_exit_plan_asked(&approved, "Answer \"three\"");
    let after = turn(&mut session, "four", None).await;
    assert_eq!(after.of_type("question.requested").count(), 0);
    assert_eq!(
        after.completion.as_ref().unwrap().final_text.as_deref(),
        Some("You said: four (turn 4 of this session)")
    );

    // And a switch back to the default mode, explicitly.
    session.set_mode(AgentMode::Plan).await.unwrap();
    session.set_mode(AgentMode::Default).await.unwrap();
    let back = turn(&mut session, "five", None).await;
    assert_eq!(back.of_type("question.requested").count(), 0);
    let unknown = session.set_mode(AgentMode::parse("yolo")).await;
    assert!(
        matches!(unknown, Err(AgentError::UnknownMode { .. })),
        "{unknown:?}"
    );
    session.close().await.unwrap();
}
