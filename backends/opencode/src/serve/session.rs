//! The warm-session side of the `serve` converter: one OpenCode session on one server, one
//! `prompt_async` per turn, each turn ended at its `session.idle` (`spec/run-protocol.md` §8).
//! Cancelling a turn aborts the OpenCode session's work (`POST /session/{id}/abort`); the
//! session stays usable for the next turn.

use agent_api::kit::{start_session, Ctx, RunSettings};
use agent_api::{AgentError, Prompt, RunRequest, Session};

use super::{bridged, server, ServeProtocol};
use crate::config::OpenCodeConfig;
use crate::parts::Parts;

impl ServeProtocol {
    /// A converter serving a warm session (the request's prompt is ignored: turns bring theirs).
    fn session(request: &RunRequest, directory: String) -> Result<Self, AgentError> {
        Ok(Self {
            warm: true,
            ..Self::live(request, directory)?
        })
    }

    /// The next turn: its prompt on the OpenCode session, or queued until the session is known.
    /// A set-up failure met before any turn was waiting for it ends this turn and the session.
    pub(super) fn next_turn(
        &mut self,
        prompt: &Prompt,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        if !self.warm {
            return Err(AgentError::no_more_turns("opencode"));
        }
        if let Some(failure) = self.failure.take() {
            ctx.shutdown();
            return Err(failure);
        }
        // Each turn has its own parts, usage and error.
        self.parts = Parts::default();
        self.error = None;
        let parts = super::prompt_parts(prompt)?;
        match self.session_id {
            Some(_) => self.prompt(ctx, parts),
            None => self.queued = Some(parts),
        }
        Ok(())
    }

    /// The next turns' mode (`agent_api.session.mode_switch`): each prompt names its OpenCode
    /// agent (`plan`; none for the default, OpenCode's default agent), so the switch is the next
    /// prompt's `agent` field; what the agent still asks is decided as the mode says.
    pub(super) fn switch_mode(
        &mut self,
        mode: &agent_api::request::AgentMode,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        let Some(plan) = self.plan.as_mut().filter(|_| self.warm) else {
            let capability = agent_api::capabilities::SESSION_MODE_SWITCH.to_string();
            return Err(AgentError::UnsupportedCapability {
                kind: crate::KIND.to_string(),
                capability,
            });
        };
        agent_api::kit::check_mode(crate::KIND.as_str(), crate::portable::MODES, mode)?;
        plan.agent = super::prompt_agent(Some(mode));
        self.hitl.switch_mode(ctx.transcript, mode, &self.policy);
        Ok(())
    }

    /// A request of a warm session failed: a refused prompt fails only its turn; a refused
    /// set-up ends the session, with the error going to the turn waiting for it (or the next one).
    pub(super) fn warm_failure(&mut self, ctx: &mut Ctx<'_>, prompt: bool, error: AgentError) {
        if prompt {
            self.idle = true;
            return ctx.end_turn(Err(error));
        }
        if self.queued.take().is_some() {
            ctx.end_turn(Err(error));
            ctx.shutdown();
        } else {
            self.failure = Some(error);
        }
    }
}

/// Opens a warm session: the backend's server for this environment (starting one if none runs)
/// and one OpenCode session on it, created (or resumed, or forked) in the request's directory.
pub(crate) async fn open(
    config: &OpenCodeConfig,
    pool: &server::ServerPool,
    request: RunRequest,
    settings: RunSettings,
) -> Result<Session, AgentError> {
    let directory = crate::working_dir(config, &request)
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let server = super::server_for(config, pool, &request).await?;
    let transport = bridged(server, &settings);
    Ok(start_session(
        settings,
        transport,
        Box::new(ServeProtocol::session(&request, directory)?),
    ))
}
