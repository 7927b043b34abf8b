//! [`BackendInfo`]: what a backend is, as one value (its kind, capabilities, options, modes and
//! variants), so that the gateway, the server and the CLI read one thing instead of asking the
//! backend six questions.

use serde_json::Value;

use crate::vocabulary::capability::CapabilitySet;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::kind::AgentKind;
use crate::vocabulary::modes::{ModeInfo, VariantSet};
use crate::vocabulary::options::{extension_keys, unknown_key, value_from_text, BackendOptions};
use crate::vocabulary::portable::OptionMapping;

/// Types an extension option's text (`--option KEY=VALUE`, a form field) into its JSON value.
type OptionValueFn = fn(&str, &str) -> Result<Value, AgentError>;

/// What a backend is: its agent kind, the capabilities it advertises (and its tests prove), its
/// typed options (`backend.<kind>.*`), how it honours each portable option, its modes and its
/// variants. [`AgentBackend::info`](crate::AgentBackend::info) gives it; a backend builds it
/// once.
///
/// The capabilities are those this build can serve ([`CapabilitySet::in_this_build`]), with the
/// capability of every option mapping added: a mapping is the proof that the option is honoured.
///
/// ```
/// use agent_api::request::ModeInfo;
/// use agent_api::{AgentKind, BackendInfo, CapabilitySet};
/// use agent_api_capabilities as caps;
///
/// const MODES: &[ModeInfo] = &[ModeInfo::new("plan", "--plan", "Plans only.")];
/// let info = BackendInfo::new(
///     AgentKind::from_static("echo"),
///     CapabilitySet::from_ids([caps::RUN, caps::EVENTS]),
/// )
/// .with_modes(MODES);
/// assert_eq!(info.kind.as_str(), "echo");
/// assert!(info.capabilities.contains(caps::RUN));
/// assert_eq!(info.modes[0].id, "plan");
/// // No options type: every extension key is unknown.
/// assert!(info.option_value("backend.echo.loud", "true").is_err());
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct BackendInfo {
    /// The agent kind the backend runs.
    pub kind: AgentKind,
    /// Every capability id the backend advertises (and its tests prove).
    pub capabilities: CapabilitySet,
    /// The extension option keys the backend understands; any other key fails closed.
    pub extension_keys: &'static [&'static str],
    /// The extension keys a remote client may set with no word from its operator (`agent-api
    /// serve` refuses the others unless its operator lists them): those that name no program,
    /// binary path, environment variable, file, or policy looser than the operator's. None
    /// unless the backend lists keys it has checked.
    pub client_keys: &'static [&'static str],
    /// How the backend honours each portable option it advertises (`agent_api.options.*`): the
    /// native flag, config key or protocol field, for `spec/options.md`.
    pub option_mappings: &'static [OptionMapping],
    /// The modes the agent offers besides its default (`agent_api.request.modes`), each with its
    /// native form; a request naming another is refused before spawn.
    pub modes: &'static [ModeInfo],
    /// The model variants the agent offers, per model where they differ
    /// (`agent_api.request.variants`); [`crate::request::variants_for`] picks a model's.
    pub variants: &'static [VariantSet],
    /// `None`: the backend has no options type.
    option_value: Option<OptionValueFn>,
}

impl BackendInfo {
    /// A backend of `kind` advertising `capabilities` (less what this build cannot serve), with
    /// no options, mappings, modes or variants.
    pub fn new(kind: AgentKind, capabilities: CapabilitySet) -> Self {
        Self {
            kind,
            capabilities: capabilities.in_this_build(),
            extension_keys: &[],
            client_keys: &[],
            option_mappings: &[],
            modes: &[],
            variants: &[],
            option_value: None,
        }
    }

    /// The backend's options are `O` (`backend.<kind>.*`): its keys are the extension keys, and
    /// [`BackendInfo::option_value`] types a value through it.
    pub fn with_options<O: BackendOptions>(mut self) -> Self {
        self.extension_keys = extension_keys::<O>();
        self.option_value = Some(value_from_text::<O>);
        self
    }

    /// The extension keys a remote client may set on its own ([`BackendInfo::client_keys`]).
    pub fn with_client_keys(mut self, keys: &'static [&'static str]) -> Self {
        self.client_keys = keys;
        self
    }

    /// How the backend honours the portable options; each mapping's capability is advertised.
    pub fn with_option_mappings(mut self, mappings: &'static [OptionMapping]) -> Self {
        self.option_mappings = mappings;
        self.capabilities = crate::vocabulary::portable::with_mappings(
            std::mem::take(&mut self.capabilities),
            mappings,
        );
        self
    }

    /// The agent's modes besides its default.
    pub fn with_modes(mut self, modes: &'static [ModeInfo]) -> Self {
        self.modes = modes;
        self
    }

    /// The agent's model variants.
    pub fn with_variants(mut self, variants: &'static [VariantSet]) -> Self {
        self.variants = variants;
        self
    }

    /// The extension value `text` gives the option `key` (`--option KEY=VALUE` on the command
    /// line, a form field in a page), typed through the backend's options
    /// ([`crate::kit::options::value_from_text`]); a key the backend does not know is
    /// [`AgentError::InvalidExtension`].
    pub fn option_value(&self, key: &str, text: &str) -> Result<Value, AgentError> {
        match self.option_value {
            Some(typed) => typed(key, text),
            None => Err(unknown_key(self.kind.as_str(), key, self.extension_keys)),
        }
    }
}

impl std::fmt::Debug for BackendInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendInfo")
            .field("kind", &self.kind)
            .field("capabilities", &self.capabilities)
            .field("extension_keys", &self.extension_keys)
            .field("client_keys", &self.client_keys)
            .field("option_mappings", &self.option_mappings.len())
            .field("modes", &self.modes.len())
            .field("variants", &self.variants.len())
            .finish()
    }
}
