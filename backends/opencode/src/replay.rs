//! Replay of a recorded OpenCode session: `serve` and `acp` recordings are both session logs
//! (`send`/`recv` lines), told apart by their first message: ACP's are JSON-RPC 2.0, `serve`'s
//! are HTTP requests, answers and events.

use agent_api::kit::{Ctx, Protocol};
use agent_api::kit::{ExitInfo, Unparsed};
use agent_api::run::ControlCommand;
use agent_api::{AgentError, RunCompletion};
use serde_json::Value;

use crate::serve::ServeProtocol;

/// The replay converter of an OpenCode session log; it becomes the `serve` or the `acp`
/// converter at the log's first message.
#[derive(Default)]
pub(crate) struct SessionReplay {
    inner: Option<Box<dyn Protocol>>,
}

impl SessionReplay {
    fn inner(&mut self, message: &Value, ctx: &mut Ctx<'_>) -> &mut dyn Protocol {
        let inner = self.inner.get_or_insert_with(|| {
            let mut protocol: Box<dyn Protocol> = if message.get("jsonrpc").is_some() {
                crate::acp::replay()
            } else {
                Box::new(ServeProtocol::replay())
            };
            // A replaying converter sends nothing at its start; it may note what it replays.
            if let Err(error) = protocol.start(ctx) {
                tracing::debug!(%error, "replay converter did not start");
            }
            protocol
        });
        inner.as_mut()
    }
}

impl Protocol for SessionReplay {
    fn name(&self) -> &'static str {
        self.inner.as_ref().map_or("opencode.session", |p| p.name())
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        self.inner(&message, ctx).on_message(message, ctx)
    }

    fn on_recorded_send(&mut self, message: Value, ctx: &mut Ctx<'_>) {
        self.inner(&message, ctx).on_recorded_send(message, ctx)
    }

    fn on_control(&mut self, command: ControlCommand, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        match &mut self.inner {
            Some(inner) => inner.on_control(command, ctx),
            None => Err(AgentError::RunFinished),
        }
    }

    fn interrupt(&mut self, ctx: &mut Ctx<'_>) -> bool {
        self.inner.as_mut().is_some_and(|p| p.interrupt(ctx))
    }

    fn finish(&mut self, exit: &ExitInfo, ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        match &mut self.inner {
            Some(inner) => inner.finish(exit, ctx),
            None => Err(AgentError::Replay {
                reason: "the recorded session holds no message".into(),
            }),
        }
    }
}
