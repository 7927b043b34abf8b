//! The Amp backend of `agent_api` (kind `amp`): runs `amp --execute --stream-json` and turns its
//! stream-json (the family's protocol, `agent_api_stream_json`) into the universal transcript and
//! bounded wrapper events.
//!
//! - [`Interface::TwoWay`] (default): `amp --execute --stream-json --stream-json-input`, the
//!   prompt as a JSON user message on stdin; a session ([`agent_api::AgentBackend::open_session`]) sends each
//!   turn to the same live process. [`Interface::OneWay`]: `amp --execute PROMPT --stream-json`.
//! - The messages go through the stream-json family's converter
//!   ([`agent_api_stream_json::StreamJson`], shared, not copied, its mapping table in that crate's
//!   doc) reading Amp's [`DIALECT`] (its tools and quirks, in `dialect.rs`); thinking blocks
//!   (`--stream-json-thinking`) become reasoning items.
//! - Permissions: the run writes a settings file whose last rule delegates every tool call to the
//!   `amp-permission-delegate` helper, which asks this run over a private channel ([`delegate`],
//!   `spec/amp-delegate.md`). Each call then shows as `permission.requested` and
//!   `permission.resolved`, decided by the run's policy or the caller, in both interfaces.
//!   [`AmpOptions::dangerously_allow_all`] is the separate option that makes amp ask nothing.
//! - Launchers: all of them. Through a prefix, container or ssh the helper is first started on
//!   the far side as the run's relay ([`AmpConfig::far_delegate_helper`]), which keeps the run's
//!   directory there and passes the requests back over its stdio ([`delegate::relay`]).
//! - Without `AMP_API_KEY` (or [`AmpConfig::credentials_configured`]) a run fails with a typed
//!   [`AgentError::Auth`] before anything is spawned; an unreachable Amp server is one
//!   [`AgentError::ServiceUnreachable`].
//! - Resume: `amp threads continue THREAD_ID --execute …`; the thread id is the session id.
//! - MCP servers and caller-defined tools: the run's servers (the caller-tools server among them,
//!   with its per-run secret) go into the run's settings file as `amp.mcpServers`, beside the
//!   caller's own; the file is in a directory only its owner reads. Proven on the stand-in, which
//!   calls an HTTP server's tool for real (no Amp service is reachable here).
//!
//! Where amp's lines become events:
//!
//! | native line | universal events |
//! |---|---|
//! | stream-json `system`, `assistant`, `user`, `result` | as in the stream-json family's table (`agent_api_stream_json`), with Amp's [`TOOLS`] for the facet's kinds and the permission categories |
//! | `thinking` blocks (`--stream-json-thinking`) | reasoning items |
//! | a delegate request on the side channel ([`delegate`]) | `permission.requested`, then `permission.resolved`; the decision goes back as the helper's exit status |
//! | a delegate request that was not the channel's own | a `delegate_request_unknown` status, nothing asked |
//! | stderr of a run that never started | one typed error (`Auth`, `ServiceUnreachable`) |
//!
//! Modules: [`options`] (the typed options), [`args`] (the command line and credentials check),
//! [`delegate`] (the permission channel), [`protocol`] (the converter) and `errors` (stderr).

pub mod args;
pub mod delegate;
mod dialect;
mod errors;
pub mod options;
pub mod protocol;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agent_api::capabilities as caps;
use agent_api::kit::async_trait;
use agent_api::kit::cli::{CliAgent, CliBackend, CliSettings, Launch, Turn};
use agent_api::kit::replay::RecordingFormat;
use agent_api::kit::Protocol;
use agent_api::{AgentError, AgentKind, BackendInfo, CapabilitySet, RunRequest};
use agent_api_stream_json::StreamJson;

pub use dialect::{DIALECT, TOOLS};
pub use options::{AgentMode, AmpOptions, Interface, Visibility};
pub use protocol::AmpProtocol;

/// The backend's agent kind.
pub const KIND: AgentKind = AgentKind::from_static("amp");

/// Amp versions this backend was checked against (the offline cases and the permission round
/// trip on the real binary; everything that needs the model only on hand-written transcripts).
pub const SUPPORTED_VERSIONS: &[&str] = &["0.0.1790142911-g7618fb"];

