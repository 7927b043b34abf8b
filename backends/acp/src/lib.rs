//! `agent_api_acp`: the Agent Client Protocol backend of `agent_api`.
//!
//! One ACP client ([`protocol::Acp`]) over the kit's JSON-RPC helpers and driver serves every
//! agent that speaks ACP on stdio. Two kinds are built on it:
//!
//! - **`gemini`** ([`AcpBackend::gemini`]): Gemini CLI (tested with 0.61.0), `gemini --acp
//!   --skip-trust` by default; [`GeminiOptions::interface`] selects the one-way headless interface
//!   (`gemini -p PROMPT --output-format stream-json`, see [`headless`]).
//! - **`qwen`** ([`AcpBackend::qwen`]): Qwen Code (tested with 0.15.10), `qwen --acp` by default;
//!   [`QwenOptions::interface`] selects its two-way stream-json or one-way print interface, which
//!   run on Claude Code's converter (see [`qwen`] for why the kind lives here).
//! - **`acp`** ([`AcpBackend::generic`]): any ACP agent, given as a command line
//!   ([`AcpOptions::command`], or [`AcpConfig::binary`] and [`AcpConfig::args`]).
//!
//! What the client does: `initialize` (protocol version 1, the file system advertised only when
//! served, no terminal), `session/new` with the run's working directory (or `session/load` to
//! resume, when the agent advertises `loadSession`), one `session/prompt` per turn ended by its
//! `stopReason` (the prompt's images go inline, base64, when the agent's `promptCapabilities.image`
//! says it takes them, else the turn fails with `UnsupportedCapability`; attachments go as
//! `resource_link`s to `file://` URIs, which every ACP agent takes; the one-way interfaces refuse
//! both before spawn); `session/update` kinds become transcript items ([`updates`]); permission
//! requests go through `agent_api::kit::hitl` and the decision selects the offered option by its
//! kind; `fs/read_text_file` / `fs/write_text_file` are served confined to the working directory
//! ([`fs`]); `terminal/*` is not offered (the agents run their shell tools themselves); cancel
//! sends `session/cancel`, answers pending permissions `cancelled`, and the driver kills the
//! process group after the grace period.
//!
//! Sessions (`spec/run-protocol.md` §8): on ACP every kind opens a warm session, one live agent
//! and one ACP session whose turns are `session/prompt`s; a cancelled turn ends with the
//! `cancelled` stop reason and the session goes on. Qwen's two-way stream-json is warm too (its
//! interrupt ends the session, see [`qwen`]); the one-way interfaces (Gemini headless, Qwen print)
//! resume per turn. A session opened with a native id loads it first (`session/load`) and writes
//! the replayed history as `history` status items at the start of its first turn. Gemini CLI
//! 0.61.0 answers `session/load` before it replays the history (the first prompt then waits for
//! its `available_commands_update`), and its load often fails on its own ("No previous sessions
//! found for this project": setting up the loaded session resets the session's file before the
//! lookup reads it), which is `SessionNotFound`.
//!
//! Message types are the published schema crate's (`agent-client-protocol-schema`), pinned to
//! 0.11.7: every 1.x release turns on serde_json's `preserve_order` feature, which Cargo would
//! then enable for every crate in the workspace (changing every map's key order and the cost of
//! every parsed line), and needs rustc 1.88 against this workspace's 1.85. The 0.11 schema is
//! protocol version 1, which is what Gemini CLI 0.61.0 and OpenCode 1.18.33 speak (their
//! recordings replay through it). The upstream `agent-client-protocol` crate is not used: it
//! brings its own runtime, and the kit's driver already owns the process and its lines.

pub mod errors;
pub mod fs;
pub mod headless;
pub mod history;
pub mod options;
pub mod portable;
pub mod protocol;
pub mod qwen;
pub mod requests;
pub mod retries;
pub mod updates;

use std::collections::VecDeque;

use agent_api::capabilities as caps;
use agent_api::kit::replay::RecordingFormat;
use agent_api::kit::{start_run, start_session, CommandSpec, Protocol, RunSettings, Transport};
use agent_api::{AgentBackend, AgentError, AgentKind, CapabilitySet, RunHandle, RunRequest, Session};
use async_trait::async_trait;

