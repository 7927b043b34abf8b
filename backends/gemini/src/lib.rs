//! `agent_api_gemini`: Gemini CLI (kind `gemini`, tested with 0.61.0) for `agent_api`, on the ACP
//! client of `agent_api_acp`.
//!
//! - ACP (the default): `gemini --acp --skip-trust`, two-way: permissions, the file system served
//!   confined to the working directory, cancel, warm sessions, `session/load` to resume. Its
//!   lines become events in the ACP client (`agent_api_acp`, its mapping table in that crate's
//!   doc) with Gemini's facts ([`CLI`]): it creates files by reading them first (a missing file
//!   reads as empty), and it answers `session/load` before it replays the history (the first
//!   prompt then waits for its `available_commands_update`). Its load often fails on its own ("No
//!   previous sessions found for this project": setting up the loaded session resets the
//!   session's file before the lookup reads it), which is `SessionNotFound`.
//! - [`GeminiOptions::interface`] selects the one-way headless interface (`gemini -p PROMPT
//!   --output-format stream-json`, the prompt on stdin): its converter is `headless.rs`.
//! - Its retries show only on stderr: each becomes an `api_retry` status (`agent_api_acp::Retry`).
//! - Its tools are one table ([`TOOLS`]), its chat store `history.rs` ([`history::GeminiSessionStore`]).
//!
//! Headless lines and their events:
//!
//! | native line | universal events |
//! |---|---|
//! | `init` | `session.started` (session id, model) |
//! | `message` (user) | nothing (the input is the caller's) |
//! | `message` (assistant, `delta: true`) | one streamed assistant message |
//! | `tool_use` | a tool call item and its open result (the facet's kind from [`TOOLS`]) |
//! | `tool_result` | the result item completed or failed |
//! | `result` | the outcome, usage from `stats`; a failed one a typed error by its HTTP status |
//! | `error` | an error event (bounded explanation) |
//! | stderr retry lines | `api_retry` status, `rate_limited` notice for a limit |

mod headless;
pub mod history;
mod options;
mod portable;

use agent_api::capabilities as caps;
use agent_api::kit::replay::RecordingFormat;
use agent_api::kit::{start_run, start_session, CommandSpec, Protocol, RunSettings, Transport};
use agent_api::{AgentBackend, AgentError, AgentKind, CapabilitySet, RunHandle, RunRequest, Session};
use agent_api_acp::{Acp, AcpConfig, AgentCli};
use async_trait::async_trait;

pub use options::{GeminiInterface, GeminiOptions, HeadlessApproval};
pub use portable::TOOLS;

/// Gemini CLI versions the `gemini` kind is tested against (the bench's pinned one).
pub const SUPPORTED_VERSIONS: &[&str] = &["0.61.0"];

/// The agent kind of Gemini CLI.
pub const KIND: AgentKind = AgentKind::from_static("gemini");

/// Capability id: the run can use Gemini's ACP interface (the default).
pub const CAP_GEMINI_ACP: &str = "backend.gemini.acp";
/// Capability id: the run can use Gemini's headless stream-json interface.
pub const CAP_GEMINI_HEADLESS: &str = "backend.gemini.headless";

/// Where Gemini CLI keeps its settings, memory, sessions and login: `.gemini` under
/// `GEMINI_CLI_HOME`, the user's home by default. An isolated home gets a read-only copy of a
/// Google login, whose refresh token many runs can hold at once.
pub const HOME_LAYOUT: agent_api::kit::home::HomeLayout = agent_api::kit::home::HomeLayout {
    vars: &[agent_api::kit::home::HomeVar { name: "GEMINI_CLI_HOME", default_under_home: "" }],
    credentials: &[("GEMINI_CLI_HOME", ".gemini/oauth_creds.json"), ("GEMINI_CLI_HOME", ".gemini/google_accounts.json")],
    single_use_login: false,
};

/// Gemini CLI as the ACP client runs it: its flags, its variables (endpoint, credentials,
/// config; its state under `~/.gemini`), its home, and its two quirks.
pub const CLI: AgentCli = AgentCli::new(KIND, "gemini", &["--acp", "--skip-trust"], "gemini.acp")
    .home(HOME_LAYOUT)
    .environment(
        &[
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_GEMINI_BASE_URL",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_GENAI_USE_VERTEXAI",
            "GEMINI_MODEL",
            "GEMINI_CLI_NO_RELAUNCH",
        ],
        &[".gemini"],
    )
    .empty_on_missing()
    .history_trails_load();

/// What discovery needs to find the `gemini` CLI and build a backend for it.
pub fn probe() -> agent_api::kit::detect::BackendProbe {
    agent_api::kit::detect::BackendProbe::new(KIND, "gemini", SUPPORTED_VERSIONS, |binary| {
        std::sync::Arc::new(GeminiBackend::new(AcpConfig::with_binary(binary)))
    })
}

/// The Gemini CLI backend (kind `gemini`).
#[derive(Debug, Clone, Default)]
pub struct GeminiBackend {
    config: AcpConfig,
}

impl GeminiBackend {
    /// A backend starting Gemini CLI as `config` says.
    pub fn new(config: AcpConfig) -> Self {
        Self { config }
    }

    /// Its configuration.
    pub fn config(&self) -> &AcpConfig {
        &self.config
    }