/// The helper's executable name.
pub const DELEGATE_HELPER: &str = "amp-permission-delegate";
/// The environment variable naming the helper's path (else it is looked for beside this
/// program, then on `PATH`).
pub const DELEGATE_HELPER_VAR: &str = "AGENT_API_AMP_DELEGATE_BIN";

/// The environment variable naming the helper's path on the far side of a container, ssh or
/// prefix launcher (else `amp-permission-delegate` on the far side's `PATH`).
pub const FAR_DELEGATE_HELPER_VAR: &str = "AGENT_API_AMP_FAR_DELEGATE_BIN";

/// How amp takes the portable options: denied tools in the run's settings file; structured output
/// from the SDK.
const OPTION_MAPPINGS: &[agent_api::kit::options::OptionMapping] = &[
    agent_api::kit::options::OptionMapping::new(
        caps::DENIED_TOOLS,
        "settings amp.tools.disable (the run's settings file)",
    ),
    agent_api::kit::options::OptionMapping::new(
        caps::MCP_SERVERS,
        "settings amp.mcpServers (the run's settings file)",
    ),
    agent_api::kit::options::OptionMapping::new(
        caps::OUTPUT_SCHEMA,
        agent_api::kit::options::SDK_SCHEMA,
    ),
    agent_api::kit::options::OptionMapping::new(caps::MODES, "--mode low|medium|high|ultra"),
];

/// Amp's agent modes (`--mode`, 0.0.1790142911): each picks the model, system prompt and tools.
/// Amp has no plan mode, and no variants: its reasoning levels are these modes, and its
/// `--features` (fast, plaid, pro) choose serving and billing (`spec/options.md`).
const MODES: &[agent_api::request::ModeInfo] = &[
    agent_api::request::ModeInfo::new(
        "low",
        "--mode low",
        "Amp's low mode: a faster model, less reasoning.",
    ),
    agent_api::request::ModeInfo::new("medium", "--mode medium", "Amp's medium mode."),
    agent_api::request::ModeInfo::new("high", "--mode high", "Amp's high mode: more reasoning."),
    agent_api::request::ModeInfo::new(
        "ultra",
        "--mode ultra",
        "Amp's ultra mode: the most reasoning.",
    ),
];

/// Capability: the `backend.amp.*` options ([`AmpOptions`]).
pub const CAP_CLI_OPTIONS: &str = "backend.amp.cli_options";
/// Capability: [`AmpOptions::dangerously_allow_all`], amp asks nothing.
pub const CAP_DANGEROUSLY_ALLOW_ALL: &str = "backend.amp.dangerously_allow_all";
/// Capability marker: what needs the model is proven only on hand-written transcripts.
pub const CAP_TRANSCRIPT_ONLY: &str = "backend.amp.model_paths_transcript_only";

/// Where and how to run `amp`. Its `Debug` shows the names of `env`, never the values.
#[derive(Clone)]
#[non_exhaustive]
pub struct AmpConfig {
    /// The executable (default `amp` on `PATH`).
    pub binary: PathBuf,
    /// Variables added to amp's environment (a request's `env` is added after these).
    pub env: BTreeMap<String, String>,
    /// Whether amp inherits this process's environment (default true).
    pub inherit_env: bool,
    /// Working directory when the request names none.
    pub working_dir: Option<PathBuf>,
    /// Arguments before the backend's own.
    pub extra_args: Vec<String>,
    /// The `amp-permission-delegate` helper; see [`DELEGATE_HELPER_VAR`] when `None`.
    pub delegate_helper: Option<PathBuf>,
    /// amp has credentials of its own (`amp login`), so a run without `AMP_API_KEY` may start.
    pub credentials_configured: bool,
    /// The helper's path on the far side of a container, ssh or prefix launcher, where it runs as
    /// the run's relay (`None`: see [`AmpConfig::far_delegate_helper`]).
    pub far_delegate_helper: Option<PathBuf>,
}

impl Default for AmpConfig {
    fn default() -> Self {
        Self {
            binary: PathBuf::from("amp"),
            env: BTreeMap::new(),
            inherit_env: true,
            working_dir: None,
            extra_args: Vec::new(),
            delegate_helper: None,
            credentials_configured: false,
            far_delegate_helper: None,
        }
    }
}

