//! A protocol for the fake CLI (`fake_agent_cli`) used by the fault tests and benchmarks.

use agent_api::kit::driver::{Ctx, ExitInfo, Protocol, Unparsed};
use agent_api::universal::{ItemRole, NewItem};
use agent_api::{AgentError, RunCompletion};
use serde_json::Value;

/// Understands the fake CLI's lines: `text` becomes assistant text; `pid` and `echo` become status items.
#[derive(Default)]
pub struct FakeProtocol {
    message: Option<String>,
}

impl Protocol for FakeProtocol {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match message["type"].as_str() {
            Some("text") => {
                let id = match &self.message {
                    Some(id) => id.clone(),
                    None => {
                        let id = ctx.transcript.start_item(NewItem::message(ItemRole::Assistant));
                        self.message = Some(id.clone());
                        id
                    }
                };
                ctx.transcript.delta(&id, message["text"].as_str().unwrap_or_default());
                Ok(())
            }
            Some("pid") | Some("echo") => {
                ctx.transcript.status(message["type"].as_str().unwrap(), Some(message.to_string()));
                Ok(())
            }
            _ => Err(Unparsed("unknown fake line".into())),
        }
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        if let Some(id) = self.message.take() {
            ctx.transcript.complete_item(&id);
        }
        if exit.success() {
            Ok(RunCompletion::new())
        } else {
            Err(exit.early_exit_error())
        }
    }
}

impl std::fmt::Debug for FakeProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeProtocol").finish_non_exhaustive()
    }
}
