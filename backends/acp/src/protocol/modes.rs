//! A warm session's mode switch over ACP (`agent_api.session.mode_switch`): `session/set_mode`
//! with the agent's own mode id, from the modes its `session/new` (or `session/load`) answer
//! advertised. A mode is the same as one of the agent's when their ids differ only in case and
//! separators (the SDK's `auto_edit` is Gemini CLI's `autoEdit` and Qwen Code's `auto-edit`).
//! The default mode is the agent's `default` where it lists one, else the mode its session
//! opened in (OpenCode's `build`). A switch asked before the session is open waits for it (checked then against the agent's
//! modes, where the backend has no list of its own; a refused one is a `mode_refused` status).

use agent_api::kit::bounds::utf8_prefix;
use agent_api::kit::Ctx;
use agent_api::request::{AgentMode, ModeInfo};
use agent_api::AgentError;
use agent_client_protocol_schema::{SessionModeState, SetSessionModeRequest};

use super::Acp;
use crate::requests::to_value;

/// Modes kept of an answer (a hostile agent may list any number).
const MAX_MODES: usize = 32;

/// An id as compared: lowercase, without `_`, `-` or spaces.
fn normalized(id: &str) -> String {
    id.chars().filter(|c| !matches!(c, '_' | '-' | ' ')).flat_map(char::to_lowercase).collect()
}

/// The agent's own id for `mode` among `advertised`; the default is `opened` (the mode the
/// session opened in) where the agent lists no `default`.
pub(crate) fn agent_mode_id<'a>(advertised: &'a [String], opened: Option<&'a str>, mode: &AgentMode) -> Option<&'a str> {
    let wanted = normalized(mode.as_str());
    let own = advertised.iter().map(String::as_str).find(|id| normalized(id) == wanted);
    own.or(opened.filter(|_| *mode == AgentMode::Default))
}

impl Acp {
    /// A warm session may switch among `modes` (the backend's list, checked when the switch is
    /// asked); without it the agent's advertised modes alone decide.
    pub fn with_mode_switch(mut self, modes: &'static [ModeInfo]) -> Self {
        self.switch_modes = Some(modes);
        self
    }

    /// The agent kind in errors: the converter's name up to its first dot (`gemini.acp`).
    fn kind_name(&self) -> String {
        self.name.split('.').next().unwrap_or(self.name).to_string()
    }

    /// The modes a `session/new` or `session/load` answer advertised; a switch asked before it
    /// goes out now (or is reported refused, when the agent has no such mode).
    pub(super) fn modes_known(&mut self, modes: Option<SessionModeState>, ctx: &mut Ctx<'_>) {
        self.opened_mode = modes.as_ref().map(|m| utf8_prefix(&m.current_mode_id.0, 64).to_string());
        self.agent_modes =
            modes.into_iter().flat_map(|m| m.available_modes).take(MAX_MODES).map(|m| utf8_prefix(&m.id.0, 64).to_string()).collect();
        self.session_open = true;
        for mode in std::mem::take(&mut self.queued_modes) {
            if let Err(refused) = self.send_mode(&mode, ctx) {
                ctx.transcript.status("mode_refused", Some(refused.to_string()));
            }
        }
    }

    /// Switches a warm session's next turns to `mode`.
    pub(super) fn switch_mode(&mut self, mode: &AgentMode, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        if !self.warm || self.plan.is_none() {
            let capability = agent_api::capabilities::SESSION_MODE_SWITCH.to_string();
            return Err(AgentError::UnsupportedCapability { kind: self.kind_name(), capability });
        }
        if let Some(modes) = self.switch_modes {
            agent_api::kit::check_mode(&self.kind_name(), modes, mode)?;
        }
        if self.session_open {
            self.send_mode(mode, ctx)?;
        } else {
            self.queued_modes.push(mode.clone());
        }
        // What the agent still asks is decided as the new mode says (plan mode denies writes).
        self.requests.set_mode(mode);
        ctx.transcript.daemon_status("mode_changed", Some(mode.as_str().to_string()));
        Ok(())
    }

    /// `session/set_mode` with the agent's own id for `mode`.
    fn send_mode(&mut self, mode: &AgentMode, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let (Some(session), false) = (self.session_id.clone(), self.agent_modes.is_empty()) else {
            let capability = agent_api::capabilities::SESSION_MODE_SWITCH.to_string();
            return Err(AgentError::UnsupportedCapability { kind: self.kind_name(), capability });
        };
        let Some(id) = agent_mode_id(&self.agent_modes, self.opened_mode.as_deref(), mode).map(str::to_string) else {
            return Err(AgentError::UnknownMode {
                kind: self.kind_name(),
                mode: utf8_prefix(mode.as_str(), 64).to_string(),
                valid: self.agent_modes.clone(),
            });
        };
        self.send_request(ctx, "session/set_mode", to_value(&SetSessionModeRequest::new(session, id)));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_is_the_agents_own_id_whatever_its_case_and_separators() {
        let gemini: Vec<String> = ["default", "autoEdit", "yolo", "plan"].map(String::from).to_vec();
        let qwen: Vec<String> = ["plan", "default", "auto-edit", "yolo"].map(String::from).to_vec();
        assert_eq!(agent_mode_id(&gemini, Some("plan"), &AgentMode::parse("auto_edit")), Some("autoEdit"));
        assert_eq!(agent_mode_id(&qwen, None, &AgentMode::parse("auto_edit")), Some("auto-edit"));
        assert_eq!(agent_mode_id(&gemini, None, &AgentMode::Plan), Some("plan"));
        assert_eq!(agent_mode_id(&gemini, Some("plan"), &AgentMode::Default), Some("default"));
        assert_eq!(agent_mode_id(&gemini, None, &AgentMode::parse("build")), None);
        // An agent without a `default` mode (OpenCode: build, plan): the mode it opened in.
        let opencode: Vec<String> = ["build", "plan"].map(String::from).to_vec();
        assert_eq!(agent_mode_id(&opencode, Some("build"), &AgentMode::Default), Some("build"));
        assert_eq!(agent_mode_id(&opencode, Some("build"), &AgentMode::parse("yolo")), None);
    }
}
