//! Agent modes and model variants: what a backend offers ([`BackendInfo::modes`],
//! [`BackendInfo::variants`]), what a request picks ([`RunRequest::mode`],
//! [`RunRequest::variant`]), and the check that refuses an unknown value before anything is spawned
//! ([`check_choices`]).
//!
//! A mode is how the agent works: [`AgentMode::Plan`] plans and changes nothing,
//! [`AgentMode::Default`] is the agent's own default, and [`AgentMode::Named`] passes one of the
//! agent's own modes through (a permission mode such as `acceptEdits`, a custom agent, …). A
//! variant is how hard the model thinks: a reasoning effort or thinking budget, as the agent
//! names it.
//!
//! ```
//! use agent_api::kit::check_choices;
//! use agent_api::request::{AgentMode, ModeInfo, VariantSet};
//! use agent_api::{AgentError, AgentKind, RunRequest};
//! const MODES: &[ModeInfo] = &[ModeInfo::new("plan", "--permission-mode plan", "Plans; changes nothing.")];
//! const VARIANTS: &[VariantSet] = &[VariantSet::all_models(&["low", "high"], "--effort")];
//! let kind = AgentKind::new("demo").unwrap();
//! let ok = RunRequest::new("hi").with_mode(AgentMode::Plan).with_variant("high");
//! assert!(check_choices(&kind, MODES, VARIANTS, &ok).is_ok());
//! let err = check_choices(&kind, MODES, VARIANTS, &RunRequest::new("hi").with_variant("max")).unwrap_err();
//! assert!(matches!(&err, AgentError::UnknownVariant { valid, .. } if valid == &["low", "high"]));
//! ```
//!
//! [`BackendInfo::modes`]: crate::BackendInfo::modes
//! [`BackendInfo::variants`]: crate::BackendInfo::variants
//! [`RunRequest::mode`]: crate::RunRequest::mode
//! [`RunRequest::variant`]: crate::RunRequest::variant
//! [`check_choices`]: crate::kit::check_choices

use crate::vocabulary::error::AgentError;

/// How the agent works during a run or a session's turn (`RunRequest::with_mode`).
///
/// Its text form is `default`, `plan`, or the agent's own name ([`AgentMode::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum AgentMode {
    /// The agent's own default mode: the same as choosing none. Every backend takes it in a
    /// request, and `Session::set_mode(AgentMode::Default)` succeeds on a session already in its
    /// default mode whether or not the agent can switch modes; switching a session *back* to it
    /// from another mode needs `agent_api.session.mode_switch` (or a session resuming per turn).
    Default,
    /// Read-only planning: the agent may read and think, and changes nothing (no file writes,
    /// no commands that change anything); where the agent asks to leave plan mode, that comes as
    /// a question the caller answers.
    Plan,
    /// One of the agent's own modes, by the name the backend lists ([`ModeInfo::id`]).
    Named(String),
}

impl AgentMode {
    /// `default` and `plan` are the portable modes; any other text names one of the agent's own.
    pub fn parse(text: &str) -> Self {
        match text {
            "default" => Self::Default,
            "plan" => Self::Plan,
            other => Self::Named(other.to_string()),
        }
    }

    /// The text form (`default`, `plan`, or the agent's own name).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Default => "default",
            Self::Plan => "plan",
            Self::Named(name) => name,
        }
    }
}

/// The text form, as [`AgentMode::as_str`] gives it.
impl std::fmt::Display for AgentMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for AgentMode {
    fn from(text: &str) -> Self {
        Self::parse(text)
    }
}

/// One mode a backend offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeInfo {
    /// The mode's text form ([`AgentMode::as_str`]): `plan`, or the agent's own name.
    pub id: &'static str,
    /// The native flag, config key or protocol field it becomes.
    pub native: &'static str,
    /// What the agent does in it, in one line.
    pub description: &'static str,
}

impl ModeInfo {
    /// Mode `id` becomes `native`.
    pub const fn new(id: &'static str, native: &'static str, description: &'static str) -> Self {
        Self {
            id,
            native,
            description,
        }
    }

    /// The mode as a request names it.
    pub fn mode(&self) -> AgentMode {
        AgentMode::parse(self.id)
    }
}

/// The variants a backend offers for some models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VariantSet {
    /// The models this set is for; empty: every model no other set names (and no model chosen).
    pub models: &'static [&'static str],
    /// The variants, as the request names them (the agent's own spelling).
    pub values: &'static [&'static str],
    /// The native flag, config key or protocol field a variant becomes.
    pub native: &'static str,
}

