//! `agent_api_opencode`: the OpenCode backend of `agent_api`.
//!
//! It drives the OpenCode CLI (`opencode`, tested with 1.18.33) through one of three interfaces,
//! chosen per run with [`OpenCodeOptions::interface`] (`backend.opencode.interface`):
//!
//! - **serve** (default): `opencode serve` on a free loopback port with a random
//!   `OPENCODE_SERVER_PASSWORD`, driven over HTTP with its global server-sent event stream. The
//!   run creates a session in its working directory (or continues or forks one), subscribes
//!   before it prompts, maps the events of its own session only, and ends at `session.idle`.
//!   Text and reasoning stream as deltas; tools carry the tools facet; permissions go through
//!   `agent_api::kit::hitl` and are answered `once`, `always` or `reject`; cancel aborts the
//!   session first. Runs of one backend value (and its clones) with the same environment share
//!   one server, kept warm between runs; it stops when the backend is dropped (or
//!   [`OpenCodeBackend::shut_down_servers`]) and its last run has ended. See [`serve`].
//!   [`AgentBackend::open_session`] keeps one OpenCode session on that server for many turns
//!   (`agent_api.session.warm`): a prompt per turn, cancel aborts the turn and keeps the session.
//! - **run**: `opencode run --format json`, one way, whole parts only. OpenCode rejects every
//!   permission set to "ask" by itself here, so this interface has no permission requests; a
//!   rejected tool shows as a failed tool result. See [`run`].
//! - **acp**: `opencode acp`, the Agent Client Protocol over stdio, on the ACP client of
//!   `agent_api_acp` (permissions, the file system served confined to the working directory,
//!   `session/cancel`). OpenCode's ACP errors carry no HTTP status, so a model failure there is
//!   `AgentError::AgentFailed`. See [`acp`].
//!
//! `RunRequest::skip_permission_prompts` (`agent_api.permissions.skip_prompts`) tells OpenCode not
//! to ask at all: `serve` creates the session with a rule allowing every permission, `run` passes
//! `--auto`, `acp` sets `OPENCODE_PERMISSION` to allow everything.
//!
//! A session moves to another home or machine as a snapshot (`agent_api.session.snapshot`):
//! OpenCode's own `opencode export`, restored there with `opencode import`, after which `serve`
//! and `run` resume it natively. See [`snapshot`].
//!
//! All three kinds of recording replay through [`Replay::replay_protocol`](agent_api::kit::replay::Replay::replay_protocol) (`serve` and
//! `acp` session logs are told apart by their first message). A `serve` log of several turns replays
//! them all: a prompt recorded while a turn runs steers it when an answer of that turn names it as
//! its parent, and otherwise opens the next turn once that turn is over (its client sent it before
//! the turn's `session.idle` reached the recording, as one prompting with `/message` does).

pub mod acp;
mod cli;
pub mod config;
pub mod errors;
pub mod history;
pub mod parts;
pub mod portable;
mod replay;
pub mod run;
pub mod serve;
pub mod snapshot;
pub mod tools;

use agent_api::capabilities as caps;
use agent_api::kit::replay::RecordingFormat;
use agent_api::kit::{start_run, CommandSpec, Protocol, RunSettings, Transport};
use agent_api::{
    AgentBackend, AgentError, AgentKind, BackendInfo, CapabilitySet, RunHandle, RunRequest, Session,
};
use async_trait::async_trait;
use std::sync::LazyLock;

pub use config::{Interface, OpenCodeConfig, OpenCodeOptions};

/// The backend's agent kind.
pub const KIND: AgentKind = AgentKind::from_static("opencode");

/// OpenCode versions whose protocol the backend was written from and tested against.
pub const SUPPORTED_VERSIONS: &[&str] = &["1.18.33"];

/// Capability id: the run can use `opencode serve` (the default interface).
pub const CAP_SERVE: &str = "backend.opencode.serve";
/// Capability id: the run can use `opencode run --format json` (one way, no permission requests).
pub const CAP_RUN: &str = "backend.opencode.run";
/// Capability id: the run can use `opencode acp` (the Agent Client Protocol over stdio).
pub const CAP_ACP: &str = "backend.opencode.acp";

/// What discovery needs to find the `opencode` CLI and build a backend for it.
pub fn probe() -> agent_api::kit::detect::BackendProbe {
    agent_api::kit::detect::BackendProbe::new(KIND, "opencode", SUPPORTED_VERSIONS, |binary| {
        std::sync::Arc::new(OpenCodeBackend::new(OpenCodeConfig::with_binary(binary)))
    })
}

/// The installed `opencode`: `$AGENT_API_OPENCODE_BIN`, else `opencode` on `PATH`, with its version.
pub async fn detect() -> Option<agent_api::kit::detect::Installed> {
    probe().detect().await
}

/// The OpenCode backend. Clones share one server pool.
///
/// Servers: see [`serve::server`].
#[derive(Debug, Clone, Default)]
pub struct OpenCodeBackend {
    config: OpenCodeConfig,
    servers: serve::ServerPool,
}

