//! `agent_api_codex`: the Codex backend of `agent_api`.
//!
//! It drives the OpenAI Codex CLI (`codex`, tested with codex-cli 0.169.0) in one of two modes:
//!
//! - **app-server** (default): `codex app-server`, JSON-RPC over stdio. Streaming deltas,
//!   approvals (`permission.requested`, answered with `RunControl::respond_permission`; MCP
//!   tool-call approvals too), `request_user_input` and other MCP elicitations as questions, soft
//!   interrupt (`turn/interrupt`),
//!   resume and fork of threads. See [`app_server`].
//! - **exec**: `codex exec --json`, one way (stdin is /dev/null), whole items only, resume and
//!   fork by id. Choose it per run with the extension `backend.codex.mode = "exec"`
//!   (`CodexOptions::default().mode(Mode::Exec)`). See [`exec`].
//!
//! The backend's own options are [`CodexOptions`] (the `backend.codex.*` extensions), attached
//! with `RunRequest::with_options`.
//!
//! Permissions: in app-server mode Codex runs approval policy `untrusted`, so it asks for every
//! approval and `agent_api::kit::hitl` applies the run's `PermissionPolicy` to each (approve-all
//! approves each request the agent makes; every request has its `permission.requested` and
//! `permission.resolved`). Exec mode has no request channel: Codex runs `never` and the policy
//! becomes its sandbox (`workspace-write` when everything is approved, else `read-only`); no
//! permission event appears, and a command the sandbox blocks fails as a tool result.
//! `RunRequest::skip_permission_prompts` (`agent_api.permissions.skip_prompts`) sets approval
//! policy `never` in either mode: Codex stops asking and runs what its sandbox allows. See
//! [`config::RunOptions::resolve`].
//!
//! Both kinds of recording replay through [`Replay::replay_protocol`](agent_api::kit::replay::Replay::replay_protocol), so
//! `agent_api::kit::replay::replay_file` and `agent-api replay --agent codex` work on the shared
//! fixtures. The message types come from the schema the CLI prints (`schema/`, [`schema`]).
//!
//! ```no_run
//! use agent_api::{AgentBackend, RunRequest};
//! use agent_api_codex::{CodexBackend, CodexConfig};
//! # async fn demo() -> Result<(), agent_api::AgentError> {
//! let backend = CodexBackend::new(CodexConfig::default().env("OPENAI_API_KEY", "sk-..."));
//! let done = backend.run(RunRequest::new("Say hello")).await?.collect_wrapper().await.1?;
//! println!("{:?}", done.final_text);
//! # Ok(()) }
//! ```

pub mod app_server;
pub mod argv;
pub mod config;
pub mod errors;
pub mod exec;
mod exec_item;
pub mod history;
pub mod portable;
pub mod schema;
mod snapshot;
pub mod tools;
pub mod version;

use agent_api::capabilities as caps;
use agent_api::kit::async_trait;
use agent_api::kit::cli::{CliAgent, CliBackend, CliSettings, Launch, Turn};
use agent_api::kit::replay::RecordingFormat;
use agent_api::kit::Protocol;
use agent_api::{AgentError, AgentKind, BackendInfo, CapabilitySet, RunRequest};

pub use config::{ApprovalPolicy, CodexConfig, CodexOptions, Mode, RunOptions, Sandbox};
pub use version::SUPPORTED_VERSIONS;

/// The backend's agent kind.
pub const KIND: AgentKind = AgentKind::from_static("codex");

/// What discovery needs to find the `codex` CLI and build a backend for it.
pub fn probe() -> agent_api::kit::detect::BackendProbe {
    CodexBackend::probe()
}

/// The installed `codex`: `$AGENT_API_CODEX_BIN`, else `codex` on `PATH`, with its version.
pub async fn detect() -> Option<agent_api::kit::detect::Installed> {
    probe().detect().await
}

/// Capability id: the run can use `codex exec --json` (`backend.codex.mode = "exec"`).
pub const CAP_EXEC_MODE: &str = "backend.codex.exec_mode";
/// Capability id: the run can use `codex app-server` (the default mode).
pub const CAP_APP_SERVER: &str = "backend.codex.app_server";

/// Where Codex keeps its config, sessions and login: `CODEX_HOME`, `~/.codex` by default. A
/// ChatGPT login's refresh token is single-use: an isolated home gets a read-only copy.
pub const HOME_LAYOUT: agent_api::kit::home::HomeLayout = agent_api::kit::home::HomeLayout {
    vars: &[agent_api::kit::home::HomeVar {
        name: "CODEX_HOME",
        default_under_home: ".codex",
    }],
    credentials: &[("CODEX_HOME", "auth.json")],
    // A ChatGPT login rotates its refresh token on each refresh.
    single_use_login: true,
};

/// The Codex backend: the kit's shared backend over [`Codex`].
pub type CodexBackend = CliBackend<Codex>;

/// What Codex tells the shared backend ([`CliAgent`]): the capabilities its tests prove (fixture
/// replays, fault tests and end-to-end runs on the bench), its options, its two interfaces
/// (`app-server`, `exec`), its store and its snapshots.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Codex;

