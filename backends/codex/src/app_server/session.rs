//! The session side of the app-server converter: one thread, a `turn/start` per turn, each
//! turn's own outcome, and interrupts of turns whose id is not known yet.

use agent_api::kit::Ctx;
use agent_api::{AgentError, RunCompletion};
use serde_json::{json, Value};

use super::{schema, AppServer, Outcome};

impl AppServer {
    /// Interrupts the turn a cancel came for before its id was known.
    pub(super) fn send_pending_interrupt(&mut self, ctx: &mut Ctx<'_>) {
        if let (true, Some(thread), Some(turn), None) = (
            self.interrupt_pending,
            &self.thread_id,
            &self.turn_id,
            &self.outcome,
        ) {
            let params = json!({"threadId": thread, "turnId": turn});
            self.interrupt_pending = false;
            self.send_request(ctx, "turn/interrupt", params);
        }
    }

    /// Sends `turn/start` on the thread with `input`.
    pub(super) fn start_turn(&mut self, ctx: &mut Ctx<'_>, thread_id: &str, input: Option<Value>) {
        let Some(plan) = &self.plan else { return };
        let mut params = plan.turn_params.clone();
        params.insert("threadId".into(), json!(thread_id));
        if let Some(input) = input {
            params.insert("input".into(), input);
        }
        self.send_request(ctx, "turn/start", Value::Object(params));
    }

    /// A warm session's switch to `mode` (`agent_api.session.mode_switch`): the next `turn/start`
    /// carries the mode's approval and sandbox policies, which Codex keeps for the turns after,
    /// and the SDK decides requests in the mode's policy.
    pub(super) fn switch_mode(
        &mut self,
        mode: &agent_api::request::AgentMode,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        let Some(plan) = self.plan.as_mut().filter(|_| self.session) else {
            let capability = agent_api::capabilities::SESSION_MODE_SWITCH.to_string();
            return Err(AgentError::UnsupportedCapability {
                kind: crate::KIND.to_string(),
                capability,
            });
        };
        agent_api::kit::check_mode(crate::KIND.as_str(), crate::config::MODES, mode)?;
        if let Some((_, params)) = plan.modes.iter().find(|(m, _)| m == mode) {
            plan.turn_params.extend(params.clone());
        }
        self.requests
            .switch_mode(ctx.transcript, mode, &plan.policy);
        Ok(())
    }

    /// How the turn went, once it completed.
    pub(super) fn completion(&mut self) -> Option<Result<RunCompletion, AgentError>> {
        Some(match self.outcome.take()? {
            Outcome::Completed => {
                let mut completion = RunCompletion::new();
                completion.final_text = self.items.final_text.take();
                completion.native_session_id = self.thread_id.clone();
                completion.usage = self
                    .usage
                    .as_ref()
                    .map(schema::TokenUsageBreakdown::to_usage);
                completion.data = Some(
                    json!({"mode": "app_server", "thread_id": self.thread_id, "turn_id": self.turn_id, "usage_scope": "turn"}),
                );
                Ok(completion)
            }
            Outcome::Interrupted => Err(AgentError::Cancelled),
            Outcome::Failed(error) => Err(error),
        })
    }

    /// A session's next turn: `turn/start` on the thread, or queued until the thread is ready.
    pub(super) fn next_turn(
        &mut self,
        prompt: &agent_api::Prompt,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        if !self.session {
            return Err(AgentError::no_more_turns("codex"));
        }
        if let Some(fatal) = self.fatal.take() {
            // The session never started: this turn gets the refusal, and the session ends.
            ctx.shutdown();
            return Err(fatal);
        }
        // Each turn has its own id, outcome, errors, usage and answer.
        self.turn_id = None;
        self.turn_over = false;
        self.outcome = None;
        self.last_error = None;
        self.usage = None;
        self.items.final_text = None;
        self.interrupt_pending = false;
        let input = crate::argv::turn_input(prompt);
        match self.thread_id.clone() {
            Some(thread_id) => self.start_turn(ctx, &thread_id, Some(input)),
            None => self.queued_turn = Some(input),
        }
        Ok(())
    }

    /// A session's request was refused. A refused `turn/start` fails only its turn (the thread
    /// lives on); a refused set-up (initialize, the thread request) ends the session, and its
    /// error goes to the turn waiting for the thread, or else to the next send, so that it is
    /// never lost to a bare process exit.
    pub(super) fn session_refused(
        &mut self,
        ctx: &mut Ctx<'_>,
        turn_start: bool,
        error: AgentError,
    ) {
        if turn_start {
            return ctx.end_turn(Err(error));
        }
        if self.queued_turn.take().is_some() {
            ctx.end_turn(Err(error));
            ctx.shutdown();
        } else {
            self.fatal.get_or_insert(error);
        }
    }

    /// Cancels a session's turn that has no id yet: a queued one ends at once, a started one is
    /// interrupted as soon as its id is known.
    pub(super) fn interrupt_unstarted(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if self.queued_turn.take().is_some() {
            ctx.end_turn(Err(AgentError::Cancelled));
        } else {
            self.interrupt_pending = true;
        }
        true
    }
}
