//! Runs a prompt through a gateway and prints the wrapper events as they stream.
//!
//! `cargo run -p agent_api_examples --example stream_events -- "Say hello"`

use std::sync::Arc;

use agent_api::{AgentKind, Gateway, PermissionPolicy, RunRequest};
use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), agent_api::AgentError> {
    let prompt = std::env::args().nth(1).unwrap_or_else(|| "Say hello".to_string());
    let mut gateway = Gateway::new();
    gateway.register(Arc::new(agent_api_scripted::ScriptedBackend::new()))?;

    let request = RunRequest::new(prompt).with_permissions(PermissionPolicy::ApproveAll);
    let handle = gateway.run(&AgentKind::from_static("scripted"), request).await?;
    let (mut events, completion) = handle.into_wrapper();
    while let Some(event) = events.next().await {
        if let Some(text) = event.assistant_text() {
            print!("{text}");
        } else if let Some(tool) = event.tools_facet() {
            println!("\n[tool {} {}]", tool.tool_name.as_deref().unwrap_or(&tool.kind), tool.status);
        }
    }
    let done = completion.await?;
    println!("\nfinal text: {}", done.final_text.unwrap_or_default());
    Ok(())
}
