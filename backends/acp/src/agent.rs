//! What an agent built on this client (each in its own crate) tells it
//! about its CLI ([`AgentCli`]), and what the client builds from that: the argv of an ACP run
//! and its converter. The agent's crate keeps everything else of its own (its options, its other
//! interfaces, its store, its tools).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use agent_api::kit::home::HomeLayout;
use agent_api::kit::CommandSpec;
use agent_api::{AgentError, AgentKind, RunRequest};

use crate::protocol::{prompt_blocks, Acp, Plan, StderrReader};
use crate::requests::{FsMode, Requests};
use crate::{AcpConfig, ExitPlan};

/// Variables every agent's launch passes on (`spec/launchers.md`): its proxy and certificates.
const PROXY: &[&str] = &[
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS",
];

/// An agent CLI with an ACP interface, as its crate declares it. Build it with
/// [`AgentCli::new`] and the setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AgentCli {
    /// The agent kind.
    pub kind: AgentKind,
    /// The program's name, looked up on `PATH` when the config names no binary.
    pub program: &'static str,
    /// The flags that start its ACP interface.
    pub acp_flags: &'static [&'static str],
    /// The converter's name (`<agent>.acp`).
    pub parser: &'static str,
    /// Where it keeps its config, state and login (per-run homes).
    pub home: Option<HomeLayout>,
    /// The variables it reads for its endpoint, credentials and config: what a launcher other
    /// than Local passes on from the caller's environment.
    pub env: &'static [&'static str],
    /// Its state directories under `HOME`, writable in a sandbox.
    pub home_state: &'static [&'static str],
    /// A missing file it reads over `fs/read_text_file` reads as empty (it creates files by
    /// reading them first).
    pub empty_on_missing: bool,
    /// It answers `session/load` before it has replayed the history ([`Acp::history_trails_load`]).
    pub history_trails_load: bool,
    /// How it asks to leave plan mode over `session/request_permission` (plan mode's exit
    /// question, [`ExitPlan`]).
    pub exit_plan: Option<ExitPlan>,
    /// What its stderr and debug log say (its retries), read by its crate's reader.
    pub stderr_reader: Option<StderrReader>,
}

impl AgentCli {
    /// The agent `kind`, run as `program` with `acp_flags`, its converter named `parser`.
    pub const fn new(
        kind: AgentKind,
        program: &'static str,
        acp_flags: &'static [&'static str],
        parser: &'static str,
    ) -> Self {
        Self {
            kind,
            program,
            acp_flags,
            parser,
            home: None,
            env: &[],
            home_state: &[],
            empty_on_missing: false,
            history_trails_load: false,
            exit_plan: None,
            stderr_reader: None,
        }
    }

    /// Sets where it keeps its config, state and login.
    pub const fn home(mut self, home: HomeLayout) -> Self {
        self.home = Some(home);
        self
    }

    /// Sets the variables it reads and its state directories under `HOME`.
    pub const fn environment(
        mut self,
        env: &'static [&'static str],
        home_state: &'static [&'static str],
    ) -> Self {
        self.env = env;
        self.home_state = home_state;
        self
    }

    /// A missing file reads as empty over `fs/read_text_file`.
    pub const fn empty_on_missing(mut self) -> Self {
        self.empty_on_missing = true;
        self
    }

    /// It answers `session/load` before replaying the history.
    pub const fn history_trails_load(mut self) -> Self {
        self.history_trails_load = true;
        self
    }

    /// It asks to leave plan mode as `exit_plan` says.
    pub const fn exit_plan(mut self, exit_plan: ExitPlan) -> Self {
        self.exit_plan = Some(exit_plan);
        self
    }

    /// Its stderr and debug-log lines are read by `reader` (its retry notices).
    pub const fn reads_stderr(mut self, reader: StderrReader) -> Self {
        self.stderr_reader = Some(reader);
        self
    }

    /// The converter of a recording of its ACP interface.
    pub fn replay(&self) -> Acp {
        Acp::replay(self.parser)
            .with_exit_plan(self.exit_plan)
            .with_stderr_reader(self.stderr_reader)
    }

    /// Its command line: `config`'s binary (else [`AgentCli::program`]) and arguments, then
    /// `args`; `config`'s and the request's environment, the launcher's variables, the run's
    /// directory and the home the request asks for. Stdin is open.
    pub fn command(
        &self,
        config: &AcpConfig,
        args: Vec<String>,
        request: &RunRequest,
        cwd: &Path,
    ) -> Result<CommandSpec, AgentError> {
        let program = config.binary.clone().unwrap_or_else(|| self.program.into());
        let spec = launch_spec(
            config,
            program,
            args,
            request,
            cwd,
            self.env,
            self.home_state,
        );
        match &self.home {
            Some(home) => home.apply(spec, &request.home),
            None => Ok(spec),
        }
    }

    /// The command line of its ACP interface: [`AgentCli::acp_flags`], the run's model (`-m`),
    /// its mode ([`approval_mode_args`]), then `args` (its flags for the portable options).
    pub fn acp_command(
        &self,
        config: &AcpConfig,
        args: Vec<String>,
        request: &RunRequest,
        cwd: &Path,
    ) -> Result<CommandSpec, AgentError> {
        let mut all: Vec<String> = self.acp_flags.iter().map(|f| f.to_string()).collect();
        if let Some(model) = &request.model {
            all.extend(["-m".to_string(), model.clone()]);
        }
        all.extend(approval_mode_args(request));
        all.extend(args);
        self.command(config, all, request, cwd)
    }

    /// The converter of an ACP run of `request` in `cwd` (its prompt queued), or of a warm
    /// session (`warm`: no prompt until the first turn); `serve_fs` serves `fs/*` confined to
    /// `cwd`; `debug_logs` is where the agent writes a log per session, when it does.
    pub fn client(
        &self,
        request: &RunRequest,
        cwd: PathBuf,
        serve_fs: bool,
        debug_logs: Option<PathBuf>,
        warm: bool,
    ) -> Result<Acp, AgentError> {
        let acp = client(
            self.parser,
            request,
            cwd,
            serve_fs,
            self.empty_on_missing,
            warm,
        )?
        .with_debug_logs(debug_logs)
        .with_stderr_reader(self.stderr_reader)
        .with_exit_plan(self.exit_plan);
        Ok(if self.history_trails_load {
            acp.history_trails_load()
        } else {
            acp
        })
    }
}

