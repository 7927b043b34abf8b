//! The backend of an agent with a CLI of its own on this client (Gemini CLI, Qwen Code): one
//! [`AgentBackend`] ([`CliBackend`]) over what the agent's crate describes ([`CliAgent`]). The
//! plumbing of a run and of a session (validation, the caller's tools, the run's files, spawn,
//! the per-turn sessions of a one-way interface) is the same for every such agent, so it lives
//! here once; the agent's crate keeps its flags, its other interfaces, its store and its tools.

use std::marker::PhantomData;
use std::sync::Arc;

use agent_api::history::SessionStore;
use agent_api::kit::detect::BackendProbe;
use agent_api::kit::options::OptionMapping;
use agent_api::kit::replay::{RecordingFormat, Replay};
use agent_api::kit::{start_run, start_session, CommandSpec, Protocol, RunSettings, Transport};
use agent_api::request::{BackendOptions, ModeInfo, SessionRef, VariantSet};
use agent_api::snapshot::SnapshotImport;
use agent_api::{
    AgentBackend, AgentError, AgentKind, CapabilitySet, RunHandle, RunRequest, Session,
    SessionSnapshot,
};
use async_trait::async_trait;

use crate::chat_snapshot::SnapshotFuture;
use crate::{AcpConfig, AgentCli, RunFiles};

/// What a run starts: its command line, its converter, and the files it needs (held until it ends).
#[non_exhaustive]
pub struct Launch {
    /// The command line, before the files' arguments and variables are applied.
    pub spec: CommandSpec,
    /// The converter of its lines.
    pub protocol: Box<dyn Protocol>,
    /// The run's private files and the flags naming them.
    pub files: RunFiles,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("spec", &self.spec)
            .field("protocol", &self.protocol.name())
            .field("files", &self.files)
            .finish()
    }
}

impl Launch {
    /// A run of `spec` read by `protocol`, with `files`.
    pub fn new(spec: CommandSpec, protocol: Box<dyn Protocol>, files: RunFiles) -> Self {
        Self {
            spec,
            protocol,
            files,
        }
    }
}

/// An agent with a CLI of its own, as its crate describes it to [`CliBackend`]. Every item is
/// the agent's own; the backend does the rest.
pub trait CliAgent: Send + Sync + 'static {
    /// Its CLI as the ACP client runs it (kind, program, flags, home, variables).
    const CLI: AgentCli;
    /// The CLI versions the kind is tested against.
    const SUPPORTED_VERSIONS: &'static [&'static str];
    /// How each portable option reaches it (`spec/options.md`).
    const OPTION_MAPPINGS: &'static [OptionMapping];
    /// Its modes but the default (none unless it says).
    const MODES: &'static [ModeInfo] = &[];
    /// Its variants (none unless it says).
    const VARIANTS: &'static [VariantSet] = &[];
    /// Its typed extension options (`backend.<kind>.*`).
    type Options: BackendOptions;

    /// Its capabilities, as its tests prove them.
    fn capabilities() -> CapabilitySet;

    /// The request picks a one-way interface, which takes its prompt per process: its sessions
    /// run a process per turn, resuming the previous turn's session.
    fn resumes_per_turn(request: &RunRequest) -> Result<bool, AgentError>;

    /// The request's interface takes an output schema of its own (else the SDK asks for the
    /// structured answer in the prompt).
    fn native_schema(_request: &RunRequest) -> Result<bool, AgentError> {
        Ok(false)
    }

    /// What a run of `request` starts (its prompt queued), or a warm session (`warm`: no prompt
    /// until the first turn).
    fn launch(config: &AcpConfig, request: &RunRequest, warm: bool) -> Result<Launch, AgentError>;

    /// The option `request` still needs before [`CliAgent::launch`] can build a command line
    /// ([`AgentBackend::missing_option`]). The default: none (the agent's CLI is its program).
    fn missing_option(_config: &AcpConfig, _request: &RunRequest) -> Option<&'static str> {
        None
    }

    /// Its chat store under `config`'s home.
    fn session_store(config: &AcpConfig) -> Option<Arc<dyn SessionStore>>;

    /// The converter of a recording in `format`.
    fn replay_protocol(format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError>;

    /// Exports the agent's own files for `session` from the home of a run of `request`
    /// (`agent_api.session.snapshot`; [`crate::chat_snapshot`] for a chat store). The default
    /// refuses: where an agent keeps its sessions is its own.
    fn export_snapshot<'a>(
        config: &'a AcpConfig,
        request: &'a RunRequest,
        session: &'a SessionRef,
    ) -> SnapshotFuture<'a, SessionSnapshot> {
        let _ = (config, request, session);
        Box::pin(async { Err(no_snapshots(Self::CLI.kind)) })
    }

    /// Imports `snapshot` into the home of a run of `request`, re-keyed to its working directory
    /// (`agent_api.session.snapshot`). The default refuses.
    fn import_snapshot<'a>(
        config: &'a AcpConfig,
        request: &'a RunRequest,
        snapshot: &'a SessionSnapshot,
    ) -> SnapshotFuture<'a, SnapshotImport> {
        let _ = (config, request, snapshot);
        Box::pin(async { Err(no_snapshots(Self::CLI.kind)) })
    }
}

