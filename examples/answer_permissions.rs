//! Answering the agent's permission requests and questions from code, with the typed accessors
//! of the universal view: allow reading, deny everything else, pick the first offered answer.
//!
//! `cargo run -p agent_api_examples --example answer_permissions`

use agent_api::{AgentBackend, PermissionDecision, QuestionAnswer, RunRequest};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};
use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), agent_api::AgentError> {
    // The "tour" scenario runs a command behind a permission and asks a question.
    let request = RunRequest::new("Greet me").with_options(&ScriptedOptions::scenario("tour"));
    let handle = ScriptedBackend::new().run(request).await?;
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    while let Some(event) = events.next().await {
        println!("#{} {}", event.sequence, event.type_name());
        if let Some(asked) = event.permission_request() {
            let decision = if asked.action.starts_with("Read") {
                PermissionDecision::Allow
            } else {
                PermissionDecision::Deny {
                    message: Some("only reading is allowed here".into()),
                }
            };
            println!(
                "   {} -> {}",
                asked.action,
                if decision.is_approval() {
                    "allow"
                } else {
                    "deny"
                }
            );
            control
                .respond_permission(&asked.permission_id, decision)
                .await?;
        }
        if let Some(question) = event.question_request() {
            let choice = question
                .options
                .first()
                .cloned()
                .unwrap_or_else(|| "yes".into());
            println!("   {} -> {choice}", question.prompt);
            control
                .answer_question(&question.question_id, QuestionAnswer::Text(choice))
                .await?;
        }
        if let Some(item) = event.completed_item() {
            if let Some(call) = item.tool_call() {
                println!("   tool call {} {}", call.name, call.arguments);
            }
        }
    }
    println!(
        "final text: {}",
        completion.await?.final_text.unwrap_or_default()
    );
    Ok(())
}