pub use options::{AcpConfig, AcpOptions, GeminiInterface, GeminiOptions, HeadlessApproval, QwenInterface, QwenOptions};

/// Gemini CLI versions the `gemini` kind is tested against (the bench's pinned one).
pub const SUPPORTED_VERSIONS: &[&str] = &["0.61.0"];

/// The agent kind of Gemini CLI.
pub const GEMINI_KIND: AgentKind = AgentKind::from_static("gemini");

/// What discovery needs to find the `gemini` CLI and build a backend for it.
pub fn gemini_probe() -> agent_api::kit::detect::BackendProbe {
    agent_api::kit::detect::BackendProbe::new(GEMINI_KIND, "gemini", SUPPORTED_VERSIONS, |binary| {
        std::sync::Arc::new(AcpBackend::gemini(AcpConfig::with_binary(binary)))
    })
}

/// Qwen Code versions the `qwen` kind is tested against (the bench's pinned one).
pub const QWEN_SUPPORTED_VERSIONS: &[&str] = &["0.15.10"];

/// The agent kind of Qwen Code.
pub const QWEN_KIND: AgentKind = AgentKind::from_static("qwen");

/// What discovery needs to find the `qwen` CLI and build a backend for it.
pub fn qwen_probe() -> agent_api::kit::detect::BackendProbe {
    agent_api::kit::detect::BackendProbe::new(QWEN_KIND, "qwen", QWEN_SUPPORTED_VERSIONS, |binary| {
        std::sync::Arc::new(AcpBackend::qwen(AcpConfig::with_binary(binary)))
    })
}

/// Capability id: the run can use Gemini's ACP interface (the default).
pub const CAP_GEMINI_ACP: &str = "backend.gemini.acp";
/// Capability id: the run can use Gemini's headless stream-json interface.
pub const CAP_GEMINI_HEADLESS: &str = "backend.gemini.headless";
/// Capability id: the run can use Qwen Code's ACP interface (the default).
pub const CAP_QWEN_ACP: &str = "backend.qwen.acp";
/// Capability id: the run can use Qwen Code's two-way stream-json interface (Claude Code's control
/// protocol: permissions, interrupt).
pub const CAP_QWEN_STREAM_JSON: &str = "backend.qwen.stream_json";
/// Capability id: the run can use Qwen Code's one-way print interface.
pub const CAP_QWEN_PRINT: &str = "backend.qwen.print";
/// Capability id: the client serves `fs/read_text_file` and `fs/write_text_file`, confined to the
/// working directory.
pub const CAP_FS_CONFINED: &str = "backend.acp.fs_confined";
/// Capability id: a resumed ACP run or warm session loads its session with `session/load` (the
/// agent advertises `loadSession`), its replayed history marked as such.
pub const CAP_SESSION_LOAD: &str = "backend.acp.session_load";

/// Where Gemini CLI keeps its settings, memory, sessions and login: `.gemini` under
/// `GEMINI_CLI_HOME`, the user's home by default. An isolated home gets a read-only copy of a
/// Google login, whose refresh token many runs can hold at once.
pub const GEMINI_HOME_LAYOUT: agent_api::kit::home::HomeLayout = agent_api::kit::home::HomeLayout {
    vars: &[agent_api::kit::home::HomeVar { name: "GEMINI_CLI_HOME", default_under_home: "" }],
    credentials: &[("GEMINI_CLI_HOME", ".gemini/oauth_creds.json"), ("GEMINI_CLI_HOME", ".gemini/google_accounts.json")],
    single_use_login: false,
};

/// Where Qwen Code keeps its settings, memory and login (`QWEN_HOME`) and its sessions and logs
/// (`QWEN_RUNTIME_DIR`, the same folder unless set): `~/.qwen` by default. A Qwen OAuth refresh
/// token is single-use: an isolated home gets a read-only copy of it.
pub const QWEN_HOME_LAYOUT: agent_api::kit::home::HomeLayout = agent_api::kit::home::HomeLayout {
    vars: &[
        agent_api::kit::home::HomeVar { name: "QWEN_HOME", default_under_home: ".qwen" },
        agent_api::kit::home::HomeVar { name: "QWEN_RUNTIME_DIR", default_under_home: ".qwen" },
    ],
    credentials: &[("QWEN_HOME", "oauth_creds.json")],
    single_use_login: true,
};

