//! Runs a prompt through a gateway, prints the wrapper events as they stream, and joins each tool
//! call's events into one line with its command, exit code and status.
//!
//! `cargo run -p agent_api_examples --example stream_events -- "Say hello"`

use std::sync::Arc;

use agent_api::run::ToolCalls;
use agent_api::{AgentKind, Gateway, PermissionPolicy, RunRequest};
use agent_api_scripted::ScriptedOptions;
use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), agent_api::AgentError> {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Say hello".to_string());
    let mut gateway = Gateway::new();
    gateway.register(Arc::new(agent_api_scripted::ScriptedBackend::new()))?;

    // The scripted agent's `permission` scenario runs one shell command before it answers.
    let options = ScriptedOptions::scenario("permission");
    let request = RunRequest::new(prompt)
        .with_options(&options)
        .with_permissions(PermissionPolicy::ApproveAll);
    let handle = gateway
        .run(&AgentKind::from_static("scripted"), request)
        .await?;
    // The answer as the agent writes it (`into_wrapper` would give each message once it is sure).
    let (mut events, completion) = handle.into_wrapper_streaming();
    let mut tools = ToolCalls::new();
    while let Some(event) = events.next().await {
        if let Some(text) = event.assistant_text() {
            print!("{text}");
            std::io::Write::flush(&mut std::io::stdout())?;
        } else if event.retraction().is_some() {
            println!("\n[that message was cut off; the agent starts over]");
        } else if let Some(call) = tools.push_wrapper_finished(&event) {
            // A call arrives as several events (call, output, result): this is each call once, joined, when it ends.
            let command = call.command.as_deref().unwrap_or("-");
            let exit = call
                .exit_code
                .map_or_else(|| "-".to_string(), |c| c.to_string());
            println!(
                "\n[tool {} `{command}`: {}, exit {exit}]",
                call.name, call.status
            );
        }
    }
    let done = completion.await?;
    println!("\nfinal text: {}", done.final_text.unwrap_or_default());
    for call in tools.calls() {
        println!(
            "ran {} `{}`: {}",
            call.name,
            call.command.as_deref().unwrap_or("-"),
            call.status
        );
    }
    Ok(())
}
