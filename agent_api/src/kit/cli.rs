//! Backends as data: an agent with a CLI of its own is its description ([`CliAgent`]: what it
//! is, how a run of it starts, where it keeps its sessions) and its protocol (a [`Protocol`]
//! that turns its lines into events); one [`CliBackend`] does the rest, the same for every
//! agent: validation, the session's working directory, the caller's tools, the run's settings,
//! spawn, warm sessions or sessions resuming per turn, history, snapshots, discovery.
//!
//! The short path, for an imaginary CLI `greeter` that prints one JSON line per event (the
//! protocol is elided here: `examples/custom_backend.rs` has a whole one):
//!
//! ```
//! use agent_api::capabilities as caps;
//! use agent_api::kit::cli::{CliAgent, CliBackend, CliConfig, Launch, Turn};
//! use agent_api::kit::replay::RecordingFormat;
//! use agent_api::kit::{async_trait, Protocol};
//! use agent_api::{AgentError, AgentKind, BackendInfo, CapabilitySet, RunRequest};
//! # struct GreeterProtocol;
//! # impl Protocol for GreeterProtocol {
//! #     fn name(&self) -> &'static str { "greeter" }
//! #     fn on_message(&mut self, _: serde_json::Value, _: &mut agent_api::kit::Ctx<'_>) -> Result<(), agent_api::kit::Unparsed> { Ok(()) }
//! #     fn finish(&mut self, _: &agent_api::kit::ExitInfo, _: &mut agent_api::kit::Ctx<'_>) -> Result<agent_api::RunCompletion, AgentError> { Ok(agent_api::RunCompletion::new()) }
//! # }
//!
//! struct Greeter;
//!
//! #[async_trait]
//! impl CliAgent for Greeter {
//!     type Config = CliConfig;
//!     const PROGRAM: &'static str = "greeter";
//!
//!     fn info() -> BackendInfo {
//!         let caps = CapabilitySet::from_ids([caps::RUN, caps::EVENTS, caps::TEXT_MESSAGES]);
//!         BackendInfo::new(AgentKind::from_static("greeter"), caps)
//!     }
//!
//!     async fn launch(config: &CliConfig, request: &RunRequest, _turn: Turn) -> Result<Launch, AgentError> {
//!         let spec = config.command(Self::PROGRAM, request).arg("--json").arg(&request.prompt.text);
//!         Ok(Launch::command(spec, GreeterProtocol))
//!     }
//!
//!     fn replay_protocol(_format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
//!         Ok(Box::new(GreeterProtocol))
//!     }
//! }
//!
//! let backend = CliBackend::<Greeter>::new(CliConfig::default());
//! # use agent_api::AgentBackend;
//! assert_eq!(backend.info().kind.as_str(), "greeter");
//! ```

mod config;

use std::any::Any;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use crate::contract::backend::AgentBackend;
use crate::contract::handle::RunHandle;
use crate::contract::session::Session;
use crate::contract::store::{SessionStore, StoreShape};
use crate::kit::command::CommandSpec;
use crate::kit::detect::BackendProbe;
use crate::kit::driver::{start_run, start_session, RunSettings};
use crate::kit::protocol::Protocol;
use crate::kit::replay::{RecordingFormat, Replay};
use crate::kit::transport::{LineSource, Transport};
use crate::vocabulary::backend_info::BackendInfo;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::request::RunRequest;
use crate::vocabulary::session_ref::SessionRef;
use crate::vocabulary::snapshot::{SessionSnapshot, SnapshotImport};

pub use config::{CliConfig, CliSettings};

/// What a launch is for: one run with its prompt, or a warm session whose turns bring theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Turn {
    /// One run: the prompt goes with the launch.
    Run,
    /// A warm session (`agent_api.session.warm`): no prompt until the first turn.
    Session,
}

/// How the agent's lines come: a process the kit spawns, or an agent in this process.
enum Start {
    Spawn(Box<CommandSpec>),
    InProcess(Box<dyn FnOnce(usize) -> Transport + Send>),
}