/// Which agent the backend runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flavor {
    /// Gemini CLI.
    Gemini,
    /// Qwen Code.
    Qwen,
    /// Any ACP agent given as a command line.
    Generic,
}

/// The ACP backend, as kind `gemini` or `acp`.
#[derive(Debug, Clone)]
pub struct AcpBackend {
    flavor: Flavor,
    config: AcpConfig,
}

impl AcpBackend {
    /// Gemini CLI (kind `gemini`).
    pub fn gemini(config: AcpConfig) -> Self {
        Self { flavor: Flavor::Gemini, config }
    }

    /// Qwen Code (kind `qwen`).
    pub fn qwen(config: AcpConfig) -> Self {
        Self { flavor: Flavor::Qwen, config }
    }

    /// Any ACP agent (kind `acp`).
    pub fn generic(config: AcpConfig) -> Self {
        Self { flavor: Flavor::Generic, config }
    }

    /// Its configuration.
    pub fn config(&self) -> &AcpConfig {
        &self.config
    }

    /// `spec` in the home the request asks for. Any other ACP agent's directories are unknown, so
    /// it never advertises homes and only ever inherits.
    pub(crate) fn homed(&self, spec: CommandSpec, request: &RunRequest) -> Result<CommandSpec, AgentError> {
        match self.flavor {
            Flavor::Gemini => GEMINI_HOME_LAYOUT.apply(spec, &request.home),
            Flavor::Qwen => QWEN_HOME_LAYOUT.apply(spec, &request.home),
            Flavor::Generic => Ok(spec),
        }
    }

    fn spec(&self, program: std::path::PathBuf, args: Vec<String>, request: &RunRequest, cwd: &std::path::Path) -> CommandSpec {
        let mut spec = CommandSpec::new(program).args(self.config.args.iter().cloned()).args(args);
        for (k, v) in &self.config.env {
            spec = spec.env(k, v);
        }
        let mut spec = launch_env(spec.for_request(request), self.flavor).cwd(cwd);
        spec.stdin = true;
        spec
    }

    /// A CLI with a known name (`binary` or `name` on `PATH`), its ACP flags and the run's model.
    fn named_agent(&self, name: &str, flags: &[&str], request: &RunRequest, cwd: &std::path::Path) -> CommandSpec {
        let mut args: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        if let Some(model) = &request.model {
            args.extend(["-m".to_string(), model.clone()]);
        }
        args.extend(portable::cli_args(self.flavor, &request.portable, false));
        let program = self.config.binary.clone().unwrap_or_else(|| name.into());
        self.spec(program, args, request, cwd)
    }

    /// The argv of a live ACP run and whether it serves the file system.
    fn acp_command(&self, request: &RunRequest, cwd: &std::path::Path) -> Result<(CommandSpec, bool), AgentError> {
        match self.flavor {
            Flavor::Gemini => {
                let fs = request.options::<GeminiOptions>()?.fs;
                Ok((self.named_agent("gemini", &["--acp", "--skip-trust"], request, cwd), fs.unwrap_or(true)))
            }
            Flavor::Qwen => {
                let fs = request.options::<QwenOptions>()?.fs;
                Ok((self.named_agent("qwen", &["--acp"], request, cwd), fs.unwrap_or(true)))
            }
            Flavor::Generic => {
                let options = request.options::<AcpOptions>()?;
                let (program, args) = match options.command.split_first() {
                    Some((program, args)) => (program.into(), args.to_vec()),
                    None => (
                        self.config.binary.clone().ok_or_else(|| AgentError::InvalidRequest {
                            reason: "the acp backend needs a command line (backend.acp.command)".into(),
                        })?,
                        Vec::new(),
                    ),
                };
                Ok((self.spec(program, args, request, cwd), options.fs.unwrap_or(true)))
            }
        }
    }
}

