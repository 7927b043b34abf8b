//! Fan-out: three runs at once under one cancellation token; the first to finish cancels the rest.
//!
//! `cargo run -p agent_api_examples --example fan_out`

use agent_api::request::CancellationToken;
use agent_api::{AgentBackend, AgentError, RunRequest};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};
use futures::future::join_all;

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    let backend = ScriptedBackend::new();
    let group = CancellationToken::new();
    // One quick run and two slow ones; each gets a child of the group's token.
    let scenarios = [("quick", "text"), ("slow 1", "slow"), ("slow 2", "slow")];
    let mut runs = Vec::new();
    for (name, scenario) in scenarios {
        let request = RunRequest::new(format!("task {name}"))
            .with_options(&ScriptedOptions::scenario(scenario))
            .with_cancellation(group.child_token());
        let handle = backend.run(request).await?;
        let group = group.clone();
        runs.push(async move {
            let (_events, completion) = handle.collect_wrapper().await;
            if completion.is_ok() {
                group.cancel(); // the first success stops everyone else
            }
            (name, completion)
        });
    }
    for (name, completion) in join_all(runs).await {
        match completion {
            Ok(done) => println!("{name}: finished: {}", done.final_text.unwrap_or_default()),
            Err(AgentError::Cancelled) => println!("{name}: cancelled"),
            Err(other) => println!("{name}: failed: {other}"),
        }
    }
    Ok(())
}
