//! [`AmpOptions`]: the backend's own options (`backend.amp.*`), each a flag or setting of
//! `amp --execute`.

use serde::{Deserialize, Serialize};

/// How the run talks to `amp` (`backend.amp.interface`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Interface {
    /// `amp --execute --stream-json --stream-json-input`: user turns as JSON lines on stdin
    /// (several turns on one live process in a session).
    #[default]
    TwoWay,
    /// `amp --execute PROMPT --stream-json`: the prompt on the command line, nothing on stdin.
    OneWay,
}

/// Amp's agent mode (`--mode`): it picks the model, system prompt and tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentMode {
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
    /// `ultra`.
    Ultra,
}

impl AgentMode {
    /// The CLI's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Ultra => "ultra",
        }
    }
}

/// Who can see the thread (`--visibility`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Visibility {
    /// `private`.
    Private,
    /// `unlisted`.
    Unlisted,
    /// `workspace`.
    Workspace,
    /// `group`.
    Group,
}

impl Visibility {
    /// The CLI's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Private => "private",
            Self::Unlisted => "unlisted",
            Self::Workspace => "workspace",
            Self::Group => "group",
        }
    }
}

/// The backend's own options (`backend.amp.*`), attached with
/// [`agent_api::RunRequest::with_options`]; each field is the extension key of the same name.
///
/// ```
/// use agent_api::RunRequest;
/// use agent_api_amp::{AgentMode, AmpOptions, Interface};
/// let options = AmpOptions::default().mode(AgentMode::High).interface(Interface::OneWay);
/// let request = RunRequest::new("hi").with_options(&options);
/// assert_eq!(request.extensions["backend.amp.mode"], "high");
/// assert_eq!(request.extensions["backend.amp.interface"], "one_way");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct AmpOptions {
    /// One-way or two-way ([`Interface::TwoWay`] when absent).
    pub interface: Option<Interface>,
    /// The agent mode (`--mode`).
    pub mode: Option<AgentMode>,
    /// A settings file of the caller's (JSON). The run passes its own settings file to amp: this
    /// one's settings are copied into it, and its `amp.permissions` rules come before the rule
    /// that delegates every other tool call to the caller.
    pub settings_file: Option<String>,
    /// MCP servers to merge with the settings (`--mcp-config`: JSON or a file path).
    pub mcp_config: Option<String>,
    /// Labels for the thread (`--label` each).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Who can see the thread (`--visibility`).
    pub visibility: Option<Visibility>,
    /// Leave the thread unarchived after the run (`--no-archive-after-execute`).
    pub no_archive: Option<bool>,
    /// Where amp writes its log (`--log-file`).
    pub log_file: Option<String>,
    /// Thinking blocks as reasoning items (`--stream-json-thinking`; default true).
    pub thinking: Option<bool>,
    /// Amp asks nothing and runs every tool (`amp.dangerouslyAllowAll` in the run's settings):
    /// no permission request reaches the caller. The explicit don't-ask option; the run's
    /// permission policy never means this.
    pub dangerously_allow_all: Option<bool>,
}

impl AmpOptions {
    /// Sets the interface.
    pub fn interface(mut self, interface: Interface) -> Self {
        self.interface = Some(interface);
        self
    }

    /// Sets the agent mode.
    pub fn mode(mut self, mode: AgentMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Sets the caller's settings file.
    pub fn settings_file(mut self, path: impl Into<String>) -> Self {
        self.settings_file = Some(path.into());
        self
    }

    /// Sets the MCP configuration (JSON or a file path).
    pub fn mcp_config(mut self, config: impl Into<String>) -> Self {
        self.mcp_config = Some(config.into());
        self
    }

    /// Adds a thread label.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.labels.push(label.into());
        self
    }

    /// Sets the thread's visibility.
    pub fn visibility(mut self, visibility: Visibility) -> Self {
        self.visibility = Some(visibility);
        self
    }

    /// Leaves the thread unarchived after the run.
    pub fn no_archive(mut self, yes: bool) -> Self {
        self.no_archive = Some(yes);
        self
    }

    /// Sets amp's log file.
    pub fn log_file(mut self, path: impl Into<String>) -> Self {
        self.log_file = Some(path.into());
        self
    }

    /// Turns thinking blocks on or off.
    pub fn thinking(mut self, yes: bool) -> Self {
        self.thinking = Some(yes);
        self
    }

    /// Lets amp run every tool without asking anyone.
    pub fn dangerously_allow_all(mut self, yes: bool) -> Self {
        self.dangerously_allow_all = Some(yes);
        self
    }
}

impl agent_api::request::BackendOptions for AmpOptions {
    const KIND: &'static str = "amp";
}