/// The capabilities of each kind, as its tests prove them (recording replays, the fake ACP agent,
/// and for `gemini` and `qwen` end-to-end runs on the bench).
pub fn capabilities(flavor: Flavor) -> CapabilitySet {
    let mut set = CapabilitySet::from_ids([
        caps::RUN,
        caps::EVENTS,
        caps::EVENTS_LIVE,
        caps::CONTROL_CANCEL,
        caps::TOOLS_STRUCTURED_V1,
        caps::TEXT_MESSAGES,
        caps::TOOL_CALLS,
        caps::TOOL_RESULTS,
        caps::PERMISSIONS,
        caps::STREAMING_DELTAS,
        caps::COMMAND_EXECUTION,
        caps::FILE_CHANGES,
        caps::SESSION_LIFECYCLE,
        caps::SESSION_WARM,
        CAP_FS_CONFINED,
    ]);
    let extra: &[&str] = match flavor {
        // Warm sessions on ACP; sessions on the one-way headless interface resume per turn.
        Flavor::Gemini => &[
            caps::REASONING,
            caps::USAGE,
            caps::MODEL_SELECTION,
            caps::HISTORY_LIST,
            caps::HISTORY_READ,
            caps::SESSION_RESUME,
            caps::SESSION_RESUME_PER_TURN,
            caps::SESSION_CALLER_ID,
            CAP_SESSION_LOAD,
            CAP_GEMINI_ACP,
            CAP_GEMINI_HEADLESS,
            caps::CALLER_TOOLS,
            caps::HOME_ISOLATED,
            caps::HOME_HERMETIC,
        ],
        // Print mode's `--yolo` is the explicit don't-ask option. Warm sessions on ACP and two-way
        // stream-json; sessions on print resume per turn.
        Flavor::Qwen => &[
            caps::CALLER_TOOLS,
            caps::REASONING,
            caps::USAGE,
            caps::MODEL_SELECTION,
            caps::SKIP_PERMISSION_PROMPTS,
            caps::HISTORY_LIST,
            caps::HISTORY_READ,
            caps::SESSION_RESUME,
            caps::SESSION_RESUME_PER_TURN,
            caps::SESSION_CALLER_ID,
            CAP_SESSION_LOAD,
            CAP_QWEN_ACP,
            CAP_QWEN_STREAM_JSON,
            CAP_QWEN_PRINT,
            caps::HOME_ISOLATED,
            caps::HOME_HERMETIC,
        ],
        // Resuming needs the agent's `loadSession`; without it a resumed run fails typed.
        Flavor::Generic => &[caps::REASONING, caps::SESSION_RESUME, CAP_SESSION_LOAD],
    };
    for id in extra {
        set.insert(*id);
    }
    // Every interface builds its argv through `CommandSpec::for_request` and `launch_env`, so the
    // launchers apply to all of them; a generic agent's variables are the caller's to pass in `env`.
    agent_api::kit::options::with_mappings(agent_api::kit::launch::with_launchers(set), portable::mappings(flavor))
}