/// What a run or a warm session starts: its command line (or an agent in this process), the
/// converter of its lines, and what must live as long as it does (its private files, a helper's
/// socket).
pub struct Launch {
    start: Start,
    side_lines: Option<LineSource>,
    protocol: Box<dyn Protocol>,
    held: Vec<Box<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let start = match &self.start {
            Start::Spawn(spec) => format!("{spec:?}"),
            Start::InProcess(_) => "in process".to_string(),
        };
        f.debug_struct("Launch")
            .field("start", &start)
            .field("protocol", &self.protocol.name())
            .field("held", &self.held.len())
            .finish()
    }
}

impl Launch {
    /// A process started from `spec`, its lines read by `protocol`.
    pub fn command(spec: CommandSpec, protocol: impl Protocol + 'static) -> Self {
        Self::boxed(spec, Box::new(protocol))
    }

    /// [`Launch::command`] with a converter chosen at run time.
    pub fn boxed(spec: CommandSpec, protocol: Box<dyn Protocol>) -> Self {
        Self {
            start: Start::Spawn(Box::new(spec)),
            side_lines: None,
            protocol,
            held: Vec::new(),
        }
    }

    /// An agent in this process: `transport` builds its pipes, given the run's line cap
    /// ([`Transport::in_process`]).
    pub fn in_process(
        transport: impl FnOnce(usize) -> Transport + Send + 'static,
        protocol: impl Protocol + 'static,
    ) -> Self {
        Self {
            start: Start::InProcess(Box::new(transport)),
            side_lines: None,
            protocol: Box::new(protocol),
            held: Vec::new(),
        }
    }

    /// Keeps `thing` (the run's private files, a listening socket) alive until the run ends.
    pub fn holding<T: Any + Send + Sync>(mut self, thing: T) -> Self {
        self.held.push(Box::new(thing));
        self
    }

    /// Merges `lines` (a helper's channel) into the agent's stdout
    /// ([`Transport::with_side_lines`]).
    pub fn with_side_lines(mut self, lines: LineSource) -> Self {
        self.side_lines = Some(lines);
        self
    }

    /// Starts it: the settings take what it holds.
    fn start(
        self,
        mut settings: RunSettings,
    ) -> Result<(RunSettings, Transport, Box<dyn Protocol>), AgentError> {
        let mut transport = match self.start {
            Start::Spawn(spec) => Transport::spawn(&spec, settings.line_cap)?,
            Start::InProcess(build) => build(settings.line_cap),
        };
        if let Some(lines) = self.side_lines {
            transport = transport.with_side_lines(lines);
        }
        for thing in self.held {
            settings.hold(Some(thing));
        }
        Ok((settings, transport, self.protocol))
    }
}

