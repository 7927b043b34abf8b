//! One caller-owned cancellation token stops every run it was given, and nothing else.

use agent_api::request::CancellationToken;
use agent_api::{AgentBackend, AgentError, RunRequest};
use agent_api_conformance::{assert_conformant, record};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};

fn slow(token: CancellationToken) -> RunRequest {
    RunRequest::new("take your time").with_options(&ScriptedOptions::scenario("slow")).with_cancellation(token)
}

#[tokio::test]
async fn one_token_cancels_every_run_that_shares_it() {
    let backend = ScriptedBackend::new();
    let group = CancellationToken::new();
    let mut handles = Vec::new();
    for _ in 0..3 {
        handles.push(backend.run(slow(group.child_token())).await.unwrap());
    }
    let bystander = backend.run(RunRequest::new("hi").with_options(&ScriptedOptions::scenario("text").delay_ms(0))).await.unwrap();
    group.cancel();
    for handle in handles {
        let run = record(handle).await;
        assert!(matches!(run.completion, Err(AgentError::Cancelled)), "{:?}", run.completion);
        assert_conformant(&run);
    }
    let run = record(bystander).await;
    assert!(run.completion.is_ok(), "a run without the token is not touched: {:?}", run.completion);
}

#[tokio::test]
async fn a_token_cancelled_before_the_run_starts_cancels_it_at_once() {
    let token = CancellationToken::new();
    token.cancel();
    let run = record(ScriptedBackend::new().run(slow(token)).await.unwrap()).await;
    assert!(matches!(run.completion, Err(AgentError::Cancelled)));
    assert_conformant(&run);
}

#[tokio::test]
async fn a_token_cancelled_after_the_run_finished_changes_nothing() {
    let token = CancellationToken::new();
    let request = RunRequest::new("hi").with_options(&ScriptedOptions::scenario("text").delay_ms(0)).with_cancellation(token.clone());
    let run = record(ScriptedBackend::new().run(request).await.unwrap()).await;
    token.cancel();
    assert!(run.completion.is_ok(), "{:?}", run.completion);
}
