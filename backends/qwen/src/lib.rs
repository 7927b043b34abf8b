//! `agent_api_qwen`: Qwen Code (kind `qwen`, tested with 0.15.10) for `agent_api`.
//!
//! Qwen Code speaks three machine protocols, and one backend value ([`QwenBackend`]) serves all
//! three ([`QwenOptions::interface`]):
//!
//! - ACP (`qwen --acp`, the default): the ACP client of `agent_api_acp` (its mapping table in
//!   that crate's doc) with Qwen's facts ([`CLI`]): permissions, the file system served confined
//!   to the working directory, cancel, warm sessions, `session/load` to resume. Qwen reports each
//!   model call's usage as `_meta` on an empty message chunk, gives relative paths in tool
//!   updates (absolute ones in permission requests), sends no update for a refused call, puts
//!   the model API's failure in an error response's `data` (under a generic "Internal error"),
//!   gives an execute call's command in its permission request's raw input and as its title, and
//!   offers leaving plan mode for its default mode as `proceed_once`; the client reads them all.
//! - [`QwenInterface::StreamJson`]: `qwen -p --input-format stream-json --output-format
//!   stream-json`, two-way, the stream-json family's protocol: the family's converter
//!   (`agent_api_stream_json`, its mapping table in that crate's doc) with Qwen's [`DIALECT`].
//!   Qwen asks `can_use_tool` without any extra flag (the protocol origin's
//!   `--permission-prompt-tool` is refused); the prompt, the answers and the `interrupt` go in on
//!   stdin as the protocol has them. Qwen's `initialize` answer differs from the origin's and is
//!   not used.
//! - [`QwenInterface::Print`]: `qwen -p PROMPT --output-format stream-json`, one-way. Qwen cannot
//!   ask here, so the run's policy becomes `--allowed-tools` (the [`TOOLS`] of each approved
//!   category, `mcp__SERVER` for the run's MCP servers when MCP is approved) and Qwen denies the
//!   rest; `RunRequest::skip_permission_prompts` passes `--yolo` (nothing is asked, every tool
//!   runs).
//!
//! On stream-json, Qwen reports a failed model request as a *successful* `result` whose text
//! starts with `[API Error: …]`; [`api_error_result`] makes that one typed terminal error with its
//! status. That error comes after about 80 s on a 5xx, and nothing a caller can set shortens it:
//! the streaming call retries through `retryWithBackoff` with its fixed defaults (7 attempts,
//! 1.5 s doubling up to 30 s between them, no option passed); the `generationConfig.maxRetries`
//! setting only reaches the HTTP client's own retries inside each attempt, and
//! `QWEN_CODE_UNATTENDED_RETRY` only makes the retries persistent. A caller in a hurry sets the
//! run's timeout (or cancels).
//!
//! Qwen reports those retries nowhere but its debug log, `<runtime dir>/debug/<session id>.txt`
//! ([`debug_log_dir`]). On every interface, when the agent runs on this machine (the local and
//! sandbox launchers), the run follows that file and each retry line becomes the same `api_retry`
//! and `rate_limited` statuses as the family's attempt lines do (`retries.rs`, `agent_api_acp::Retry`). Stream-json
//! runs therefore always name their session (`--session-id`, a new id when the caller chose
//! none); ACP learns it from `session/new`. `--continue` names none, and is not followed.
//!
//! Its session snapshots (`agent_api.session.snapshot`) are the session's chat
//! (`projects/<key>/chats/<id>.jsonl` under `QWEN_RUNTIME_DIR`), restored under the key of the
//! run's directory with every record's `cwd` made that directory (Qwen loads a chat only when its
//! first record's `cwd` is the project's): `agent_api_acp::ChatFiles`.
//!
//! A warm session on the two-way stream-json interface sends each turn as a user message on the
//! same process. Its `interrupt` ends the session, not only the turn: Qwen 0.15.10 aborts the one
//! `AbortController` of its stream-json session, and its input loop stops on it (the process
//! exits with 130); the next send is then `SessionClosed`. On print, a session runs a process
//! per turn, resuming the previous turn's session.
//!
//! A recorded two-way session does not say which protocol it holds until its first message:
//! [`replaying`] picks ACP for JSON-RPC messages and stream-json otherwise. Qwen's chat store is
//! `history.rs` ([`history::QwenSessionStore`]).

