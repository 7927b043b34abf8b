//! Writing a backend with the kit: a backend for an imaginary CLI, `greeter`, that prints one
//! JSON line per event. Here the "CLI" is `/bin/echo` printing such a line, so the example runs
//! anywhere; a real backend changes only the argv and the parsing.
//!
//! `cargo run -p agent_api_examples --example custom_backend`

use agent_api::capabilities as caps;
use agent_api::kit::transcript::NewItem;
use agent_api::kit::{
    async_trait, start_run, CommandSpec, Ctx, ExitInfo, Protocol, RunSettings, Transport, Unparsed,
};
use agent_api::universal::ItemRole;
use agent_api::{
    AgentBackend, AgentError, AgentKind, BackendInfo, CapabilitySet, RunCompletion, RunHandle,
    RunRequest,
};
use serde_json::Value;

const KIND: AgentKind = AgentKind::from_static("greeter");

/// The converter: one native line in, transcript calls out.
struct GreeterProtocol;

impl Protocol for GreeterProtocol {
    fn name(&self) -> &'static str {
        "greeter"
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match message.get("type").and_then(Value::as_str) {
            Some("session") => {
                let id = message
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Unparsed("a session line has no id".into()))?;
                ctx.transcript.set_native_session_id(id);
                ctx.transcript.session_started(None);
            }
            Some("say") => {
                let text = message
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                ctx.transcript
                    .message(NewItem::message(ItemRole::Assistant), text);
            }
            // Unknown lines become `agent.unparsed` events; the raw line never reaches an event.
            _ => return Err(Unparsed("unknown greeter line".into())),
        }
        Ok(())
    }

    fn finish(&mut self, exit: &ExitInfo, _ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        if exit.success() {
            Ok(RunCompletion::new()) // final text and session id are filled in from the transcript
        } else {
            Err(exit.early_exit_error())
        }
    }
}

struct GreeterBackend {
    info: BackendInfo,
}

#[async_trait]
impl AgentBackend for GreeterBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    async fn run(&self, request: RunRequest) -> Result<RunHandle, AgentError> {
        self.validate(&request)?;
        // argv only, never a shell string: the prompt is one argument, whatever it contains.
        let line = serde_json::json!({ "type": "say", "text": format!("Hello! You asked: {}", request.prompt.text) });
        let spec = CommandSpec::new("echo")
            .arg(format!(
                "{}\n{line}",
                r#"{"type":"session","id":"greet-1"}"#
            ))
            .for_request(&request);
        let settings = RunSettings::for_request(KIND, &request, &self.info().capabilities);
        let transport = Transport::spawn(&spec, settings.line_cap)?;
        Ok(start_run(settings, transport, Box::new(GreeterProtocol)))
    }
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    let backend = GreeterBackend {
        info: BackendInfo::new(
            KIND,
            CapabilitySet::from_ids([caps::RUN, caps::EVENTS, caps::TEXT_MESSAGES]),
        ),
    };
    let (events, completion) = backend
        .run(RunRequest::new("what is 2 + 2?"))
        .await?
        .collect_universal()
        .await;
    for event in &events {
        println!("#{} {}", event.sequence, event.type_name());
    }
    let done = completion?;
    println!("final text: {}", done.final_text.unwrap_or_default());
    println!("session: {}", done.native_session_id.unwrap_or_default());
    Ok(())
}