impl OpenCodeBackend {
    /// A backend that runs OpenCode as `config` says.
    pub fn new(config: OpenCodeConfig) -> Self {
        Self {
            config,
            servers: serve::ServerPool::default(),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &OpenCodeConfig {
        &self.config
    }

    /// The `opencode serve` processes the backend keeps now.
    pub fn running_servers(&self) -> Vec<serve::server::ServerInfo> {
        self.servers.running()
    }

    /// Lets go of the backend's servers: each stops once the runs on it end. Dropping the
    /// backend (and its clones) does the same.
    pub async fn shut_down_servers(&self) {
        self.servers.shut_down().await;
    }
}

/// What the backend is: the capabilities its tests prove (fixture replays and end-to-end runs on the bench).
/// Permissions, questions and deltas are the `serve` interface's; `run` has none of them.
static INFO: LazyLock<BackendInfo> = LazyLock::new(|| {
    let own = CapabilitySet::from_ids([
        caps::RUN,
        caps::EVENTS,
        caps::EVENTS_LIVE,
        caps::CONTROL_CANCEL,
        caps::CONTROL_STEER,
        caps::SESSION_RESUME,
        caps::SESSION_FORK,
        caps::TOOLS_STRUCTURED_V1,
        caps::TEXT_MESSAGES,
        caps::TOOL_CALLS,
        caps::TOOL_RESULTS,
        caps::PERMISSIONS,
        caps::QUESTIONS,
        caps::SESSION_MODE_SWITCH,
        caps::STREAMING_DELTAS,
        caps::REASONING,
        caps::COMMAND_EXECUTION,
        caps::FILE_CHANGES,
        caps::SESSION_LIFECYCLE,
        caps::USAGE,
        caps::MODEL_SELECTION,
        caps::SKIP_PERMISSION_PROMPTS,
        caps::SESSION_WARM,
        caps::SESSION_SNAPSHOT,
        caps::HISTORY_LIST,
        caps::HISTORY_READ,
        CAP_SERVE,
        CAP_RUN,
        CAP_ACP,
        caps::CALLER_TOOLS,
        agent_api_acp::CAP_FS_CONFINED,
        caps::HOME_ISOLATED,
        caps::HOME_HERMETIC,
    ]);
    // The run and acp interfaces build their argv through `CommandSpec::for_request` (serve refuses a launcher).
    BackendInfo::new(KIND, agent_api::kit::launch::with_launchers(own))
        .with_options::<OpenCodeOptions>()
        .with_option_mappings(portable::MAPPINGS)
        .with_modes(portable::MODES)
        .with_variants(portable::VARIANTS)
});

/// Where OpenCode keeps its config and global memory (`$XDG_CONFIG_HOME/opencode`), its sessions
/// and logins (`$XDG_DATA_HOME/opencode`, `auth.json`), and its state and caches: the XDG
/// directories. An isolated home gets a read-only copy of `auth.json`; an Anthropic OAuth login
/// there holds a single-use refresh token.
pub const HOME_LAYOUT: agent_api::kit::home::HomeLayout = agent_api::kit::home::HomeLayout {
    vars: &agent_api::kit::home::XDG_BASE_DIRS,
    credentials: &[("XDG_DATA_HOME", "opencode/auth.json")],
    // An Anthropic OAuth login in `auth.json` rotates its refresh token on each refresh.
    single_use_login: true,
};

/// The command every interface starts from: the binary, the config's and the request's
/// environment, the working directory (OpenCode reads its project from `$PWD`, so that is set
/// too), in the home the request asks for.
pub(crate) fn base_spec(
    config: &OpenCodeConfig,
    request: &RunRequest,
) -> Result<CommandSpec, AgentError> {
    let mut spec = CommandSpec::new(&config.binary);
    for (k, v) in &config.env {
        spec = spec.env(k.clone(), v.clone());
    }
    // The request's environment and launcher; the directory is set below (the config's is the fallback).
    // Its XDG folders, where `XDG_*` do not move them.
    spec = spec.for_request(request).reads_env(READS_ENV).home_state([
        ".local/share/opencode",
        ".local/state/opencode",
        ".config/opencode",
        ".cache/opencode",
    ]);
    if let Some(dir) = working_dir(config, request) {
        spec = spec.env("PWD", dir.display().to_string()).cwd(dir);
    }
    HOME_LAYOUT.apply(portable::apply(spec, request)?, &request.home)
}

/// What OpenCode reads from its environment (config, switches, the providers' keys and endpoints,
/// proxies): all a launcher other than Local passes on from the caller's environment
/// (`spec/launchers.md`). Its state lives in the XDG directories under `HOME` ([`HOME_LAYOUT`]).
const READS_ENV: &[&str] = &[
    "OPENCODE_CONFIG",
    "OPENCODE_CONFIG_CONTENT",
    "OPENCODE_CONFIG_DIR",
    "OPENCODE_PERMISSION",
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "XAI_API_KEY",
    "DEEPSEEK_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_PROFILE",
    "npm_config_registry",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS",
];

/// The serve interface shares one `opencode serve` among runs and talks to it over a loopback
/// port, so it takes no launcher (the run and acp interfaces do).
fn check_launcher(interface: Interface, request: &RunRequest) -> Result<(), AgentError> {
    match (&request.launcher, interface) {
        (Some(launcher), Interface::Serve) if !matches!(launcher, agent_api::request::Launcher::Local) => Err(AgentError::InvalidRequest {
            reason: format!(
                "OpenCode's serve interface runs one shared server on this machine and takes no launcher ({launcher}); \
                     use the run or acp interface"
            ),
        }),
        _ => Ok(()),
    }
}

/// The run's working directory: the request's, else the config's, else this process's.
pub(crate) fn working_dir(
    config: &OpenCodeConfig,
    request: &RunRequest,
) -> Option<std::path::PathBuf> {
    request
        .working_dir
        .clone()
        .or_else(|| config.working_dir.clone())
        .or_else(|| std::env::current_dir().ok())
}

#[async_trait]
impl AgentBackend for OpenCodeBackend {
    fn info(&self) -> &BackendInfo {
        &INFO
    }

    async fn run(&self, request: RunRequest) -> Result<RunHandle, AgentError> {
        self.validate(&request)?;
        let mut request = request.in_session_dir(self.config.working_dir.as_deref());
        let options: OpenCodeOptions = request.options()?;
        let interface = options.interface.unwrap_or(self.config.default_interface);
        check_launcher(interface, &request)?;
        // The caller tools' server joins the MCP servers, which reach OpenCode through its config.
        let tools = agent_api::kit::caller_tools::attach(&mut request).await?;
        let request = agent_api::kit::structured::ask_in_prompt(request);
        let mut settings = RunSettings::for_request(KIND, &request, &self.info().capabilities);
        settings.hold(tools);
        match interface {
            Interface::Run => {
                let spec =
                    run::command_spec(&self.config, &request, options.thinking.unwrap_or(true))?;
                let transport = Transport::spawn(&spec, settings.line_cap)?;
                let protocol = run::RunProtocol::live(request.prompt.text.clone());
                Ok(start_run(settings, transport, Box::new(protocol)))
            }
            Interface::Serve => serve::start(&self.config, &self.servers, request, settings).await,
            Interface::Acp => {
                portable::check_acp_choices(&request)?;
                let cwd = agent_api_acp::absolute(
                    &working_dir(&self.config, &request).unwrap_or_default(),
                );
                let spec = acp::command_spec(&self.config, &request, &cwd)?;
                let protocol = acp::live(&request, &cwd, options.fs.unwrap_or(true))?;
                let transport = Transport::spawn(&spec, settings.line_cap)?;
                Ok(start_run(settings, transport, Box::new(protocol)))
            }
        }
    }

    /// A warm session on `opencode serve` (the only interface that keeps OpenCode alive between
    /// turns): one OpenCode session on the backend's server, one prompt per turn.
    async fn open_session(&self, request: RunRequest) -> Result<Session, AgentError> {
        self.validate_session_template(&request)?;
        let request = request.in_session_dir(self.config.working_dir.as_deref());
        let options: OpenCodeOptions = request.options()?;
        if options.interface.unwrap_or(self.config.default_interface) != Interface::Serve {
            return Err(AgentError::InvalidExtension {
                key: "backend.opencode.interface".into(),
                reason: "a warm session needs the serve interface".into(),
            });
        }
        check_launcher(Interface::Serve, &request)?;
        let mut request = request;
        let tools = agent_api::kit::caller_tools::attach(&mut request).await?;
        let mut settings = RunSettings::for_request(KIND, &request, &self.info().capabilities);
        settings.hold(tools);
        serve::session::open(&self.config, &self.servers, request, settings).await
    }

    async fn export_snapshot(
        &self,
        request: &RunRequest,
        session: &agent_api::request::SessionRef,
    ) -> Result<agent_api::SessionSnapshot, AgentError> {
        snapshot::export(&self.config, request, session).await
    }

    async fn import_snapshot(
        &self,
        request: &RunRequest,
        snapshot: &agent_api::SessionSnapshot,
    ) -> Result<agent_api::snapshot::SnapshotImport, AgentError> {
        snapshot::import(&self.config, request, snapshot).await
    }

    fn session_store(&self) -> Option<std::sync::Arc<dyn agent_api::history::SessionStore>> {
        Some(std::sync::Arc::new(history::OpenCodeSessionStore::new(
            self.config.clone(),
        )))
    }
}

impl agent_api::kit::replay::Replay for OpenCodeBackend {
    fn replay_protocol(&self, format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        match format {
            RecordingFormat::NativeStdout => Ok(Box::new(run::RunProtocol::default())),
            RecordingFormat::Session => Ok(Box::new(replay::SessionReplay::default())),
            other => Err(other.not_replayable_by("opencode")),
        }
    }
}
