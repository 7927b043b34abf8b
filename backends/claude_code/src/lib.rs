//! The Claude Code backend of `agent_api`: runs the `claude` CLI and turns its stream-json output
//! and its two-way control protocol into the universal transcript and bounded wrapper events.
//!
//! - By default a run uses the two-way channel (`claude -p --input-format stream-json
//!   --output-format stream-json --verbose --include-partial-messages --permission-prompt-tool
//!   stdio`): the prompt goes in on stdin, permission requests and AskUserQuestion come back as
//!   `permission.requested` / `question.requested` events that [`agent_api::RunControl`] answers,
//!   and `cancel()` sends the CLI's `interrupt` before the process group is terminated.
//!   Every `can_use_tool` request goes through `agent_api::kit::hitl`, which applies the run's
//!   `PermissionPolicy`: approve-all approves each request the CLI makes (the CLI runs in its
//!   default permission mode, so this works as root too), and each request has its
//!   `permission.requested` and `permission.resolved` (saying who decided).
//! - [`ClaudeCodeOptions`] are the backend's own options (the `backend.claude_code.*` extensions),
//!   attached with `RunRequest::with_options`.
//! - `backend.claude_code.mode = "print"` ([`Mode::Print`]) runs one-way (`-p PROMPT`). It has no request channel:
//!   the policy becomes pre-approved tools (`--allowedTools`; `acceptEdits` when file writes are
//!   approved), the CLI denies every other tool that needs a permission, and no permission event
//!   appears.
//! - `RunRequest::skip_permission_prompts` (`agent_api.permissions.skip_prompts`) runs the CLI in
//!   `bypassPermissions`: it asks nothing. Claude Code refuses that as root unless `IS_SANDBOX=1`
//!   is in the run's environment; the refusal is a typed `PermissionModeRefused`.
//! - [`ClaudeCodeBackend`]'s [`Replay::replay_protocol`](agent_api::kit::replay::Replay::replay_protocol) replays recorded print output and two-way sessions.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agent_api::AgentError> {
//! use agent_api::{AgentBackend, RunRequest};
//! use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
//! let backend = ClaudeCodeBackend::new(ClaudeCodeConfig::default());
//! let (events, completion) = backend.run(RunRequest::new("Say hello")).await?.collect_wrapper().await;
//! println!("{} events, final text {:?}", events.len(), completion?.final_text);
//! # Ok(()) }
//! ```
//!
//! Where Claude Code's lines become events: the stream-json family's converter
//! (`agent_api_stream_json`, its mapping table in that crate's doc) reading Claude Code's
//! [`DIALECT`] (its tool table and quirks, in `dialect.rs`).
//!
//! Modules: [`args`] (the command line), [`history`] (the CLI's own session store) and `dialect`
//! (its tools, as one table, and its quirks).

pub mod args;
mod dialect;
pub mod history;
pub mod snapshot;

use std::collections::BTreeMap;
use std::path::PathBuf;

use agent_api::capabilities as caps;
use agent_api::kit::async_trait;
use agent_api::kit::cli::{CliAgent, CliBackend, CliSettings, Launch, Turn};
use agent_api::kit::replay::RecordingFormat;
use agent_api::kit::Protocol;
use agent_api::{AgentError, AgentKind, BackendInfo, CapabilitySet, RunRequest};

pub use agent_api_stream_json::StreamJson;
pub use agent_api_stream_json::EXIT_PLAN_OPTIONS;
pub use args::{ClaudeCodeOptions, Mode, PermissionMode};
pub use dialect::{DIALECT, TOOLS};

/// The backend's agent kind.
pub const KIND: AgentKind = AgentKind::from_static("claude_code");

/// Claude Code versions this backend was verified against (fixtures and end-to-end tests).
pub const SUPPORTED_VERSIONS: &[&str] = &["2.1.197"];

/// Capability: the one-way print mode (`backend.claude_code.mode = "print"`).
pub const CAP_PRINT_MODE: &str = "backend.claude_code.print_mode";
/// Capability: the `backend.claude_code.*` command-line extensions (extra dirs, system prompt
/// append, allowed and disallowed tools, permission mode, max turns).
pub const CAP_CLI_OPTIONS: &str = "backend.claude_code.cli_options";

