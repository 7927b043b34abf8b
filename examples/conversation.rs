//! A conversation: three turns on one warm session of the scripted agent, offline. Each turn is
//! what a run is (events, a completion); all of them form one transcript.
//!
//! `cargo run -p agent_api_examples --example conversation`

use std::sync::Arc;

use agent_api::capabilities::SESSION_WARM;
use agent_api::{AgentError, Gateway, RunRequest};
use agent_api_scripted::ScriptedBackend;
use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    let mut gateway = Gateway::new();
    gateway.register(Arc::new(ScriptedBackend::new()))?;
    let kind = agent_api_scripted::KIND;
    println!(
        "{kind} keeps one live agent for a session: {}",
        gateway.capabilities(&kind)?.contains(SESSION_WARM)
    );

    // The template holds everything but the prompt: working directory, model, permissions, timeout.
    let mut session = gateway.open_session(&kind, RunRequest::new("")).await?;
    for prompt in ["My name is Ada.", "What is my name?", "Thanks!"] {
        let (mut events, completion) = session.send(prompt).await?.into_wrapper();
        print!("> {prompt}\n< ");
        while let Some(event) = events.next().await {
            if let Some(text) = event.assistant_text() {
                print!("{text}");
            }
        }
        let done = completion.await?;
        println!(
            "\n  (session {})",
            done.native_session_id.unwrap_or_default()
        );
    }
    // Sending while a turn runs is refused, never queued.
    let turn = session.send("one more").await?;
    match session.send("too soon").await {
        Err(AgentError::TurnInProgress) => {
            println!("a second turn waits for the first: TurnInProgress")
        }
        Err(other) => println!("unexpected error: {other}"),
        Ok(_) => println!("unexpected: a second turn started"),
    }
    turn.collect_wrapper().await.1?;
    let trailing = session.close().await?;
    println!(
        "closed; the transcript ends with {}",
        trailing.last().map_or("nothing", |e| e.type_name())
    );
    Ok(())
}