/// Declares the variables the flavor's CLI reads for its endpoint, credentials and config: all a
/// launcher other than Local passes on from the caller's environment (`spec/launchers.md`). Their
/// state lives under `HOME` (`~/.gemini`, `~/.qwen`): writable in a sandbox even when `HOME` is the
/// caller's real one (read-only there otherwise).
pub(crate) fn launch_env(spec: CommandSpec, flavor: Flavor) -> CommandSpec {
    const PROXY: &[&str] = &["HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"];
    let own: &[&str] = match flavor {
        Flavor::Gemini => &[
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
        Flavor::Qwen => &["OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "DASHSCOPE_API_KEY", "QWEN_CODE_NO_RELAUNCH"],
        Flavor::Generic => &[],
    };
    let home_state: &[&str] = match flavor {
        Flavor::Gemini => &[".gemini"],
        Flavor::Qwen => &[".qwen"],
        Flavor::Generic => &[],
    };
    spec.reads_env(own).reads_env(PROXY).home_state(home_state.iter().copied())
}

#[async_trait]
impl AgentBackend for AcpBackend {
    fn kind(&self) -> AgentKind {
        let name = match self.flavor {
            Flavor::Gemini => "gemini",
            Flavor::Qwen => "qwen",
            Flavor::Generic => "acp",
        };
        AgentKind::new(name).expect("a valid agent kind")
    }

    fn capabilities(&self) -> CapabilitySet {
        capabilities(self.flavor)
    }

    fn extension_keys(&self) -> &'static [&'static str] {
        match self.flavor {
            Flavor::Gemini => agent_api::kit::options::extension_keys::<GeminiOptions>(),
            Flavor::Qwen => agent_api::kit::options::extension_keys::<QwenOptions>(),
            Flavor::Generic => agent_api::kit::options::extension_keys::<AcpOptions>(),
        }
    }

    fn option_value(&self, key: &str, text: &str) -> Result<serde_json::Value, AgentError> {
        match self.flavor {
            Flavor::Gemini => agent_api::kit::options::value_from_text::<GeminiOptions>(key, text),
            Flavor::Qwen => agent_api::kit::options::value_from_text::<QwenOptions>(key, text),
            Flavor::Generic => agent_api::kit::options::value_from_text::<AcpOptions>(key, text),
        }
    }

    fn option_mappings(&self) -> &'static [agent_api::kit::options::OptionMapping] {
        portable::mappings(self.flavor)
    }

    async fn run(&self, request: RunRequest) -> Result<RunHandle, AgentError> {
        self.validate(&request)?;
        let mut request = request.in_session_dir(self.config.working_dir.as_deref());
        let cwd = self.cwd(&request);
        let tools = agent_api::kit::caller_tools::attach(&mut request).await?;
        let mut settings = RunSettings::for_request(self.kind(), &request, &self.capabilities());
        settings.hold(tools);
        let qwen_stream_json = match self.flavor {
            Flavor::Qwen => qwen::stream_json_interface(&request)?,
            _ => None,
        };
        let request = portable::prepare(request, qwen_stream_json == Some(QwenInterface::Print));
        let files = portable::RunFiles::for_request(self.flavor, &request, qwen_stream_json.is_some())?;
        let spawn = |spec: CommandSpec, line_cap| Transport::spawn(&files.apply(spec), line_cap);
        if self.flavor == Flavor::Gemini && request.options::<GeminiOptions>()?.interface == Some(GeminiInterface::Headless) {
            self.text_only(&request)?;
            portable::check_headless(&request.portable)?;
            let transport = spawn(headless::command(self, &request, &cwd)?, settings.line_cap)?;
            settings.hold(Some(files));
            return Ok(start_run(settings, transport, Box::new(headless::Headless::live(request.prompt.text.clone()))));
        }
        if let Some(interface) = qwen_stream_json {
            self.text_only(&request)?;
            let (spec, protocol) = qwen::stream_json(self, &request, &cwd, interface, false)?;
            let transport = spawn(spec, settings.line_cap)?;
            settings.hold(Some(files));
            return Ok(start_run(settings, transport, protocol));
        }
        let (spec, protocol) = self.acp(&request, cwd, false)?;
        let transport = spawn(spec, settings.line_cap)?;
        settings.hold(Some(files));
        Ok(start_run(settings, transport, Box::new(protocol)))
    }

    fn session_store(&self) -> Option<std::sync::Arc<dyn agent_api::history::SessionStore>> {
        history::store(self.flavor, &self.config)
    }

    /// ACP and Qwen's two-way stream-json keep one live agent for every turn; the one-way
    /// interfaces (Gemini headless, Qwen print) take their prompt on the command line, so their
    /// sessions run a process per turn, resuming the previous turn's session.
    async fn open_session(&self, request: RunRequest) -> Result<Session, AgentError> {
        agent_api::kit::validate_template(&self.kind(), &self.capabilities(), self.extension_keys(), &request)?;
        let mut request = request.in_session_dir(self.config.working_dir.as_deref());
        let cwd = self.cwd(&request);
        let headless = self.flavor == Flavor::Gemini && request.options::<GeminiOptions>()?.interface == Some(GeminiInterface::Headless);
        // A session that resumes per turn starts each turn with `run`, which serves the tools then.
        let tools = if headless { None } else { agent_api::kit::caller_tools::attach(&mut request).await? };
        let mut settings = RunSettings::for_request(self.kind(), &request, &self.capabilities());
        settings.hold(tools);
        let qwen_interface = match self.flavor {
            Flavor::Qwen => qwen::stream_json_interface(&request)?,
            _ => None,
        };
        if headless || qwen_interface == Some(QwenInterface::Print) {
            return Ok(Session::resuming(std::sync::Arc::new(self.clone()), request));
        }
        let (spec, protocol) = match qwen_interface {
            Some(interface) => {
                self.text_only(&request)?;
                qwen::stream_json(self, &request, &cwd, interface, true)?
            }
            None => {
                let (spec, protocol) = self.acp(&request, cwd, true)?;
                (spec, Box::new(protocol) as Box<dyn Protocol>)
            }
        };
        let files = portable::RunFiles::for_request(self.flavor, &request, qwen_interface.is_some())?;
        let transport = Transport::spawn(&files.apply(spec), settings.line_cap)?;
        settings.hold(Some(files));
        Ok(start_session(settings, transport, protocol))
    }
}