/// Where Claude Code keeps its config, memory, sessions and login: `CLAUDE_CONFIG_DIR` (with its
/// `.claude.json` inside once the variable is set), `~/.claude` by default. A login's refresh
/// token is single-use: an isolated home gets a read-only copy, so the agent cannot rotate it.
pub const HOME_LAYOUT: agent_api::kit::home::HomeLayout = agent_api::kit::home::HomeLayout {
    vars: &[agent_api::kit::home::HomeVar {
        name: "CLAUDE_CONFIG_DIR",
        default_under_home: ".claude",
    }],
    credentials: &[("CLAUDE_CONFIG_DIR", ".credentials.json")],
    // A Claude.ai login rotates its refresh token on each refresh.
    single_use_login: true,
};

/// Where and how to run the `claude` executable. Its `Debug` shows the names of `env`, never the
/// values.
#[derive(Clone)]
#[non_exhaustive]
pub struct ClaudeCodeConfig {
    /// The executable: a path, or a name looked up on `PATH` (default `claude`).
    pub binary: PathBuf,
    /// Variables added to the CLI's environment (a request's `env` is added after these).
    pub env: BTreeMap<String, String>,
    /// Whether the CLI inherits this process's environment (default true). When false it
    /// sees only `env` and the request's `env`.
    pub inherit_env: bool,
    /// Working directory when the request names none (default: this process's).
    pub working_dir: Option<PathBuf>,
    /// Arguments added after the backend's own, before the prompt.
    pub extra_args: Vec<String>,
}

impl Default for ClaudeCodeConfig {
    fn default() -> Self {
        Self {
            binary: PathBuf::from("claude"),
            env: BTreeMap::new(),
            inherit_env: true,
            working_dir: None,
            extra_args: Vec::new(),
        }
    }
}

impl std::fmt::Debug for ClaudeCodeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaudeCodeConfig")
            .field("binary", &self.binary)
            .field("env", &agent_api::kit::secrets::EnvNames(&self.env))
            .field("inherit_env", &self.inherit_env)
            .field("working_dir", &self.working_dir)
            .field(
                "extra_args",
                &agent_api::kit::secrets::ArgsShown(&self.extra_args),
            )
            .finish()
    }
}

impl ClaudeCodeConfig {
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

    /// Sets whether the CLI inherits this process's environment.
    pub fn with_inherit_env(mut self, inherit: bool) -> Self {
        self.inherit_env = inherit;
        self
    }

    /// Sets the default working directory.
    pub fn with_working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }

    /// Adds arguments after the backend's own.
    pub fn with_extra_args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.extra_args.extend(args.into_iter().map(Into::into));
        self
    }
}

/// The Claude Code backend: the kit's shared backend over [`ClaudeCode`].
pub type ClaudeCodeBackend = CliBackend<ClaudeCode>;

/// What Claude Code tells the shared backend ([`CliAgent`]): its capabilities and options, its
/// two interfaces (the two-way control channel, the one-way print mode), its store and its
/// snapshots.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct ClaudeCode;

