//! Session snapshots: a conversation taken out of one home and continued in another, as if on
//! another machine (`agent_api.session.snapshot`). Two homes on this machine stand for two hosts;
//! the snapshot's bytes are all that travels between them.
//!
//! `cargo run -p agent_api_examples --example snapshot`

use std::sync::Arc;

use agent_api::capabilities::SESSION_SNAPSHOT;
use agent_api::{AgentBackend, AgentError, Gateway, RunRequest, SessionSnapshot};
use agent_api_scripted::{ScriptedBackend, HOME_VAR, KIND};

/// A gateway on one "host": the scripted agent keeps its sessions under `home`.
fn host() -> Gateway {
    let mut gateway = Gateway::new();
    gateway
        .register(Arc::new(ScriptedBackend::new()))
        .expect("one backend");
    gateway
}

fn in_home(home: &std::path::Path) -> RunRequest {
    RunRequest::new("").with_env(HOME_VAR, home.to_string_lossy())
}

async fn say(session: &mut agent_api::Session, prompt: &str) -> Result<String, AgentError> {
    let (_, completion) = session.send(prompt).await?.collect_wrapper().await;
    Ok(completion?.final_text.unwrap_or_default())
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    if !ScriptedBackend::new()
        .info()
        .capabilities
        .contains(SESSION_SNAPSHOT)
    {
        println!("this backend cannot move its sessions; continue them by replay instead");
        return Ok(());
    }
    let (home_a, home_b) = (tempdir(), tempdir());

    // Host A: the first turn, then the session's snapshot as bytes (store them anywhere).
    let mut session = host().open_session(&KIND, in_home(home_a.path())).await?;
    println!("A, turn 1: {}", say(&mut session, "My name is Ada.").await?);
    let bytes = session.snapshot().await?.to_bytes()?;
    session.close().await?;
    println!("snapshot: {} bytes", bytes.len());

    // Host B: an empty home. The snapshot is restored into it, and the agent goes on with its
    // own session, natively.
    let snapshot = SessionSnapshot::from_bytes(&bytes)?;
    let mut session = host()
        .open_session(&KIND, in_home(home_b.path()).with_snapshot(snapshot))
        .await?;
    if let Some(restored) = session.restored() {
        println!("restored on B: {}", restored.summary());
    }
    println!(
        "B, turn 2: {}",
        say(&mut session, "What is my name?").await?
    );
    session.close().await?;

    // A damaged snapshot is a typed error; nothing is written.
    match SessionSnapshot::from_bytes(&bytes[..bytes.len() / 2]) {
        Err(e) => println!("a truncated snapshot: {e}"),
        Ok(_) => println!("unexpectedly read a truncated snapshot"),
    }
    Ok(())
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}