/// An agent with a CLI of its own, as its crate describes it to [`CliBackend`]: what it is
/// ([`CliAgent::info`]), how a run of it starts ([`CliAgent::launch`]) and, where it has them,
/// its store, its snapshots and its quirks. Every item is the agent's own; the backend does the
/// rest. Only `Config`, `PROGRAM`, `info`, `launch` and `replay_protocol` have no default.
#[async_trait]
pub trait CliAgent: Send + Sync + 'static {
    /// Its configuration: [`CliConfig`] unless it has settings of its own.
    type Config: CliSettings;
    /// Its executable's name, looked up on `PATH` unless configured.
    const PROGRAM: &'static str;
    /// The CLI versions the backend is tested against (discovery says whether one is).
    const SUPPORTED_VERSIONS: &'static [&'static str] = &[];

    /// What it is: kind, capabilities (as its tests prove them), options, modes, variants.
    fn info() -> BackendInfo;

    /// The request as the agent gets it, after the backend's checks and once the caller's tools
    /// are served: where the agent takes no output schema, the SDK asks in the prompt
    /// ([`crate::kit::structured::ask_in_prompt`]); an agent refuses here what its interface
    /// cannot do. The default gives it unchanged.
    fn prepare(
        config: &Self::Config,
        request: RunRequest,
        turn: Turn,
    ) -> Result<RunRequest, AgentError> {
        let _ = (config, turn);
        Ok(request)
    }

    /// What a run of `request` (or a warm session of it) starts.
    async fn launch(
        config: &Self::Config,
        request: &RunRequest,
        turn: Turn,
    ) -> Result<Launch, AgentError>;

    /// The request picks an interface that takes its prompt per process: its sessions run a
    /// process per turn, resuming the previous turn's session. The default: never.
    fn resumes_per_turn(config: &Self::Config, request: &RunRequest) -> Result<bool, AgentError> {
        let _ = (config, request);
        Ok(false)
    }

    /// The option `request` still needs before a launch can build a command line
    /// ([`AgentBackend::missing_option`]). The default: none.
    fn missing_option(config: &Self::Config, request: &RunRequest) -> Option<&'static str> {
        let _ = (config, request);
        None
    }

    /// Its own checks of the session a request resumes ([`AgentBackend::check_session`]).
    fn check_session(config: &Self::Config, request: &RunRequest) -> Result<(), AgentError> {
        let _ = (config, request);
        Ok(())
    }

    /// Where it keeps its sessions, when a piece shared with other agents knows them whole
    /// ([`SessionFiles`]: the store, and the files a snapshot moves): the store and snapshot hooks
    /// default to it. The default: none.
    fn session_files() -> Option<&'static dyn SessionFiles<Self::Config>> {
        None
    }

    /// Its own session store under `config`'s home, where it can be read. The default: its
    /// [`CliAgent::session_files`]' store, else none.
    fn session_store(config: &Self::Config) -> Option<Arc<dyn SessionStore>> {
        Self::session_files()?.store(config)
    }

    /// The converter of a recording in `format`.
    fn replay_protocol(format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError>;

    /// What `first_line` shows a file to be when it is one of its own session store rather than a
    /// recording ([`Replay::store_shape`]). The default: no store of its own to tell apart.
    fn store_shape(first_line: &[u8]) -> Option<StoreShape> {
        let _ = first_line;
        None
    }

    /// Exports its own files for `session` ([`AgentBackend::export_snapshot`]). The default:
    /// its [`CliAgent::session_files`]' export, else a refusal (where an agent keeps its sessions
    /// is its own).
    async fn export_snapshot(
        config: &Self::Config,
        request: &RunRequest,
        session: &SessionRef,
    ) -> Result<SessionSnapshot, AgentError> {
        match Self::session_files() {
            Some(files) => files.export(config, request, session).await,
            None => Err(no_snapshots(&Self::info())),
        }
    }

    /// Imports `snapshot` ([`AgentBackend::import_snapshot`]). The default: its
    /// [`CliAgent::session_files`]' import, else a refusal.
    async fn import_snapshot(
        config: &Self::Config,
        request: &RunRequest,
        snapshot: &SessionSnapshot,
    ) -> Result<SnapshotImport, AgentError> {
        match Self::session_files() {
            Some(files) => files.import(config, request, snapshot).await,
            None => Err(no_snapshots(&Self::info())),
        }
    }
}

/// Where agents that keep their sessions alike keep them, as one piece over configuration `C`:
/// the store that lists and reads them, and the files a snapshot moves. A family of agents
/// implements it once over what each member declares of its files; each member names its own as
/// its [`CliAgent::session_files`], and its store and snapshot hooks follow.
#[async_trait]
pub trait SessionFiles<C: Sync>: Send + Sync {
    /// The store under `config`'s home, where it can be read.
    fn store(&self, config: &C) -> Option<Arc<dyn SessionStore>>;

    /// Exports the files of `session` ([`AgentBackend::export_snapshot`]).
    async fn export(
        &self,
        config: &C,
        request: &RunRequest,
        session: &SessionRef,
    ) -> Result<SessionSnapshot, AgentError>;

    /// Imports `snapshot` ([`AgentBackend::import_snapshot`]).
    async fn import(
        &self,
        config: &C,
        request: &RunRequest,
        snapshot: &SessionSnapshot,
    ) -> Result<SnapshotImport, AgentError>;
}

fn no_snapshots(info: &BackendInfo) -> AgentError {
    AgentError::UnsupportedCapability {
        kind: info.kind.to_string(),
        capability: agent_api_capabilities::SESSION_SNAPSHOT.into(),
    }
}

