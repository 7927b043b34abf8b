//! The warm-session side of the ACP converter (`spec/run-protocol.md` §8): one ACP session on
//! one live agent, a `session/prompt` per turn, each turn's own outcome and usage, and a cancel
//! that keeps the session.

use agent_api::kit::Ctx;
use agent_api::{AgentError, Prompt, RunCompletion};
use agent_client_protocol_schema::{ContentBlock, StopReason, TextContent};
use serde_json::json;

use super::{stop_name, Acp};

/// A prompt's text as the content blocks of one `session/prompt`.
pub fn prompt_blocks(prompt: &Prompt) -> Vec<ContentBlock> {
    vec![ContentBlock::Text(TextContent::new(prompt.text.clone()))]
}

impl Acp {
    /// How the last turn went, once its stop reason is known (taken: each turn reports once).
    pub(super) fn outcome(&mut self) -> Option<Result<RunCompletion, AgentError>> {
        Some(match self.stop.take()? {
            StopReason::Cancelled => Err(AgentError::Cancelled),
            StopReason::Refusal => Err(AgentError::AgentFailed { message: "the agent refused to continue (stop reason refusal)".into() }),
            stop => {
                let mut completion = RunCompletion::new();
                completion.native_session_id = self.session_id.clone();
                completion.usage = self.usage.take();
                completion.data = Some(json!({"stop_reason": stop_name(stop), "agent": self.agent}));
                Ok(completion)
            }
        })
    }

    /// A warm session's next turn: one `session/prompt`, sent at once when the ACP session is
    /// open, else when `session/new` (or `session/load`) answers.
    pub(super) fn next_turn(&mut self, prompt: &Prompt, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        if !self.warm {
            return Err(AgentError::InvalidRequest { reason: "this ACP run takes no more turns".into() });
        }
        if let Some(error) = self.fatal.take() {
            return Err(error);
        }
        let Some(plan) = self.plan.as_mut() else {
            return Err(AgentError::InvalidRequest { reason: "a replay takes no turns".into() });
        };
        // Each turn reports its own stop reason and usage.
        self.stop = None;
        self.usage = None;
        plan.prompts.push_back(prompt_blocks(prompt));
        self.send_prompt(ctx);
        Ok(())
    }

    /// Cancels a warm session's turn whose prompt has not gone out yet (the ACP session is still
    /// opening): it ends at once. Returns whether there was one.
    pub(super) fn cancel_unsent(&mut self, ctx: &mut Ctx<'_>) -> bool {
        match self.plan.as_mut() {
            Some(plan) if self.warm && !self.prompt_in_flight && !plan.prompts.is_empty() => {
                plan.prompts.clear();
                ctx.end_turn(Err(AgentError::Cancelled));
                true
            }
            _ => false,
        }
    }
}
