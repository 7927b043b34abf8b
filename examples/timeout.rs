//! A run that takes too long ends with a typed `Timeout`, its process reaped and its stream closed
//! by one terminal error.
//!
//! `cargo run -p agent_api_examples --example timeout`

use std::time::Duration;

use agent_api::{AgentBackend, AgentError, AgentWrapperEventKind, RunRequest};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    let request = RunRequest::new("tell me a long story")
        .with_options(&ScriptedOptions::scenario("slow"))
        .with_timeout(Duration::from_millis(500));
    let (events, completion) = ScriptedBackend::new()
        .run(request)
        .await?
        .collect_wrapper()
        .await;
    let streamed: String = events.iter().filter_map(|e| e.assistant_text()).collect();
    println!("streamed before the deadline: {streamed}");
    let terminal = events
        .iter()
        .find(|e| e.kind == AgentWrapperEventKind::Error);
    println!(
        "terminal error event: {}",
        terminal
            .and_then(|e| e.message.as_deref())
            .unwrap_or("none")
    );
    match completion {
        Err(AgentError::Timeout { which, after }) => println!(
            "timed out ({}) after {} ms",
            which.as_str(),
            after.as_millis()
        ),
        other => println!("unexpected: {other:?}"),
    }
    Ok(())
}