pub mod history;
mod options;
mod portable;
mod retries;
mod stream_json;
mod tools;

use agent_api::capabilities as caps;
use agent_api::kit::async_trait;
use agent_api::kit::cli::{CliAgent, CliBackend, Launch, SessionFiles, Turn};
use agent_api::kit::replay::RecordingFormat;
use agent_api::kit::Protocol;
use agent_api::{AgentError, AgentKind, BackendInfo, CapabilitySet, RunRequest};
use agent_api_acp::{AcpConfig, AgentCli, ChatFiles};

pub use options::{QwenInterface, QwenOptions};
pub use stream_json::{
    api_error_result, debug_log_dir, replaying, settings_runtime_dir, stream_json_interface,
    API_ERROR_PREFIX, DIALECT,
};
pub use tools::TOOLS;

/// Qwen Code versions the `qwen` kind is tested against (the bench's pinned one).
pub const SUPPORTED_VERSIONS: &[&str] = &["0.15.10"];

/// The agent kind of Qwen Code.
pub const KIND: AgentKind = AgentKind::from_static("qwen");

/// Capability id: the run can use Qwen Code's ACP interface (the default).
pub const CAP_QWEN_ACP: &str = "backend.qwen.acp";
/// Capability id: the run can use Qwen Code's two-way stream-json interface (the stream-json
/// family's control protocol: permissions, interrupt).
pub const CAP_QWEN_STREAM_JSON: &str = "backend.qwen.stream_json";
/// Capability id: the run can use Qwen Code's one-way print interface.
pub const CAP_QWEN_PRINT: &str = "backend.qwen.print";

/// Where Qwen Code keeps its settings, memory and login (`QWEN_HOME`) and its sessions and logs
/// (`QWEN_RUNTIME_DIR`, the same folder unless set): `~/.qwen` by default. A Qwen OAuth refresh
/// token is single-use: an isolated home gets a read-only copy of it.
pub const HOME_LAYOUT: agent_api::kit::home::HomeLayout = agent_api::kit::home::HomeLayout {
    vars: &[
        agent_api::kit::home::HomeVar {
            name: "QWEN_HOME",
            default_under_home: ".qwen",
        },
        agent_api::kit::home::HomeVar {
            name: "QWEN_RUNTIME_DIR",
            default_under_home: ".qwen",
        },
    ],
    credentials: &[("QWEN_HOME", "oauth_creds.json")],
    // A Qwen OAuth login rotates its refresh token on each refresh.
    single_use_login: true,
};

/// Qwen Code as the ACP client runs it (its stream-json interfaces use the same program,
/// variables and home): its flags, its variables (endpoint, credentials; its state under
/// `~/.qwen`), its home, and how it asks to leave plan mode (`exit_plan_mode` asks for a
/// `switch_mode` permission with the plan in its input), and its retries, in its debug log.
pub const CLI: AgentCli = AgentCli::new(KIND, "qwen", &["--acp"], "qwen.acp")
    .home(HOME_LAYOUT)
    .environment(
        &[
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "OPENAI_MODEL",
            "DASHSCOPE_API_KEY",
            "QWEN_CODE_NO_RELAUNCH",
        ],
        &[".qwen"],
    )
    .exit_plan(agent_api_acp::ExitPlan::SwitchModeWithPlan)
    .reads_stderr(retries::read_log_line);

/// What discovery needs to find the `qwen` CLI and build a backend for it.
pub fn probe() -> agent_api::kit::detect::BackendProbe {
    QwenBackend::probe()
}

/// The Qwen Code backend (kind `qwen`): the kit's shared backend (`agent_api::kit::cli`) over [`Qwen`].
pub type QwenBackend = CliBackend<Qwen>;

/// What Qwen Code tells the shared backend ([`CliAgent`]): its three interfaces, options and store.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Qwen;