#[async_trait]
impl CliAgent for ClaudeCode {
    type Config = ClaudeCodeConfig;
    const PROGRAM: &'static str = "claude";
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
            caps::SESSION_CALLER_ID,
            caps::SESSION_WARM,
            caps::SESSION_RESUME_PER_TURN,
            caps::SESSION_SNAPSHOT,
            caps::SESSION_MODE_SWITCH,
            caps::TOOLS_STRUCTURED_V1,
            caps::CALLER_TOOLS,
            caps::TEXT_MESSAGES,
            caps::TOOL_CALLS,
            caps::TOOL_RESULTS,
            caps::QUESTIONS,
            caps::PERMISSIONS,
            caps::ERROR_EVENTS,
            caps::REASONING,
            caps::COMMAND_EXECUTION,
            caps::FILE_CHANGES,
            caps::STREAMING_DELTAS,
            caps::USAGE,
            caps::MODEL_SELECTION,
            caps::SKIP_PERMISSION_PROMPTS,
            caps::HISTORY_LIST,
            caps::HISTORY_READ,
            caps::HOME_ISOLATED,
            caps::HOME_HERMETIC,
            CAP_PRINT_MODE,
            CAP_CLI_OPTIONS,
        ]);
        BackendInfo::new(KIND, agent_api::kit::launch::with_launchers(own))
            .with_options::<ClaudeCodeOptions>()
            .with_option_mappings(args::OPTION_MAPPINGS)
            .with_modes(args::MODES)
            .with_variants(args::VARIANTS)
    }

    async fn launch(
        config: &ClaudeCodeConfig,
        request: &RunRequest,
        turn: Turn,
    ) -> Result<Launch, AgentError> {
        let mut invocation = args::invocation(config, request)?;
        let files = std::mem::take(&mut invocation.files);
        let protocol = match (turn, invocation.mode) {
            (Turn::Session, Mode::Control) => {
                StreamJson::session(DIALECT, request.permissions.clone(), invocation.bypass)
                    .with_mode_switch(args::MODES)
                    .in_mode(request.mode.as_ref())
            }
            // Print mode takes its one prompt on the command line.
            (Turn::Session, Mode::Print) => {
                return Err(AgentError::InvalidExtension {
                    key: args::EXT_MODE.into(),
                    reason: "a session needs the two-way control mode".into(),
                })
            }
            (_, Mode::Control) => StreamJson::control(
                DIALECT,
                request.prompt.text.clone(),
                request.permissions.clone(),
                invocation.bypass,
            )
            .with_images(agent_api::kit::images::ImageData::read_all(
                &request.prompt,
            )?)
            .in_mode(request.mode.as_ref()),
            // Print mode reads plain text: images need the two-way channel's user messages.
            (_, Mode::Print) if !request.prompt.images.is_empty() => {
                return Err(AgentError::InvalidExtension {
                    key: args::EXT_MODE.into(),
                    reason: "images need the two-way control mode".into(),
                })
            }
            (_, Mode::Print) => StreamJson::print_from_stdin(
                DIALECT,
                request.prompt.text.clone(),
                invocation.bypass,
            ),
        };
        Ok(Launch::command(invocation.spec, protocol).holding(files))
    }

    /// Claude Code's session ids are UUIDs; a session the backend's own store does not hold is
    /// not found before anything runs, when the run reads that store (this machine, the
    /// backend's home).
    fn check_session(config: &ClaudeCodeConfig, request: &RunRequest) -> Result<(), AgentError> {
        let Some(session) = request.session.session_ref() else {
            return Ok(());
        };
        if !agent_api::kit::is_uuid(&session.id) {
            return Err(AgentError::InvalidRequest {
                reason: "Claude Code's session ids are UUIDs".into(),
            });
        }
        let own_store = matches!(
            request.launcher,
            None | Some(agent_api::request::Launcher::Local)
        ) && request.home == agent_api::request::Home::Inherit
            && !["HOME", "CLAUDE_CONFIG_DIR"]
                .iter()
                .any(|key| request.env.contains_key(*key));
        match history::ClaudeSessionStore::for_config(config) {
            Some(store) if own_store => store.find(&session.id).map(drop),
            _ => Ok(()),
        }
    }

    fn session_store(
        config: &ClaudeCodeConfig,
    ) -> Option<std::sync::Arc<dyn agent_api::history::SessionStore>> {
        Some(std::sync::Arc::new(
            history::ClaudeSessionStore::for_config(config)?,
        ))
    }

    fn replay_protocol(format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        match format {
            RecordingFormat::NativeStdout | RecordingFormat::Session => {
                Ok(Box::new(StreamJson::replaying(DIALECT)))
            }
            other => Err(other.not_replayable_by("claude_code")),
        }
    }

    fn store_shape(first_line: &[u8]) -> Option<agent_api::history::StoreShape> {
        history::store_shape(first_line)
    }

    async fn export_snapshot(
        config: &ClaudeCodeConfig,
        request: &RunRequest,
        session: &agent_api::request::SessionRef,
    ) -> Result<agent_api::SessionSnapshot, AgentError> {
        snapshot::export(config, request, session).await
    }

    async fn import_snapshot(
        config: &ClaudeCodeConfig,
        request: &RunRequest,
        snapshot: &agent_api::SessionSnapshot,
    ) -> Result<agent_api::snapshot::SnapshotImport, AgentError> {
        snapshot::import(config, request, snapshot).await
    }
}

impl CliSettings for ClaudeCodeConfig {
    fn for_binary(binary: PathBuf) -> Self {
        Self::default().with_binary(binary)
    }

    fn default_working_dir(&self) -> Option<&std::path::Path> {
        self.working_dir.as_deref()
    }
}

/// What discovery needs to find the `claude` CLI and build a backend for it.
pub fn probe() -> agent_api::kit::detect::BackendProbe {
    ClaudeCodeBackend::probe()
}

/// The installed `claude`: `$AGENT_API_CLAUDE_CODE_BIN`, else `claude` on `PATH`, with its version.
pub async fn detect() -> Option<agent_api::kit::detect::Installed> {
    probe().detect().await
}