/// A command line: `program`, `config`'s arguments then `args`, `config`'s and the request's
/// environment, the launcher's variables (`env`, the proxy's) and state (`home_state`), in `cwd`,
/// stdin open.
pub(crate) fn launch_spec(
    config: &AcpConfig,
    program: PathBuf,
    args: Vec<String>,
    request: &RunRequest,
    cwd: &Path,
    env: &[&str],
    home_state: &[&str],
) -> CommandSpec {
    let mut spec = CommandSpec::new(program)
        .args(config.args.iter().cloned())
        .args(args);
    for (k, v) in &config.env {
        spec = spec.env(k, v);
    }
    let mut spec = spec
        .for_request(request)
        .reads_env(env)
        .reads_env(PROXY)
        .home_state(home_state.iter().copied())
        .cwd(cwd);
    spec.stdin = true;
    spec
}

/// The converter of an ACP run or warm session, named `parser` (see [`AgentCli::client`]).
pub(crate) fn client(
    parser: &'static str,
    request: &RunRequest,
    cwd: PathBuf,
    serve_fs: bool,
    empty_on_missing: bool,
    warm: bool,
) -> Result<Acp, AgentError> {
    if request.new_session_id.is_some() {
        // `session/new` answers with the agent's own id.
        return Err(AgentError::InvalidRequest {
            reason: "ACP names its own sessions: a caller-chosen session id needs an interface of the agent's own that takes one"
                .into(),
        });
    }
    let fs_mode = if serve_fs {
        FsMode::Confined {
            fs: crate::fs::ConfinedFs::new(&cwd)?,
            empty_on_missing,
        }
    } else {
        FsMode::Off
    };
    let prompts = if warm {
        VecDeque::new()
    } else {
        VecDeque::from([prompt_blocks(&request.prompt)?])
    };
    let plan = Plan {
        cwd,
        session: request.session.clone(),
        prompts,
    };
    let mut requests = Requests::live(request.permissions.clone(), fs_mode);
    // Plan mode's policy: what the agent still asks to write or run there is denied.
    if let Some(mode) = &request.mode {
        requests.set_mode(mode);
    }
    let acp = if warm {
        Acp::session(parser, plan, requests)
    } else {
        Acp::live(parser, plan, requests)
    };
    Ok(acp.with_mcp_servers(crate::portable::acp_servers(&request.portable)))
}

/// The run's working directory, absolute: the request's, else the config's, else this process's.
pub fn run_dir(config: &AcpConfig, request: &RunRequest) -> PathBuf {
    crate::options::absolute(
        request
            .working_dir
            .as_deref()
            .or(config.working_dir.as_deref())
            .unwrap_or_else(|| Path::new(".")),
    )
}

/// Only ACP carries images and attachments: an agent's other interfaces refuse a prompt with
/// either before spawn.
pub fn text_only(kind: &AgentKind, request: &RunRequest) -> Result<(), AgentError> {
    use agent_api::capabilities as caps;
    let needs = [
        (!request.prompt.images.is_empty(), caps::IMAGES),
        (
            !request.prompt.attachments.is_empty(),
            caps::FILE_ATTACHMENTS,
        ),
    ];
    match needs.into_iter().find(|(needed, _)| *needed) {
        Some((_, capability)) => Err(AgentError::UnsupportedCapability {
            kind: kind.to_string(),
            capability: capability.to_string(),
        }),
        None => Ok(()),
    }
}

/// `--approval-mode MODE` for the request's mode (none for the default), for the agents whose
/// CLIs take it so on every interface. The mode was checked against the agent's list.
pub fn approval_mode_args(request: &RunRequest) -> Vec<String> {
    match request
        .mode
        .as_ref()
        .filter(|m| **m != agent_api::request::AgentMode::Default)
    {
        Some(mode) => vec!["--approval-mode".into(), mode.as_str().into()],
        None => Vec::new(),
    }
}
