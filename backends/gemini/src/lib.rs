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
//!   session's file before the lookup reads it), which is `SessionNotFound`. The client also reads,
//!   as it would of any agent, what Gemini CLI 0.61.0 does its own way: it passes a model API's
//!   HTTP status through as the JSON-RPC error code, reports usage as
//!   `_meta.quota.token_count`, announces some tool calls only in their permission request, gives
//!   an execute call's command line as its title, and offers leaving plan mode for its default
//!   mode as `proceed_once`.
//! - [`GeminiOptions::interface`] selects the one-way headless interface (`gemini -p PROMPT
//!   --output-format stream-json`, the prompt on stdin): its converter is `headless.rs`.
//! - Its retries show only on stderr: each becomes an `api_retry` status (`agent_api_acp::Retry`).
//! - Its tools are one table ([`TOOLS`]), its chat store `history.rs` ([`history::GeminiSessionStore`]).
//! - Its session snapshots (`agent_api.session.snapshot`) are the session's chat, restored under the
//!   project whose `.project_root` names the run's directory (`agent_api_acp::ChatFiles`); a
//!   restored chat resumes on the headless interface (`--resume`), ACP's `session/load` failing as
//!   above.
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
use agent_api::kit::async_trait;
use agent_api::kit::cli::{CliAgent, CliBackend, Launch, SessionFiles, Turn};
use agent_api::kit::replay::RecordingFormat;
use agent_api::kit::Protocol;
use agent_api::{AgentError, AgentKind, BackendInfo, CapabilitySet, RunRequest};
use agent_api_acp::{AcpConfig, AgentCli, ChatFiles, ExitPlan};

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
    vars: &[agent_api::kit::home::HomeVar {
        name: "GEMINI_CLI_HOME",
        default_under_home: "",
    }],
    credentials: &[
        ("GEMINI_CLI_HOME", ".gemini/oauth_creds.json"),
        ("GEMINI_CLI_HOME", ".gemini/google_accounts.json"),
    ],
    // A Google login's refresh token can be held by many processes at once.
    single_use_login: false,
};

/// Gemini CLI as the ACP client runs it: its flags, its variables (endpoint, credentials,
/// config; its state under `~/.gemini`), its home, its two quirks, how it asks to leave plan
/// mode (`exit_plan_mode` asks for a permission titled with the plan file's path), and its
/// retries, reported only on stderr.
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
    .history_trails_load()
    .exit_plan(ExitPlan::PlanFileTitled("Requesting plan approval for: "))
    .reads_stderr(agent_api_acp::read_retries);

/// What discovery needs to find the `gemini` CLI and build a backend for it.
pub fn probe() -> agent_api::kit::detect::BackendProbe {
    GeminiBackend::probe()
}

/// The Gemini CLI backend (kind `gemini`): the kit's shared backend (`agent_api::kit::cli`) over [`Gemini`].
pub type GeminiBackend = CliBackend<Gemini>;

/// What Gemini CLI tells the shared backend ([`CliAgent`]): its interfaces, options and store.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Gemini;

impl Gemini {
    fn headless(request: &RunRequest) -> Result<bool, AgentError> {
        Ok(request.options::<GeminiOptions>()?.interface == Some(GeminiInterface::Headless))
    }
}

#[async_trait]
impl CliAgent for Gemini {
    type Config = AcpConfig;
    const PROGRAM: &'static str = "gemini";
    const SUPPORTED_VERSIONS: &'static [&'static str] = SUPPORTED_VERSIONS;

    fn info() -> BackendInfo {
        BackendInfo::new(KIND, capabilities())
            .with_options::<GeminiOptions>()
            .with_option_mappings(portable::MAPPINGS)
            .with_modes(portable::MODES)
    }

    /// ACP keeps one live agent for every turn; the headless interface takes its prompt per process.
    fn resumes_per_turn(_config: &AcpConfig, request: &RunRequest) -> Result<bool, AgentError> {
        Self::headless(request)
    }

    /// No interface of Gemini CLI takes an output schema: the SDK asks in the prompt.
    fn prepare(
        _config: &AcpConfig,
        request: RunRequest,
        _turn: Turn,
    ) -> Result<RunRequest, AgentError> {
        Ok(agent_api_acp::prepare(request, false))
    }

    async fn launch(
        config: &AcpConfig,
        request: &RunRequest,
        turn: Turn,
    ) -> Result<Launch, AgentError> {
        let warm = turn == Turn::Session;
        let files = portable::run_files(request)?;
        let cwd = agent_api_acp::run_dir(config, request);
        if Self::headless(request)? {
            agent_api_acp::text_only(&KIND, request)?;
            portable::check_headless(&request.portable)?;
            let spec = headless::command(config, request, &cwd)?;
            return Ok(files.launch(
                spec,
                Box::new(headless::Headless::live(request.prompt.text.clone())),
            ));
        }
        let serve_fs = request.options::<GeminiOptions>()?.fs.unwrap_or(true);
        let spec = CLI.acp_command(config, portable::cli_args(&request.portable), request, &cwd)?;
        let acp = CLI
            .client(request, cwd, serve_fs, None, warm)?
            .with_mode_switch(portable::MODES);
        Ok(files.launch(spec, Box::new(acp)))
    }

    /// Its chats ([`history::GeminiChats`]): its store and its snapshots.
    fn session_files() -> Option<&'static dyn SessionFiles<AcpConfig>> {
        Some(&ChatFiles::<history::GeminiChats>::NEW)
    }

    fn replay_protocol(format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        match format {
            RecordingFormat::Session => Ok(Box::new(CLI.replay())),
            RecordingFormat::NativeStdout => Ok(Box::new(headless::Headless::default())),
            other => Err(other.not_replayable_by("gemini")),
        }
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
        caps::SESSION_SNAPSHOT,
        caps::SESSION_RESUME_PER_TURN,
        caps::SESSION_CALLER_ID,
        caps::QUESTIONS,
        caps::SESSION_MODE_SWITCH,
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
    agent_api::kit::launch::with_launchers(set)
}
