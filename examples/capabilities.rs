//! Ask what a backend can do before asking for a feature: the gateway refuses, before anything
//! is spawned, a request that needs a capability the backend does not advertise.
//!
//! `cargo run -p agent_api_examples --example capabilities`

use std::sync::Arc;

use agent_api::capabilities::{self as caps, describe};
use agent_api::{AgentError, AgentKind, Gateway, RunRequest};
use agent_api_scripted::ScriptedBackend;

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    let mut gateway = Gateway::new();
    gateway.register(Arc::new(ScriptedBackend::new()))?;
    let kind = AgentKind::from_static("scripted");
    let capabilities = gateway.capabilities(&kind)?;
    for id in [
        caps::REASONING,
        caps::SESSION_RESUME,
        caps::VARIANTS,
        caps::IMAGES,
    ] {
        let meaning = describe(id).unwrap_or("(backend-specific)");
        let has = if capabilities.contains(id) {
            "yes"
        } else {
            "no "
        };
        println!("{has} {id}: {meaning}");
    }

    // Ask for a model variant only where it is supported; otherwise the gateway says no, by id.
    let request = RunRequest::new("think hard").with_variant("high");
    match gateway.run(&kind, request).await {
        Err(AgentError::UnsupportedCapability { capability, .. }) => {
            println!("refused before spawning: needs {capability}")
        }
        Err(other) => println!("unexpected error: {other}"),
        Ok(_) => println!("the backend supports variants"),
    }
    Ok(())
}