/// The backend of agent `A`: `A`'s description, run by the kit. Clones share the description.
pub struct CliBackend<A: CliAgent> {
    config: A::Config,
    info: Arc<BackendInfo>,
    agent: PhantomData<fn() -> A>,
}

impl<A: CliAgent> std::fmt::Debug for CliBackend<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CliBackend")
            .field("kind", &self.info.kind)
            .field("config", &self.config)
            .finish()
    }
}

impl<A: CliAgent> Clone for CliBackend<A> {
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
            info: self.info.clone(),
            agent: PhantomData,
        }
    }
}

impl<A: CliAgent> Default for CliBackend<A> {
    fn default() -> Self {
        Self::new(A::Config::default())
    }
}

impl<A: CliAgent> CliBackend<A> {
    /// A backend starting the agent as `config` says.
    pub fn new(config: A::Config) -> Self {
        Self {
            config,
            info: Arc::new(A::info()),
            agent: PhantomData,
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &A::Config {
        &self.config
    }

    /// What discovery needs to find the agent's CLI and build a backend for it.
    pub fn probe() -> BackendProbe {
        BackendProbe::new(
            A::info().kind,
            A::PROGRAM,
            A::SUPPORTED_VERSIONS,
            |binary: PathBuf| Arc::new(Self::new(A::Config::for_binary(binary))),
        )
    }

    /// The request in its session's directory, prepared, with the caller's tools served, and
    /// the settings of its run holding them.
    async fn settle(
        &self,
        request: RunRequest,
        turn: Turn,
    ) -> Result<(RunRequest, RunSettings), AgentError> {
        let mut request = request.in_session_dir(self.config.default_working_dir());
        let tools = crate::kit::caller_tools::attach(&mut request).await?;
        let request = A::prepare(&self.config, request, turn)?;
        let mut settings =
            RunSettings::for_request(self.info.kind.clone(), &request, &self.info.capabilities);
        settings.hold(tools);
        Ok((request, settings))
    }
}

#[async_trait]
impl<A: CliAgent> AgentBackend for CliBackend<A> {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn missing_option(&self, request: &RunRequest) -> Option<&'static str> {
        A::missing_option(&self.config, request)
    }

    fn check_session(&self, request: &RunRequest) -> Result<(), AgentError> {
        A::check_session(&self.config, request)
    }

    async fn run(&self, request: RunRequest) -> Result<RunHandle, AgentError> {
        self.validate(&request)?;
        let (request, settings) = self.settle(request, Turn::Run).await?;
        let launch = A::launch(&self.config, &request, Turn::Run).await?;
        let (settings, transport, protocol) = launch.start(settings)?;
        Ok(start_run(settings, transport, protocol))
    }

    /// A session running a process per turn where the request's interface takes its prompt per
    /// process ([`CliAgent::resumes_per_turn`]), else a warm session, where the agent advertises
    /// `agent_api.session.warm` (else `UnsupportedCapability`, as [`AgentBackend`]'s default).
    async fn open_session(&self, request: RunRequest) -> Result<Session, AgentError> {
        self.validate_session_template(&request)?;
        let resumed = request
            .clone()
            .in_session_dir(self.config.default_working_dir());
        if A::resumes_per_turn(&self.config, &resumed)? {
            // Each turn starts with `run`, which serves the caller's tools then.
            return Ok(Session::resuming(Arc::new(self.clone()), resumed));
        }
        if !self
            .info
            .capabilities
            .contains(agent_api_capabilities::SESSION_WARM)
        {
            return Err(AgentError::UnsupportedCapability {
                kind: self.info.kind.to_string(),
                capability: agent_api_capabilities::SESSION_WARM.into(),
            });
        }
        let (request, settings) = self.settle(request, Turn::Session).await?;
        let launch = A::launch(&self.config, &request, Turn::Session).await?;
        let (settings, transport, protocol) = launch.start(settings)?;
        Ok(start_session(settings, transport, protocol))
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
}

impl<A: CliAgent> Replay for CliBackend<A> {
    fn replay_protocol(&self, format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        A::replay_protocol(format)
    }

    fn store_shape(&self, first_line: &[u8]) -> Option<StoreShape> {
        A::store_shape(first_line)
    }
}