impl std::fmt::Debug for AmpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmpConfig")
            .field("binary", &self.binary)
            .field("env", &agent_api::kit::secrets::EnvNames(&self.env))
            .field("inherit_env", &self.inherit_env)
            .field("working_dir", &self.working_dir)
            .field(
                "extra_args",
                &agent_api::kit::secrets::ArgsShown(&self.extra_args),
            )
            .field("delegate_helper", &self.delegate_helper)
            .field("credentials_configured", &self.credentials_configured)
            .field("far_delegate_helper", &self.far_delegate_helper)
            .finish()
    }
}

impl AmpConfig {
    /// The default config with another executable.
    pub fn with_binary(mut self, binary: impl Into<PathBuf>) -> Self {
        self.binary = binary.into();
        self
    }

    /// Adds an environment variable.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets whether amp inherits this process's environment.
    pub fn with_inherit_env(mut self, inherit: bool) -> Self {
        self.inherit_env = inherit;
        self
    }

    /// Sets the default working directory.
    pub fn with_working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }

    /// Sets the delegate helper's path.
    pub fn with_delegate_helper(mut self, helper: impl Into<PathBuf>) -> Self {
        self.delegate_helper = Some(helper.into());
        self
    }

    /// Sets the helper's path on the far side of a container, ssh or prefix launcher.
    pub fn with_far_delegate_helper(mut self, helper: impl Into<PathBuf>) -> Self {
        self.far_delegate_helper = Some(helper.into());
        self
    }

    /// The helper on the far side of a container, ssh or prefix launcher: the configured one,
    /// `$AGENT_API_AMP_FAR_DELEGATE_BIN`, else [`DELEGATE_HELPER`], found on the far side's `PATH`.
    pub fn far_delegate_helper(&self) -> PathBuf {
        let configured = self
            .far_delegate_helper
            .clone()
            .or_else(|| std::env::var_os(FAR_DELEGATE_HELPER_VAR).map(PathBuf::from));
        configured.unwrap_or_else(|| PathBuf::from(DELEGATE_HELPER))
    }

    /// Declares that amp has credentials of its own.
    pub fn with_credentials_configured(mut self, yes: bool) -> Self {
        self.credentials_configured = yes;
        self
    }

    /// The helper to delegate to: the configured one, `$AGENT_API_AMP_DELEGATE_BIN`, the one
    /// beside this program (or its parent folder, as for test binaries), else on `PATH`.
    pub fn delegate_helper(&self) -> Result<PathBuf, AgentError> {
        let configured = self
            .delegate_helper
            .clone()
            .or_else(|| std::env::var_os(DELEGATE_HELPER_VAR).map(PathBuf::from));
        let beside = || {
            let exe = std::env::current_exe().ok()?;
            let dir = exe.parent()?;
            [
                dir.join(DELEGATE_HELPER),
                dir.parent()?.join(DELEGATE_HELPER),
            ]
            .into_iter()
            .find(|p| p.is_file())
        };
        let found = match configured {
            Some(path) => agent_api::kit::files::resolve_program(&path),
            None => beside()
                .or_else(|| agent_api::kit::files::resolve_program(Path::new(DELEGATE_HELPER))),
        };
        found.ok_or_else(|| AgentError::BinaryNotFound {
            program: DELEGATE_HELPER.into(),
        })
    }
}

/// The Amp backend: the kit's shared backend over [`Amp`].
pub type AmpBackend = CliBackend<Amp>;

/// What Amp tells the shared backend ([`CliAgent`]): the capabilities its tests prove, its
/// options, how it takes the portable ones, its modes, its two interfaces (one-way and the
/// stream-json control channel, with the permission delegate's side channel) and its snapshots.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Amp;

