//! Writing a backend with the kit's short path (`agent_api::kit::cli`): a backend for an imaginary
//! CLI, `greeter`, that prints one JSON line per event. The backend is the agent's description
//! ([`CliAgent`]: what it is, how a run of it starts) and its protocol (how a line becomes
//! events); the kit's [`CliBackend`] validates, spawns, bounds, cancels, and opens sessions.
//!
//! Here the "CLI" is `/bin/echo` printing such lines, so the example runs anywhere; a real
//! backend changes only the argv and the parsing.
//!
//! `cargo run -p agent_api_examples --example custom_backend`

use agent_api::capabilities as caps;
use agent_api::kit::cli::{CliAgent, CliBackend, CliConfig, Launch, Turn};
use agent_api::kit::replay::RecordingFormat;
use agent_api::kit::transcript::NewItem;
use agent_api::kit::{async_trait, Ctx, ExitInfo, Protocol, Unparsed};
use agent_api::universal::ItemRole;
use agent_api::{
    AgentBackend, AgentError, AgentKind, BackendInfo, CapabilitySet, RunCompletion, RunRequest,
};
use serde_json::Value;

/// The agent, as data: the kit's shared backend does the rest.
struct Greeter;

#[async_trait]
impl CliAgent for Greeter {
    type Config = CliConfig;
    const PROGRAM: &'static str = "greeter";

    fn info() -> BackendInfo {
        let capabilities = CapabilitySet::from_ids([caps::RUN, caps::EVENTS, caps::TEXT_MESSAGES]);
        BackendInfo::new(AgentKind::from_static("greeter"), capabilities)
    }

    /// argv only, never a shell string: the prompt is one argument, whatever it contains.
    async fn launch(
        config: &CliConfig,
        request: &RunRequest,
        _turn: Turn,
    ) -> Result<Launch, AgentError> {
        let session = r#"{"type":"session","id":"greet-1"}"#;
        let say = serde_json::json!({ "type": "say", "text": format!("Hello! You asked: {}", request.prompt.text) });
        let spec = config
            .command(Self::PROGRAM, request)
            .arg(format!("{session}\n{say}"));
        Ok(Launch::command(spec, GreeterProtocol))
    }

    fn replay_protocol(_format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        Ok(Box::new(GreeterProtocol))
    }
}

/// The converter: one native line in, transcript calls out.
struct GreeterProtocol;

impl Protocol for GreeterProtocol {
    fn name(&self) -> &'static str {
        "greeter"
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let field = |key: &str| message.get(key).and_then(Value::as_str);
        match field("type") {
            Some("session") => {
                let id = field("id").ok_or_else(|| Unparsed("a session line has no id".into()))?;
                ctx.transcript.set_native_session_id(id);
                ctx.transcript.session_started(None);
            }
            Some("say") => {
                let text = field("text").unwrap_or_default();
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

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    // `echo` stands in for the greeter CLI; a real one is found on `PATH` by its `PROGRAM`.
    let backend = CliBackend::<Greeter>::new(CliConfig::with_binary("echo"));
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
