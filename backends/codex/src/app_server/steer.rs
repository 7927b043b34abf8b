//! Steering the running turn (`agent_api.control.steer`): `turn/steer` on the thread, with the
//! turn's id as its precondition. Codex answers with the turn's id once the input is in the
//! turn, or an error (no active turn, or a turn that takes no steering such as a review or a
//! manual compaction); its own `userMessage` item puts the text in the transcript.

use agent_api::kit::{Ctx, Steering};
use agent_api::AgentError;
use serde_json::json;

use super::{AppServer, Pending};
use crate::errors;

impl AppServer {
    /// Sends `turn/steer` for the running turn; the answer comes with its response.
    pub(super) fn steer_turn(
        &mut self,
        prompt: &agent_api::Prompt,
        ctx: &mut Ctx<'_>,
    ) -> Result<Steering, AgentError> {
        if !self.live_mode() {
            return Err(AgentError::UnsupportedCapability {
                kind: crate::KIND.to_string(),
                capability: agent_api::capabilities::CONTROL_STEER.into(),
            });
        }
        let (Some(thread), Some(turn), false) =
            (self.thread_id.clone(), self.turn_id.clone(), self.turn_over)
        else {
            return Err(AgentError::NoTurnRunning);
        };
        self.steers_sent += 1;
        let number = self.steers_sent;
        let params = json!({
            "threadId": thread,
            "expectedTurnId": turn,
            "input": crate::argv::turn_input(prompt),
        });
        let message = self
            .peer
            .request("turn/steer", params, Pending::Steer(number));
        ctx.send(&message);
        Ok(Steering::Awaiting(number))
    }

    /// Codex refused the steering message `number`: the turn had ended, or takes no steering now.
    pub(super) fn steer_refused(&mut self, number: u64, message: &str, ctx: &mut Ctx<'_>) {
        let error = if self.turn_over || no_active_turn(message) {
            AgentError::TurnEndedBeforeSteer
        } else {
            AgentError::SteerRefused {
                reason: errors::explanation(message),
            }
        };
        ctx.steer_answered(number, Err(error));
    }
}

/// Whether Codex's refusal says no turn was active (or another one was): the turn ended first.
fn no_active_turn(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    message.contains("no active turn")
        || message.contains("expected turn")
        || message.contains("expectedturnid")
        || message.contains("does not match")
}