#[async_trait]
impl CliAgent for Amp {
    type Config = AmpConfig;
    const PROGRAM: &'static str = "amp";
    const SUPPORTED_VERSIONS: &'static [&'static str] = SUPPORTED_VERSIONS;

    fn info() -> BackendInfo {
        let own = CapabilitySet::from_ids([
            caps::RUN,
            caps::EVENTS,
            caps::EVENTS_LIVE,
            caps::CONTROL_CANCEL,
            caps::SESSION_RESUME,
            caps::SESSION_SNAPSHOT,
            caps::SESSION_WARM,
            caps::TOOLS_STRUCTURED_V1,
            caps::CALLER_TOOLS,
            caps::TEXT_MESSAGES,
            caps::TOOL_CALLS,
            caps::TOOL_RESULTS,
            caps::PERMISSIONS,
            caps::ERROR_EVENTS,
            caps::REASONING,
            caps::COMMAND_EXECUTION,
            caps::FILE_CHANGES,
            caps::USAGE,
            // Here and in a sandbox the delegate reaches the run's socket; elsewhere the run's
            // relay passes its requests on (`delegate::relay`).
            caps::LAUNCHER_LOCAL,
            caps::LAUNCHER_BWRAP,
            caps::LAUNCHER_CONTAINER,
            caps::LAUNCHER_SSH,
            caps::LAUNCHER_PREFIX,
            CAP_CLI_OPTIONS,
            CAP_DANGEROUSLY_ALLOW_ALL,
            CAP_TRANSCRIPT_ONLY,
        ]);
        BackendInfo::new(KIND, own)
            .with_options::<AmpOptions>()
            .with_option_mappings(OPTION_MAPPINGS)
            .with_modes(MODES)
    }

    /// Amp takes no output schema: a run's answer is asked for in its prompt.
    fn prepare(
        _config: &AmpConfig,
        request: RunRequest,
        turn: Turn,
    ) -> Result<RunRequest, AgentError> {
        Ok(match turn {
            Turn::Run => agent_api::kit::structured::ask_in_prompt(request),
            _ => request,
        })
    }

    /// Starts amp with the converter of its interface, the delegate's side channel wired in.
    async fn launch(
        config: &AmpConfig,
        request: &RunRequest,
        turn: Turn,
    ) -> Result<Launch, AgentError> {
        let session = turn == Turn::Session;
        let mut invocation = args::invocation(config, request, session).await?;
        let inner = match (session, invocation.interface) {
            (true, _) => StreamJson::session(DIALECT, request.permissions.clone(), false),
            (false, Interface::OneWay) => {
                StreamJson::print(DIALECT, request.prompt.text.clone(), false)
            }
            (false, _) => StreamJson::control(
                DIALECT,
                request.prompt.text.clone(),
                request.permissions.clone(),
                false,
            ),
        };
        let channel = invocation.files.channel.as_mut();
        let (lines, replies) = match channel.map(|c| (c.side_lines(), c.replies())) {
            Some((lines, replies)) => (Some(lines), Some(replies)),
            None => (None, None),
        };
        let protocol = AmpProtocol::live(inner, request.permissions.clone(), replies)
            .keeping(invocation.files);
        let launch = Launch::command(invocation.spec, protocol);
        Ok(match lines {
            Some(lines) => launch.with_side_lines(lines),
            None => launch,
        })
    }

    fn replay_protocol(format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        match format {
            RecordingFormat::NativeStdout | RecordingFormat::Session => {
                Ok(Box::new(AmpProtocol::replaying()))
            }
            other => Err(other.not_replayable_by("amp")),
        }
    }

    /// Amp keeps its threads in its service, not in the home: a snapshot is the thread id alone
    /// ([`agent_api::snapshot::Continuity::Service`]), and any home signed in to the same account
    /// goes on with it.
    async fn export_snapshot(
        _config: &AmpConfig,
        _request: &RunRequest,
        session: &agent_api::request::SessionRef,
    ) -> Result<agent_api::SessionSnapshot, AgentError> {
        agent_api::snapshot::check_session_id(&session.id)?;
        Ok(agent_api::SessionSnapshot::new(KIND, session.id.clone())
            .in_working_dir(session.working_dir.clone())
            .with_continuity(agent_api::snapshot::Continuity::Service))
    }

    /// Nothing to write: the thread is in Amp's service.
    async fn import_snapshot(
        _config: &AmpConfig,
        _request: &RunRequest,
        snapshot: &agent_api::SessionSnapshot,
    ) -> Result<agent_api::snapshot::SnapshotImport, AgentError> {
        snapshot.check_agent(&KIND)?;
        Ok(agent_api::snapshot::SnapshotImport::default())
    }
}

impl CliSettings for AmpConfig {
    fn for_binary(binary: PathBuf) -> Self {
        Self::default().with_binary(binary)
    }

    fn default_working_dir(&self) -> Option<&Path> {
        self.working_dir.as_deref()
    }
}

/// What discovery needs to find `amp` and build a backend for it.
pub fn probe() -> agent_api::kit::detect::BackendProbe {
    AmpBackend::probe()
}

/// The installed `amp`: `$AGENT_API_AMP_BIN`, else `amp` on `PATH`, with its version.
pub async fn detect() -> Option<agent_api::kit::detect::Installed> {
    probe().detect().await
}
