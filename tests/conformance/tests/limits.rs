//! Limits the SDK enforces on the reported usage, whatever the agent does (`spec/run-protocol.md`
//! §3): on the scripted agent, which reports tokens but knows no limits.

use agent_api::run::LimitKind;
use agent_api::{AgentBackend, AgentError, RunRequest};
use agent_api_conformance::{assert_conformant, record};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};

fn request() -> RunRequest {
    RunRequest::new("hello there").with_options(&ScriptedOptions::scenario("text").delay_ms(0))
}

#[tokio::test]
async fn a_run_past_its_token_limit_ends_with_limit_reached_and_one_within_it_completes() {
    let within = record(
        ScriptedBackend::new()
            .run(request().with_max_total_tokens(1_000_000))
            .await
            .unwrap(),
    )
    .await;
    let total = within
        .completion
        .as_ref()
        .unwrap()
        .usage
        .as_ref()
        .and_then(|u| u.total_tokens())
        .unwrap();
    assert!(total > 1, "the scenario reports tokens: {total}");
    let past = record(
        ScriptedBackend::new()
            .run(request().with_max_total_tokens(total - 1))
            .await
            .unwrap(),
    )
    .await;
    assert_conformant(&past);
    assert!(
        matches!(
            past.completion,
            Err(AgentError::LimitReached {
                limit: LimitKind::TotalTokens
            })
        ),
        "{:?}",
        past.completion
    );
    let message = past.completion.unwrap_err().to_string();
    assert_eq!(message, "the run reached its total tokens limit");
}

/// The scripted agent reports tokens but no cost: a cost limit cannot be checked, and the run says
/// so instead of passing it as if the cost were zero.
#[tokio::test]
async fn a_cost_limit_the_agent_reports_nothing_for_is_said_unchecked() {
    let run = record(
        ScriptedBackend::new()
            .run(request().with_max_cost_usd(0.01))
            .await
            .unwrap(),
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert_eq!(
        run.status_labels()
            .iter()
            .filter(|l| *l == "limit_unchecked")
            .count(),
        1,
        "{:?}",
        run.status_labels()
    );
    let plain = record(ScriptedBackend::new().run(request()).await.unwrap()).await;
    assert!(
        !plain.status_labels().iter().any(|l| l == "limit_unchecked"),
        "no limit, nothing to say"
    );
}

#[tokio::test]
async fn zero_or_negative_limits_are_refused_before_anything_runs() {
    let bad_requests = [
        request().with_max_turns(0),
        request().with_max_cost_usd(-1.0),
        request().with_max_cost_usd(f64::NAN),
        request().with_max_cost_usd(f64::INFINITY),
        request().with_max_cost_usd(0.0),
    ];
    for bad in bad_requests {
        let error = ScriptedBackend::new().run(bad).await.unwrap_err();
        assert!(
            matches!(error, AgentError::InvalidRequest { .. }),
            "{error}"
        );
    }
}