fn no_snapshots(kind: AgentKind) -> AgentError {
    AgentError::UnsupportedCapability {
        kind: kind.to_string(),
        capability: agent_api::capabilities::SESSION_SNAPSHOT.into(),
    }
}

/// The backend of agent `A` (its kind is `A::CLI.kind`).
pub struct CliBackend<A> {
    config: AcpConfig,
    agent: PhantomData<fn() -> A>,
}

impl<A> std::fmt::Debug for CliBackend<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CliBackend")
            .field("config", &self.config)
            .finish()
    }
}

impl<A> Clone for CliBackend<A> {
    fn clone(&self) -> Self {
        Self::new(self.config.clone())
    }
}

impl<A> Default for CliBackend<A> {
    fn default() -> Self {
        Self::new(AcpConfig::default())
    }
}

impl<A> CliBackend<A> {
    /// A backend starting the agent as `config` says.
    pub fn new(config: AcpConfig) -> Self {
        Self {
            config,
            agent: PhantomData,
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &AcpConfig {
        &self.config
    }
}

impl<A: CliAgent> CliBackend<A> {
    /// What discovery needs to find the agent's CLI and build a backend for it.
    pub fn probe() -> BackendProbe {
        BackendProbe::new(
            A::CLI.kind,
            A::CLI.program,
            A::SUPPORTED_VERSIONS,
            |binary| Arc::new(Self::new(AcpConfig::with_binary(binary))),
        )
    }

    /// Spawns `launch` with its files, which `settings` then holds until the run ends.
    fn spawn(
        mut settings: RunSettings,
        launch: Launch,
    ) -> Result<(RunSettings, Transport, Box<dyn Protocol>), AgentError> {
        let transport = Transport::spawn(&launch.files.apply(launch.spec), settings.line_cap)?;
        settings.hold(Some(launch.files));
        Ok((settings, transport, launch.protocol))
    }
}

#[async_trait]
impl<A: CliAgent> AgentBackend for CliBackend<A> {
    fn kind(&self) -> AgentKind {
        A::CLI.kind
    }

    fn capabilities(&self) -> CapabilitySet {
        A::capabilities()
    }

    fn extension_keys(&self) -> &'static [&'static str] {
        agent_api::kit::options::extension_keys::<A::Options>()
    }

    fn option_value(&self, key: &str, text: &str) -> Result<serde_json::Value, AgentError> {
        agent_api::kit::options::value_from_text::<A::Options>(key, text)
    }

    fn option_mappings(&self) -> &'static [OptionMapping] {
        A::OPTION_MAPPINGS
    }

    fn modes(&self) -> &'static [ModeInfo] {
        A::MODES
    }

    fn variants(&self) -> &'static [VariantSet] {
        A::VARIANTS
    }

    fn missing_option(&self, request: &RunRequest) -> Option<&'static str> {
        A::missing_option(&self.config, request)
    }

    async fn run(&self, request: RunRequest) -> Result<RunHandle, AgentError> {
        self.validate(&request)?;
        let mut request = request.in_session_dir(self.config.working_dir.as_deref());
        let tools = agent_api::kit::caller_tools::attach(&mut request).await?;
        let mut settings = RunSettings::for_request(self.kind(), &request, &self.capabilities());
        settings.hold(tools);
        let native_schema = A::native_schema(&request)?;
        let request = crate::prepare(request, native_schema);
        let (settings, transport, protocol) =
            Self::spawn(settings, A::launch(&self.config, &request, false)?)?;
        Ok(start_run(settings, transport, protocol))
    }

    fn session_store(&self) -> Option<Arc<dyn SessionStore>> {
        A::session_store(&self.config)
    }

    async fn export_snapshot(
        &self,
        request: &RunRequest,
        session: &SessionRef,
    ) -> Result<SessionSnapshot, AgentError> {
        A::export_snapshot(&self.config, request, session).await
    }

    async fn import_snapshot(
        &self,
        request: &RunRequest,
        snapshot: &SessionSnapshot,
    ) -> Result<SnapshotImport, AgentError> {
        A::import_snapshot(&self.config, request, snapshot).await
    }

    /// A two-way interface keeps one live agent for every turn; a one-way one takes its prompt
    /// per process, so its sessions run a process per turn ([`CliAgent::resumes_per_turn`]).
    async fn open_session(&self, request: RunRequest) -> Result<Session, AgentError> {
        self.validate_session_template(&request)?;
        let mut request = request.in_session_dir(self.config.working_dir.as_deref());
        if A::resumes_per_turn(&request)? {
            // Each turn starts with `run`, which serves the caller's tools then.
            return Ok(Session::resuming(Arc::new(self.clone()), request));
        }
        let tools = agent_api::kit::caller_tools::attach(&mut request).await?;
        let mut settings = RunSettings::for_request(self.kind(), &request, &self.capabilities());
        settings.hold(tools);
        let (settings, transport, protocol) =
            Self::spawn(settings, A::launch(&self.config, &request, true)?)?;
        Ok(start_session(settings, transport, protocol))
    }
}

impl<A: CliAgent> Replay for CliBackend<A> {
    fn replay_protocol(&self, format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        A::replay_protocol(format)
    }
}