impl VariantSet {
    /// `values` for every model, each becoming `native`.
    pub const fn all_models(values: &'static [&'static str], native: &'static str) -> Self {
        Self {
            models: &[],
            values,
            native,
        }
    }

    /// `values` for the models named, each becoming `native`.
    pub const fn for_models(
        models: &'static [&'static str],
        values: &'static [&'static str],
        native: &'static str,
    ) -> Self {
        Self {
            models,
            values,
            native,
        }
    }
}

/// The variants `sets` give `model`: those of the set naming it, else those of the set for every model.
pub fn variants_for<'s>(sets: &'s [VariantSet], model: Option<&str>) -> &'s [&'static str] {
    let named = model.and_then(|m| sets.iter().find(|s| s.models.contains(&m)));
    named
        .or_else(|| sets.iter().find(|s| s.models.is_empty()))
        .map(|s| s.values)
        .unwrap_or(&[])
}

/// Refuses a mode the backend does not list ([`AgentError::UnknownMode`], with the valid ones);
/// [`AgentMode::Default`] always passes. For a session's mode switch as well as a request's mode.
pub fn check_mode(kind: &str, modes: &[ModeInfo], mode: &AgentMode) -> Result<(), AgentError> {
    if *mode == AgentMode::Default || modes.iter().any(|m| m.id == mode.as_str()) {
        return Ok(());
    }
    Err(AgentError::UnknownMode {
        kind: kind.to_string(),
        mode: crate::guards::bounds::utf8_prefix(mode.as_str(), 64).to_string(),
        valid: std::iter::once("default")
            .chain(modes.iter().map(|m| m.id))
            .map(str::to_string)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::backend::check_choices;
    use crate::vocabulary::kind::AgentKind;
    use crate::vocabulary::request::RunRequest;

    const MODES: &[ModeInfo] = &[
        ModeInfo::new("plan", "p", "plans"),
        ModeInfo::new("acceptEdits", "a", "edits"),
    ];
    const VARIANTS: &[VariantSet] = &[
        VariantSet::for_models(&["small"], &["low"], "effort"),
        VariantSet::all_models(&["low", "medium", "high"], "effort"),
    ];

    fn kind() -> AgentKind {
        AgentKind::new("demo").unwrap()
    }

    #[test]
    fn text_forms_round_trip() {
        for text in ["default", "plan", "acceptEdits"] {
            assert_eq!(AgentMode::parse(text).as_str(), text);
        }
        assert_eq!(AgentMode::parse("plan"), AgentMode::Plan);
        assert_eq!(AgentMode::parse("build"), AgentMode::Named("build".into()));
    }

    #[test]
    fn variants_follow_the_model() {
        assert_eq!(variants_for(VARIANTS, Some("small")), ["low"]);
        assert_eq!(
            variants_for(VARIANTS, Some("big")),
            ["low", "medium", "high"]
        );
        assert_eq!(variants_for(VARIANTS, None), ["low", "medium", "high"]);
        let request = RunRequest::new("x")
            .with_model("small")
            .with_variant("high");
        let err = check_choices(&kind(), MODES, VARIANTS, &request).unwrap_err();
        assert!(
            matches!(&err, AgentError::UnknownVariant { valid, model: Some(m), .. } if valid == &["low"] && m == "small"),
            "{err}"
        );
        assert!(err.to_string().contains("low"), "{err}");
    }

    #[test]
    fn unknown_modes_are_refused_with_the_valid_ones() {
        let request = RunRequest::new("x").with_mode(AgentMode::parse("yolo"));
        let err = check_choices(&kind(), MODES, VARIANTS, &request).unwrap_err();
        assert!(
            matches!(&err, AgentError::UnknownMode { valid, .. } if valid == &["default", "plan", "acceptEdits"]),
            "{err}"
        );
        assert!(
            err.to_string().contains("default, plan, acceptEdits"),
            "{err}"
        );
        for ok in [
            AgentMode::Default,
            AgentMode::Plan,
            AgentMode::parse("acceptEdits"),
        ] {
            check_choices(
                &kind(),
                MODES,
                VARIANTS,
                &RunRequest::new("x").with_mode(ok),
            )
            .unwrap();
        }
        // An agent with no modes takes only its default.
        assert!(check_choices(
            &kind(),
            &[],
            &[],
            &RunRequest::new("x").with_mode(AgentMode::Plan)
        )
        .is_err());
        check_choices(
            &kind(),
            &[],
            &[],
            &RunRequest::new("x").with_mode(AgentMode::Default),
        )
        .unwrap();
    }
}
