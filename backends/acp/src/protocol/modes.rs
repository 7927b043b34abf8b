//! A warm session's mode switch over ACP (`agent_api.session.mode_switch`): `session/set_mode`
//! with the agent's own mode id, from the modes its `session/new` (or `session/load`) answer
//! advertised. A mode is the same as one of the agent's when their ids differ only in case and
//! separators (the SDK's `auto_edit` is an agent's `autoEdit` or `auto-edit`).
//! An agent may advertise its modes instead as the values of a config option of category `mode`
//! (`mode`: `build` or `plan`, say); then the switch is `session/set_config_option` on it.
//! The default mode is the agent's `default` where it lists one, else the mode its session
//! opened in (`build`, say). A switch asked before the session is open waits for it (checked then against the agent's
//! modes, where the backend has no list of its own; a refused one is a `mode_refused` status).

use agent_api::kit::bounds::utf8_prefix;
use agent_api::kit::Ctx;
use agent_api::request::{AgentMode, ModeInfo};
use agent_api::AgentError;
use agent_client_protocol_schema::{
    SessionConfigKind, SessionConfigOption, SessionConfigOptionCategory,
    SessionConfigSelectOptions, SessionModeState, SetSessionConfigOptionRequest,
    SetSessionModeRequest,
};

use super::Acp;
use crate::rpc::to_value;

/// Modes kept of an answer (a hostile agent may list any number).
const MAX_MODES: usize = 32;

/// An id as compared: lowercase, without `_`, `-` or spaces.
fn normalized(id: &str) -> String {
    id.chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The agent's own id for `mode` among `advertised`; the default is `opened` (the mode the
/// session opened in) where the agent lists no `default`.
pub(crate) fn agent_mode_id<'a>(
    advertised: &'a [String],
    opened: Option<&'a str>,
    mode: &AgentMode,
) -> Option<&'a str> {
    let wanted = normalized(mode.as_str());
    let own = advertised
        .iter()
        .map(String::as_str)
        .find(|id| normalized(id) == wanted);
    own.or(opened.filter(|_| *mode == AgentMode::Default))
}

/// The modes a `session/new` or `session/load` answer advertised.
#[derive(Debug, Default)]
pub(crate) struct Advertised {
    /// The mode the session opened in.
    pub(crate) current: Option<String>,
    /// The agent's own mode ids.
    ids: Vec<String>,
    /// The config option whose values they are, when they came as one.
    config: Option<String>,
}

impl Advertised {
    /// The answer's `modes`, else its first select config option of category `mode`.
    pub(crate) fn of(
        modes: Option<SessionModeState>,
        options: Option<Vec<SessionConfigOption>>,
    ) -> Self {
        let id = |text: &str| utf8_prefix(text, 64).to_string();
        if let Some(modes) = modes {
            return Self {
                current: Some(id(&modes.current_mode_id.0)),
                ids: modes
                    .available_modes
                    .iter()
                    .take(MAX_MODES)
                    .map(|m| id(&m.id.0))
                    .collect(),
                config: None,
            };
        }
        let select =
            options
                .into_iter()
                .flatten()
                .find_map(|option| match (option.category, option.kind) {
                    (
                        Some(SessionConfigOptionCategory::Mode),
                        SessionConfigKind::Select(select),
                    ) => Some((option.id, select)),
                    _ => None,
                });
        let Some((config, select)) = select else {
            return Self::default();
        };
        let values = match select.options {
            SessionConfigSelectOptions::Ungrouped(values) => values,
            SessionConfigSelectOptions::Grouped(groups) => {
                groups.into_iter().flat_map(|g| g.options).collect()
            }
            _ => Vec::new(),
        };
        Self {
            current: Some(id(&select.current_value.0)),
            ids: values
                .iter()
                .take(MAX_MODES)
                .map(|v| id(&v.value.0))
                .collect(),
            config: Some(id(&config.0)),
        }
    }
}

impl Acp {
    /// A warm session may switch among `modes` (the backend's list, checked when the switch is
    /// asked); without it the agent's advertised modes alone decide.
    pub fn with_mode_switch(mut self, modes: &'static [ModeInfo]) -> Self {
        self.switch_modes = Some(modes);
        self
    }

    /// The agent kind in errors: the converter's name up to its first dot (`my_agent.acp`).
    fn kind_name(&self) -> String {
        self.name.split('.').next().unwrap_or(self.name).to_string()
    }

