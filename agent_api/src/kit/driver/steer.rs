//! Steering the running turn (`RunControl::steer`): the driver hands the message to the protocol
//! and keeps the caller's reply until the agent has taken it, or the turn has ended first.

use tokio::sync::oneshot;

use super::Core;
use crate::kit::protocol::Steering;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::request::Prompt;

/// The replies of the steering messages the agent has not acknowledged yet, by the protocol's number.
#[derive(Default)]
pub(super) struct PendingSteers(Vec<(u64, oneshot::Sender<Result<(), AgentError>>)>);

impl Core {
    /// A steering message for the running turn: refused while the turn stops, otherwise the
    /// protocol's to send.
    pub(super) fn on_steer(
        &mut self,
        prompt: Prompt,
        reply: oneshot::Sender<Result<(), AgentError>>,
    ) {
        if self.stop.is_some() || self.fatal.is_some() {
            let _ = reply.send(Err(AgentError::NoTurnRunning));
            return;
        }
        let taken = self
            .with_ctx(|p, ctx| p.steer(&prompt, ctx))
            .unwrap_or(Err(AgentError::NoTurnRunning));
        match taken {
            Ok(Steering::Awaiting(id)) => self.steers.0.push((id, reply)),
            Ok(Steering::Taken) => {
                let _ = reply.send(Ok(()));
            }
            Err(error) => {
                let _ = reply.send(Err(error.redacted()));
            }
        }
    }

    /// The agent's answer to the steering message numbered `id`.
    pub(super) fn steer_answered(&mut self, id: u64, result: Result<(), AgentError>) {
        if let Some(at) = self.steers.0.iter().position(|(pending, _)| *pending == id) {
            let (_, reply) = self.steers.0.swap_remove(at);
            let _ = reply.send(result.map_err(AgentError::redacted));
        }
    }

    /// The turn ended: every steering message the agent has not taken is in no turn.
    pub(super) fn turn_ended_for_steers(&mut self) {
        for (_, reply) in self.steers.0.drain(..) {
            let _ = reply.send(Err(AgentError::TurnEndedBeforeSteer));
        }
    }
}