#[async_trait]
impl CliAgent for Codex {
    type Config = CodexConfig;
    const PROGRAM: &'static str = "codex";
    const SUPPORTED_VERSIONS: &'static [&'static str] = SUPPORTED_VERSIONS;

    fn info() -> BackendInfo {
        let own = CapabilitySet::from_ids([
            caps::RUN,
            caps::EVENTS,
            caps::EVENTS_LIVE,
            caps::CONTROL_CANCEL,
            caps::CONTROL_STEER,
            caps::SESSION_RESUME,
            caps::SESSION_FORK,
            caps::SESSION_WARM,
            caps::SESSION_RESUME_PER_TURN,
            caps::SESSION_SNAPSHOT,
            caps::TOOLS_STRUCTURED_V1,
            caps::CALLER_TOOLS,
            caps::TEXT_MESSAGES,
            caps::TOOL_CALLS,
            caps::TOOL_RESULTS,
            caps::QUESTIONS,
            caps::PERMISSIONS,
            caps::STREAMING_DELTAS,
            caps::REASONING,
            caps::COMMAND_EXECUTION,
            caps::FILE_CHANGES,
            caps::MCP_TOOLS,
            caps::ERROR_EVENTS,
            caps::SESSION_LIFECYCLE,
            caps::USAGE,
            caps::MODEL_SELECTION,
            caps::HISTORY_LIST,
            caps::HISTORY_READ,
            caps::SKIP_PERMISSION_PROMPTS,
            caps::HOME_ISOLATED,
            caps::HOME_HERMETIC,
            caps::SESSION_MODE_SWITCH,
            CAP_APP_SERVER,
            CAP_EXEC_MODE,
        ]);
        BackendInfo::new(KIND, agent_api::kit::launch::with_launchers(own))
            .with_options::<CodexOptions>()
            .with_option_mappings(portable::OPTION_MAPPINGS)
            .with_modes(config::MODES)
            .with_variants(config::VARIANTS)
    }

    fn prepare(
        config: &CodexConfig,
        request: RunRequest,
        turn: Turn,
    ) -> Result<RunRequest, AgentError> {
        let options = RunOptions::resolve(&request, config)?;
        portable::check_denied_tools(&request.portable)?;
        match (turn, options.mode) {
            (Turn::Session, Mode::Exec) => Err(AgentError::InvalidExtension {
                key: config::EXT_MODE.into(),
                reason: "a session needs the app-server mode".into(),
            }),
            // `codex exec` replaces its instructions only from a file in its config; the
            // app-server takes them per thread.
            (_, Mode::Exec) if request.portable.system_prompt.is_some() => {
                Err(AgentError::InvalidRequest {
                    reason: "Codex takes a system prompt in the app-server mode only".into(),
                })
            }
            // `exec --output-schema` needs a file that outlives the spawn: the SDK asks in the
            // prompt instead.
            (_, Mode::Exec) => Ok(agent_api::kit::structured::ask_in_prompt(request)),
            (_, Mode::AppServer) => Ok(request),
        }
    }

    async fn launch(
        config: &CodexConfig,
        request: &RunRequest,
        turn: Turn,
    ) -> Result<Launch, AgentError> {
        let options = RunOptions::resolve(request, config)?;
        let spec =
            HOME_LAYOUT.apply(argv::command_spec(config, &options, request), &request.home)?;
        let plan = argv::StartPlan::new(config, &options, request);
        let protocol: Box<dyn Protocol> = match (turn, options.mode) {
            (Turn::Session, _) => {
                Box::new(app_server::AppServer::session(plan, options.policy.clone()))
            }
            (_, Mode::AppServer) => {
                Box::new(app_server::AppServer::live(plan, options.policy.clone()))
            }
            (_, Mode::Exec) => Box::new(exec::Exec::live(request.prompt.text.clone())),
        };
        Ok(Launch::boxed(spec, protocol))
    }

    fn session_store(
        config: &CodexConfig,
    ) -> Option<std::sync::Arc<dyn agent_api::history::SessionStore>> {
        Some(std::sync::Arc::new(history::CodexSessionStore::for_config(
            config,
        )?))
    }

    fn replay_protocol(format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        match format {
            RecordingFormat::NativeStdout => Ok(Box::new(exec::Exec::default())),
            RecordingFormat::Session => Ok(Box::new(app_server::AppServer::replay())),
            other => Err(other.not_replayable_by("codex")),
        }
    }

    fn store_shape(first_line: &[u8]) -> Option<agent_api::history::StoreShape> {
        history::store_shape(first_line)
    }

    async fn export_snapshot(
        config: &CodexConfig,
        request: &RunRequest,
        session: &agent_api::request::SessionRef,
    ) -> Result<agent_api::SessionSnapshot, AgentError> {
        snapshot::export(config, request, session).await
    }

    async fn import_snapshot(
        config: &CodexConfig,
        request: &RunRequest,
        snapshot: &agent_api::SessionSnapshot,
    ) -> Result<agent_api::snapshot::SnapshotImport, AgentError> {
        snapshot::import(config, request, snapshot).await
    }
}

impl CliSettings for CodexConfig {
    fn for_binary(binary: std::path::PathBuf) -> Self {
        Self::with_binary(binary)
    }

    fn default_working_dir(&self) -> Option<&std::path::Path> {
        self.working_dir.as_deref()
    }
}
