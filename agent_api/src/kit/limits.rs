//! The SDK's own check of a run's [`Limits`] against what the agent reported, made when a run or
//! turn completes, whatever the CLI enforced itself.

use crate::pipeline::transcript::Transcript;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::request::Limits;
use crate::vocabulary::run::{RunCompletion, Usage};

impl Limits {
    /// `result`, or [`LimitReached`](AgentError::LimitReached) when its usage went past a
    /// limit: the SDK's check, whatever the CLI enforced itself.
    ///
    /// A cost the agent reported as negative, NaN or infinite is unknown (the completion's
    /// `cost_usd` becomes `None`), never zero; a limit whose figure is unknown cannot be checked,
    /// and a `limit_unchecked` status says which, so a run is never taken to be within a limit
    /// nobody measured.
    pub(crate) fn enforce(
        &self,
        result: Result<RunCompletion, AgentError>,
        transcript: &mut Transcript,
    ) -> Result<RunCompletion, AgentError> {
        let mut completion = result?;
        if let Some(usage) = &mut completion.usage {
            usage.cost_usd = usage.cost_usd.and_then(Usage::usable_cost);
        }
        let unreported = Usage::default();
        let usage = completion.usage.as_ref().unwrap_or(&unreported);
        let unknown = [
            (
                self.max_turns.is_some() && usage.turns.is_none(),
                "max_turns: the agent reported no turn count",
            ),
            (
                self.max_total_tokens.is_some() && usage.total_tokens().is_none(),
                "max_total_tokens: the agent reported no token counts",
            ),
            (
                self.max_cost_usd.is_some() && usage.cost_usd.is_none(),
                "max_cost_usd: the agent reported no usable cost",
            ),
        ];
        for (_, why) in unknown.iter().filter(|(unknown, _)| *unknown) {
            transcript.daemon_status("limit_unchecked", Some((*why).to_string()));
        }
        match usage.exceeded(self) {
            Some(limit) => Err(AgentError::LimitReached { limit }),
            None => Ok(completion),
        }
    }
}
