//! A permission request or question the caller leaves unanswered: the run says it waits for the
//! caller, and past the request's limit ([`agent_api::request::CallerWait`]) it is decided on the
//! caller's behalf, `decided_by: timeout`.

use std::time::Duration;

use agent_api::request::OnCallerTimeout;
use agent_api::universal::{DecidedBy, PermissionStatus, QuestionStatus};
use agent_api::{AgentBackend, AgentError, PermissionPolicy, RunRequest};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};

fn request(scenario: &str) -> RunRequest {
    RunRequest::new("hi")
        .with_options(&ScriptedOptions::scenario(scenario).delay_ms(0))
        .with_permissions(PermissionPolicy::Ask)
        .with_timeout(Duration::from_secs(30))
}

/// Runs `request` without ever answering the caller's requests.
async fn unanswered(request: RunRequest) -> RunRecord {
    let run = tokio::time::timeout(
        Duration::from_secs(20),
        record(ScriptedBackend::new().run(request).await.unwrap()),
    )
    .await;
    let run = run.expect("the limit decides; nothing waits for the run's own timeout");
    assert_conformant(&run);
    run
}

#[tokio::test]
async fn an_unanswered_permission_is_denied_at_its_limit_and_the_run_goes_on() {
    let run =
        unanswered(request("permission").with_permission_timeout(Duration::from_millis(300))).await;
    assert!(
        run.status_labels()
            .iter()
            .any(|l| l == "waiting_for_caller"),
        "{:?}",
        run.status_labels()
    );
    let resolved: Vec<_> = run
        .universal
        .iter()
        .filter_map(|e| {
            e.permission()
                .filter(|p| p.status != PermissionStatus::Requested)
        })
        .collect();
    assert_eq!(resolved.len(), 1);
    assert_eq!(
        (resolved[0].status, resolved[0].decided_by),
        (PermissionStatus::Denied, Some(DecidedBy::Timeout))
    );
    assert!(
        run.completion.is_ok(),
        "the agent hears the denial and finishes: {:?}",
        run.completion
    );
}

#[tokio::test]
async fn an_unanswered_question_is_rejected_at_its_limit() {
    let run =
        unanswered(request("question").with_question_timeout(Duration::from_millis(300))).await;
    let resolved: Vec<_> = run
        .universal
        .iter()
        .filter_map(|e| {
            e.question()
                .filter(|q| q.status != QuestionStatus::Requested)
        })
        .collect();
    assert_eq!(resolved.len(), 1);
    assert_eq!(
        (resolved[0].status, resolved[0].decided_by),
        (QuestionStatus::Rejected, Some(DecidedBy::Timeout))
    );
}

#[tokio::test]
async fn cancel_run_at_the_limit_cancels_the_run_and_says_the_timeout_decided() {
    let request = request("permission")
        .with_permission_timeout(Duration::from_millis(300))
        .with_on_caller_timeout(OnCallerTimeout::CancelRun);
    let run = unanswered(request).await;
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    let decided: Vec<_> = run
        .universal
        .iter()
        .filter_map(|e| e.permission())
        .filter_map(|p| p.decided_by)
        .collect();
    assert_eq!(decided, [DecidedBy::Timeout]);
}

#[tokio::test]
async fn a_request_answered_in_time_is_the_callers() {
    let request = request("permission").with_permission_timeout(Duration::from_secs(10));
    let run = agent_api_conformance::record_answering(
        ScriptedBackend::new().run(request).await.unwrap(),
        agent_api_conformance::Answers::permissions(agent_api::PermissionDecision::Allow),
    )
    .await;
    assert_conformant(&run);
    let decided: Vec<_> = run
        .universal
        .iter()
        .filter_map(|e| e.permission())
        .filter_map(|p| p.decided_by)
        .collect();
    assert_eq!(decided, [DecidedBy::Caller]);
}