#[async_trait]
impl CliAgent for Qwen {
    type Config = AcpConfig;
    const PROGRAM: &'static str = "qwen";
    const SUPPORTED_VERSIONS: &'static [&'static str] = SUPPORTED_VERSIONS;

    fn info() -> BackendInfo {
        BackendInfo::new(KIND, capabilities())
            .with_options::<QwenOptions>()
            .with_option_mappings(portable::MAPPINGS)
            .with_modes(portable::MODES)
            .with_variants(portable::VARIANTS)
    }

    /// ACP and the two-way stream-json keep one live agent for every turn; print takes its prompt
    /// on the command line.
    fn resumes_per_turn(_config: &AcpConfig, request: &RunRequest) -> Result<bool, AgentError> {
        Ok(stream_json_interface(request)? == Some(QwenInterface::Print))
    }

    /// Print takes the schema as its own flag; elsewhere the SDK asks in the prompt.
    fn prepare(
        config: &AcpConfig,
        request: RunRequest,
        _turn: Turn,
    ) -> Result<RunRequest, AgentError> {
        let native_schema = Self::resumes_per_turn(config, &request)?;
        Ok(agent_api_acp::prepare(request, native_schema))
    }

    /// A run on the interface the request picks (ACP unless it names a stream-json one).
    async fn launch(
        config: &AcpConfig,
        request: &RunRequest,
        turn: Turn,
    ) -> Result<Launch, AgentError> {
        let warm = turn == Turn::Session;
        let interface = stream_json_interface(request)?;
        let files = portable::run_files(request, interface.is_some())?;
        let cwd = agent_api_acp::run_dir(config, request);
        if let Some(interface) = interface {
            agent_api_acp::text_only(&KIND, request)?;
            let (spec, protocol) =
                stream_json::stream_json(config, request, &cwd, interface, warm)?;
            return Ok(files.launch(spec, protocol));
        }
        let serve_fs = request.options::<QwenOptions>()?.fs.unwrap_or(true);
        let spec = CLI.acp_command(
            config,
            portable::cli_args(&request.portable, false),
            request,
            &cwd,
        )?;
        let acp = CLI
            .client(request, cwd, serve_fs, debug_log_dir(&spec), warm)?
            .with_mode_switch(portable::MODES);
        Ok(files.launch(spec, Box::new(acp)))
    }

    /// Its chats ([`history::QwenChats`]): its store and its snapshots.
    fn session_files() -> Option<&'static dyn SessionFiles<AcpConfig>> {
        Some(&ChatFiles::<history::QwenChats>::NEW)
    }

    /// A recording is ACP or stream-json, which its first message says ([`replaying`]).
    fn replay_protocol(_format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        Ok(replaying())
    }
}

/// The capabilities of the kind, as its tests prove them (recording replays and end-to-end runs
/// on the bench). Print mode's `--yolo` is the explicit don't-ask option. Warm sessions on ACP and
/// two-way stream-json; sessions on print resume per turn.
pub fn capabilities() -> CapabilitySet {
    let mut set = agent_api_acp::base_capabilities();
    for id in [
        caps::CALLER_TOOLS,
        caps::REASONING,
        caps::USAGE,
        caps::MODEL_SELECTION,
        caps::SKIP_PERMISSION_PROMPTS,
        caps::HISTORY_LIST,
        caps::HISTORY_READ,
        caps::SESSION_RESUME,
        caps::SESSION_SNAPSHOT,
        caps::SESSION_RESUME_PER_TURN,
        caps::SESSION_CALLER_ID,
        caps::QUESTIONS,
        caps::SESSION_MODE_SWITCH,
        agent_api_acp::CAP_SESSION_LOAD,
        CAP_QWEN_ACP,
        CAP_QWEN_STREAM_JSON,
        CAP_QWEN_PRINT,
        caps::HOME_ISOLATED,
        caps::HOME_HERMETIC,
    ] {
        set.insert(id);
    }
    // Every interface builds its argv through `CommandSpec::for_request`: the launchers apply.
    agent_api::kit::launch::with_launchers(set)
}