    /// The argv and converter of an ACP run (its prompt queued) or of a warm session (`warm`).
    fn acp(&self, request: &RunRequest, warm: bool) -> Result<(CommandSpec, Acp), AgentError> {
        let cwd = agent_api_acp::run_dir(&self.config, request);
        let serve_fs = request.options::<GeminiOptions>()?.fs.unwrap_or(true);
        let mut args = portable::cli_args(&request.portable);
        args.extend(agent_api_acp::approval_mode_args(request));
        let spec = CLI.acp_command(&self.config, args, request, &cwd)?;
        let acp = CLI.client(request, cwd, serve_fs, None, warm)?;
        Ok((spec, acp))
    }

    fn headless(request: &RunRequest) -> Result<bool, AgentError> {
        Ok(request.options::<GeminiOptions>()?.interface == Some(GeminiInterface::Headless))
    }
}

/// The capabilities of the kind, as its tests prove them (recording replays and end-to-end runs
/// on the bench). Warm sessions on ACP; sessions on the one-way headless interface resume per turn.
pub fn capabilities() -> CapabilitySet {
    let mut set = agent_api_acp::base_capabilities();
    for id in [
        caps::REASONING,
        caps::USAGE,
        caps::MODEL_SELECTION,
        caps::HISTORY_LIST,
        caps::HISTORY_READ,
        caps::SESSION_RESUME,
        caps::SESSION_RESUME_PER_TURN,
        caps::SESSION_CALLER_ID,
        agent_api_acp::CAP_SESSION_LOAD,
        CAP_GEMINI_ACP,
        CAP_GEMINI_HEADLESS,
        caps::CALLER_TOOLS,
        caps::HOME_ISOLATED,
        caps::HOME_HERMETIC,
    ] {
        set.insert(id);
    }
    // Every interface builds its argv through `CommandSpec::for_request`: the launchers apply.
    agent_api::kit::options::with_mappings(agent_api::kit::launch::with_launchers(set), portable::MAPPINGS)
}

#[async_trait]
impl AgentBackend for GeminiBackend {
    fn kind(&self) -> AgentKind {
        KIND
    }

    fn capabilities(&self) -> CapabilitySet {
        capabilities()
    }

    fn extension_keys(&self) -> &'static [&'static str] {
        agent_api::kit::options::extension_keys::<GeminiOptions>()
    }

    fn option_value(&self, key: &str, text: &str) -> Result<serde_json::Value, AgentError> {
        agent_api::kit::options::value_from_text::<GeminiOptions>(key, text)
    }

    fn option_mappings(&self) -> &'static [agent_api::kit::options::OptionMapping] {
        portable::MAPPINGS
    }

    fn modes(&self) -> &'static [agent_api::request::ModeInfo] {
        portable::MODES
    }

    async fn run(&self, request: RunRequest) -> Result<RunHandle, AgentError> {
        self.validate(&request)?;
        let mut request = request.in_session_dir(self.config.working_dir.as_deref());
        let tools = agent_api::kit::caller_tools::attach(&mut request).await?;
        let mut settings = RunSettings::for_request(KIND, &request, &self.capabilities());
        settings.hold(tools);
        let request = agent_api_acp::prepare(request, false);
        let files = portable::run_files(&request)?;
        if Self::headless(&request)? {
            agent_api_acp::text_only(&KIND, &request)?;
            portable::check_headless(&request.portable)?;
            let cwd = agent_api_acp::run_dir(&self.config, &request);
            let spec = headless::command(&self.config, &request, &cwd)?;
            let transport = Transport::spawn(&files.apply(spec), settings.line_cap)?;
            settings.hold(Some(files));
            return Ok(start_run(settings, transport, Box::new(headless::Headless::live(request.prompt.text.clone()))));
        }
        let (spec, protocol) = self.acp(&request, false)?;
        let transport = Transport::spawn(&files.apply(spec), settings.line_cap)?;
        settings.hold(Some(files));
        Ok(start_run(settings, transport, Box::new(protocol)))
    }

    fn session_store(&self) -> Option<std::sync::Arc<dyn agent_api::history::SessionStore>> {
        Some(std::sync::Arc::new(history::GeminiSessionStore::for_config(&self.config)?))
    }

    /// ACP keeps one live agent for every turn; the headless interface takes its prompt per
    /// process, so its sessions run a process per turn, resuming the previous turn's session.
    async fn open_session(&self, request: RunRequest) -> Result<Session, AgentError> {
        self.validate_session_template(&request)?;
        let mut request = request.in_session_dir(self.config.working_dir.as_deref());
        if Self::headless(&request)? {
            // Each turn starts with `run`, which serves the caller's tools then.
            return Ok(Session::resuming(std::sync::Arc::new(self.clone()), request));
        }
        let tools = agent_api::kit::caller_tools::attach(&mut request).await?;
        let mut settings = RunSettings::for_request(KIND, &request, &self.capabilities());
        settings.hold(tools);
        let (spec, protocol) = self.acp(&request, true)?;
        let files = portable::run_files(&request)?;
        let transport = Transport::spawn(&files.apply(spec), settings.line_cap)?;
        settings.hold(Some(files));
        Ok(start_session(settings, transport, Box::new(protocol)))
    }
}

impl agent_api::kit::replay::Replay for GeminiBackend {
    fn replay_protocol(&self, format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        match format {
            RecordingFormat::Session => Ok(Box::new(Acp::replay(CLI.parser))),
            RecordingFormat::NativeStdout => Ok(Box::new(headless::Headless::default())),
            other => Err(AgentError::Replay { reason: format!("gemini cannot replay {other:?} recordings") }),
        }
    }
}
