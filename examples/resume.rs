//! Resume: check that the backend can continue a session, then continue it by its native id.
//!
//! `cargo run -p agent_api_examples --example resume`

use agent_api::capabilities::SESSION_RESUME;
use agent_api::{AgentBackend, AgentError, RunRequest, SessionSelector};
use agent_api_scripted::ScriptedBackend;

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    let backend = ScriptedBackend::new();
    if !backend.info().capabilities.contains(SESSION_RESUME) {
        println!(
            "{} cannot resume sessions; every run starts afresh",
            backend.info().kind
        );
        return Ok(());
    }
    let (_, first) = backend
        .run(RunRequest::new("My name is Ada."))
        .await?
        .collect_wrapper()
        .await;
    let first = first?;
    let session = first
        .native_session_id
        .expect("a backend that resumes reports its session id");
    println!(
        "turn 1 ({session}): {}",
        first.final_text.unwrap_or_default()
    );

    let again = RunRequest::new("What is my name?")
        .with_session(SessionSelector::Resume(session.clone().into()));
    let (_, second) = backend.run(again).await?.collect_wrapper().await;
    let second = second?;
    println!(
        "turn 2 ({}): {}",
        second.native_session_id.unwrap_or_default(),
        second.final_text.unwrap_or_default()
    );

    // A session the agent does not know is a typed error, before anything runs.
    match backend
        .run(RunRequest::new("hi").with_session(SessionSelector::Resume("no-such-session".into())))
        .await
    {
        Err(AgentError::SessionNotFound { id }) => println!("no session {id}, as expected"),
        Err(other) => println!("unexpected error: {other}"),
        Ok(_) => println!("unexpectedly resumed a session that never existed"),
    }
    Ok(())
}
