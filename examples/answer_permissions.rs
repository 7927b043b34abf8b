//! Reads the universal transcript and answers the agent's permission requests and questions.
//!
//! `cargo run -p agent_api_examples --example answer_permissions`

use agent_api::universal::UniversalEventBody;
use agent_api::{AgentBackend, PermissionDecision, QuestionAnswer, RunRequest};
use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), agent_api::AgentError> {
    let backend = agent_api_scripted::ScriptedBackend::new();
    let handle = backend.run(RunRequest::new("Greet me")).await?;
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    while let Some(event) = events.next().await {
        println!("#{} {}", event.sequence, event.type_name());
        match &event.body {
            UniversalEventBody::PermissionRequested(p) => {
                println!("   allowing: {}", p.action);
                control.respond_permission(&p.permission_id, PermissionDecision::Allow).await?;
            }
            UniversalEventBody::QuestionRequested(q) => {
                let choice = q.options.first().cloned().unwrap_or_default();
                println!("   {} -> {choice}", q.prompt);
                control.answer_question(&q.question_id, QuestionAnswer::Text(choice)).await?;
            }
            _ => {}
        }
    }
    println!("final text: {:?}", completion.await?.final_text);
    Ok(())
}