    /// The modes a `session/new` or `session/load` answer advertised; a switch asked before it
    /// goes out now (or is reported refused, when the agent has no such mode).
    pub(super) fn modes_known(&mut self, advertised: Advertised, ctx: &mut Ctx<'_>) {
        self.opened_mode = advertised.current;
        self.agent_modes = advertised.ids;
        self.mode_config = advertised.config;
        self.session_open = true;
        for mode in std::mem::take(&mut self.queued_modes) {
            if let Err(refused) = self.send_mode(&mode, ctx) {
                ctx.transcript
                    .status("mode_refused", Some(refused.to_string()));
            }
        }
    }

    /// Switches a warm session's next turns to `mode`.
    pub(super) fn switch_mode(
        &mut self,
        mode: &AgentMode,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        if !self.warm || self.plan.is_none() {
            let capability = agent_api::capabilities::SESSION_MODE_SWITCH.to_string();
            return Err(AgentError::UnsupportedCapability {
                kind: self.kind_name(),
                capability,
            });
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
        ctx.transcript
            .daemon_status("mode_changed", Some(mode.as_str().to_string()));
        Ok(())
    }

    /// `session/set_mode` (or `session/set_config_option`) with the agent's own id for `mode`.
    fn send_mode(&mut self, mode: &AgentMode, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let (Some(session), false) = (self.session_id.clone(), self.agent_modes.is_empty()) else {
            let capability = agent_api::capabilities::SESSION_MODE_SWITCH.to_string();
            return Err(AgentError::UnsupportedCapability {
                kind: self.kind_name(),
                capability,
            });
        };
        let Some(id) =
            agent_mode_id(&self.agent_modes, self.opened_mode.as_deref(), mode).map(str::to_string)
        else {
            return Err(AgentError::UnknownMode {
                kind: self.kind_name(),
                mode: utf8_prefix(mode.as_str(), 64).to_string(),
                valid: self.agent_modes.clone(),
            });
        };
        match self.mode_config.clone() {
            Some(config) => {
                let params = to_value(&SetSessionConfigOptionRequest::new(session, config, id));
                self.send_request(ctx, "session/set_config_option", params);
            }
            None => self.send_request(
                ctx,
                "session/set_mode",
                to_value(&SetSessionModeRequest::new(session, id)),
            ),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_is_the_agents_own_id_whatever_its_case_and_separators() {
        let camel: Vec<String> = ["default", "autoEdit", "yolo", "plan"]
            .map(String::from)
            .to_vec();
        let kebab: Vec<String> = ["plan", "default", "auto-edit", "yolo"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            agent_mode_id(&camel, Some("plan"), &AgentMode::parse("auto_edit")),
            Some("autoEdit")
        );
        assert_eq!(
            agent_mode_id(&kebab, None, &AgentMode::parse("auto_edit")),
            Some("auto-edit")
        );
        assert_eq!(agent_mode_id(&camel, None, &AgentMode::Plan), Some("plan"));
        assert_eq!(
            agent_mode_id(&camel, Some("plan"), &AgentMode::Default),
            Some("default")
        );
        assert_eq!(
            agent_mode_id(&camel, None, &AgentMode::parse("build")),
            None
        );
        // An agent without a `default` mode (build, plan): the mode it opened in.
        let no_default: Vec<String> = ["build", "plan"].map(String::from).to_vec();
        assert_eq!(
            agent_mode_id(&no_default, Some("build"), &AgentMode::Default),
            Some("build")
        );
        assert_eq!(
            agent_mode_id(&no_default, Some("build"), &AgentMode::parse("yolo")),
            None
        );
    }

    #[test]
    fn modes_advertised_as_a_config_option_are_its_values_and_switch_through_it() {
        let option = |category: &str| -> SessionConfigOption {
            serde_json::from_value(serde_json::json!({
                "id": "mode", "name": "Mode", "category": category, "type": "select", "currentValue": "build",
                "options": [{"value": "build", "name": "Build"}, {"value": "plan", "name": "Plan"}]
            }))
            .unwrap()
        };
        let advertised = Advertised::of(None, Some(vec![option("model"), option("mode")]));
        assert_eq!(
            (advertised.current.as_deref(), advertised.ids.as_slice()),
            (
                Some("build"),
                ["build", "plan"].map(String::from).as_slice()
            )
        );
        assert_eq!(advertised.config.as_deref(), Some("mode"));
        // No option of category `mode`: no modes.
        assert!(Advertised::of(None, Some(vec![option("thought_level")]))
            .ids
            .is_empty());
        // `modes` first, when the agent gives both.
        let modes: SessionModeState = serde_json::from_value(serde_json::json!({
            "currentModeId": "default", "availableModes": [{"id": "default", "name": "Default"}]
        }))
        .unwrap();
        let advertised = Advertised::of(Some(modes), Some(vec![option("mode")]));
        assert_eq!(
            (advertised.ids.as_slice(), advertised.config),
            (["default".to_string()].as_slice(), None)
        );
    }
}
