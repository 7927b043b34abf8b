//! One caller-owned cancellation token stops every run it was given, and nothing else.

use agent_api::request::CancellationToken;
use agent_api::universal::{SessionEndReason, UniversalEventBody};
use agent_api::{AgentBackend, AgentError, RunRequest};
use agent_api_conformance::{assert_conformant, record};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};
use futures::StreamExt;

fn slow(token: CancellationToken) -> RunRequest {
    RunRequest::new("take your time")
        .with_options(&ScriptedOptions::scenario("slow"))
        .with_cancellation(token)
}

#[tokio::test]
async fn one_token_cancels_every_run_that_shares_it() {
    let backend = ScriptedBackend::new();
    let group = CancellationToken::new();
    let mut handles = Vec::new();
    for _ in 0..3 {
        handles.push(backend.run(slow(group.child_token())).await.unwrap());
    }
    let bystander = backend
        .run(RunRequest::new("hi").with_options(&ScriptedOptions::scenario("text").delay_ms(0)))
        .await
        .unwrap();
    group.cancel();
    for handle in handles {
        let run = record(handle).await;
        assert!(
            matches!(run.completion, Err(AgentError::Cancelled)),
            "{:?}",
            run.completion
        );
        assert_conformant(&run);
    }
    let run = record(bystander).await;
    assert!(
        run.completion.is_ok(),
        "a run without the token is not touched: {:?}",
        run.completion
    );
}

#[tokio::test]
async fn a_token_cancelled_before_the_run_starts_cancels_it_at_once() {
    let token = CancellationToken::new();
    token.cancel();
    let run = record(ScriptedBackend::new().run(slow(token)).await.unwrap()).await;
    assert!(matches!(run.completion, Err(AgentError::Cancelled)));
    assert_conformant(&run);
}

/// Reads a run up to its last event (`session.ended`: by then its completion is decided), cancels
/// its token there, before the completion is taken, and lets the token's watcher and the driver
/// run: the completion must be the run's own and nothing may follow the last event.
async fn cancel_after_the_last_event() {
    let token = CancellationToken::new();
    let request = RunRequest::new("hi")
        .with_options(&ScriptedOptions::scenario("text").delay_ms(0))
        .with_cancellation(token.clone());
    let (mut events, completion) = ScriptedBackend::new()
        .run(request)
        .await
        .unwrap()
        .into_universal();
    let mut last = None;
    while let Some(event) = events.next().await {
        if let UniversalEventBody::SessionEnded(end) = &event.body {
            last = Some(end.reason);
            break;
        }
    }
    assert_eq!(
        last,
        Some(SessionEndReason::Completed),
        "the run ended well"
    );
    // The moment that matters: the run finished, its completion not taken yet.
    token.cancel();
    for _ in 0..16 {
        tokio::task::yield_now().await;
    }
    assert!(
        events.next().await.is_none(),
        "nothing follows session.ended"
    );
    let completion = completion.await;
    assert!(
        completion.is_ok(),
        "a cancel after the finish changed the outcome: {completion:?}"
    );
}

#[tokio::test]
async fn a_token_cancelled_after_the_run_finished_changes_nothing() {
    for _ in 0..20 {
        // A task, as the driver is: the runtime takes the two turn about.
        if let Err(failed) = tokio::spawn(cancel_after_the_last_event()).await {
            std::panic::resume_unwind(failed.into_panic());
        }
    }
}

/// The same with the driver on another thread, where the cancel may land while the driver is
/// still handing over the completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_cancelled_after_the_run_finished_changes_nothing_on_a_multi_thread_runtime() {
    for _ in 0..20 {
        cancel_after_the_last_event().await;
    }
}