impl agent_api::kit::replay::Replay for AcpBackend {
    fn replay_protocol(&self, format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        match (format, self.flavor) {
            (_, Flavor::Qwen) => Ok(qwen::replaying()),
            (RecordingFormat::Session, _) => Ok(Box::new(protocol::Acp::replay(self.parser_name()))),
            (RecordingFormat::NativeStdout, Flavor::Gemini) => Ok(Box::new(headless::Headless::default())),
            (other, _) => Err(AgentError::Replay { reason: format!("{} cannot replay {other:?} recordings", self.kind()) }),
        }
    }
}

impl AcpBackend {
    /// Only ACP carries images and attachments: the other interfaces refuse them before spawn.
    fn text_only(&self, request: &RunRequest) -> Result<(), AgentError> {
        let needs = [(!request.prompt.images.is_empty(), caps::IMAGES), (!request.prompt.attachments.is_empty(), caps::FILE_ATTACHMENTS)];
        match needs.into_iter().find(|(needed, _)| *needed) {
            Some((_, capability)) => {
                Err(AgentError::UnsupportedCapability { kind: self.kind().to_string(), capability: capability.to_string() })
            }
            None => Ok(()),
        }
    }

    /// The run's working directory, absolute.
    fn cwd(&self, request: &RunRequest) -> std::path::PathBuf {
        options::absolute(
            request.working_dir.as_deref().or(self.config.working_dir.as_deref()).unwrap_or_else(|| std::path::Path::new(".")),
        )
    }

    /// The argv and converter of an ACP run (its prompt queued) or of a warm session (`warm`:
    /// no prompt until the first turn).
    fn acp(&self, request: &RunRequest, cwd: std::path::PathBuf, warm: bool) -> Result<(CommandSpec, protocol::Acp), AgentError> {
        if request.new_session_id.is_some() {
            // `session/new` answers with the agent's own id; only the one-way interfaces take one.
            return Err(AgentError::InvalidRequest {
                reason:
                    "ACP names its own sessions: a caller-chosen session id needs Gemini's headless or Qwen's print/stream-json interface"
                        .into(),
            });
        }
        let (spec, serve_fs) = self.acp_command(request, &cwd)?;
        let spec = self.homed(spec, request)?;
        let fs_mode = if serve_fs {
            let fs = fs::ConfinedFs::new(&cwd)?;
            requests::FsMode::Confined { fs, empty_on_missing: self.flavor == Flavor::Gemini }
        } else {
            requests::FsMode::Off
        };
        let prompts = if warm { VecDeque::new() } else { VecDeque::from([protocol::prompt_blocks(&request.prompt)?]) };
        let plan = protocol::Plan { cwd, session: request.session.clone(), prompts };
        let requests = requests::Requests::live(request.permissions.clone(), fs_mode);
        let acp = if warm {
            protocol::Acp::session(self.parser_name(), plan, requests)
        } else {
            protocol::Acp::live(self.parser_name(), plan, requests)
        };
        let debug_logs = if self.flavor == Flavor::Qwen { qwen::debug_log_dir(&spec) } else { None };
        let acp = acp.with_mcp_servers(portable::acp_servers(&request.portable)).with_debug_logs(debug_logs);
        Ok((spec, if self.flavor == Flavor::Gemini { acp.history_trails_load() } else { acp }))
    }

    fn parser_name(&self) -> &'static str {
        match self.flavor {
            Flavor::Gemini => "gemini.acp",
            Flavor::Qwen => "qwen.acp",
            Flavor::Generic => "acp",
        }
    }
}
