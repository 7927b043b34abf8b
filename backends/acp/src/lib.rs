//! `agent_api_acp`: the Agent Client Protocol client of `agent_api`, and the generic `acp` kind.
//!
//! One ACP client ([`Acp`]) over the kit's JSON-RPC helpers and driver serves every agent that
//! speaks ACP on stdio. The agents with a CLI of their own live in their own crates, on this
//! client (`agent_api_builtin` lists them). Each tells the client about its CLI with an
//! [`AgentCli`]; a backend is the kit's [`CliBackend`] over what its agent describes of itself
//! ([`CliAgent`]: its interfaces, options, store), its chats (store and snapshots) this crate's
//! [`ChatFiles`] over their [`ChatLayout`]. Whatever the client meets of one agent alone is set by that agent's
//! crate ([`AgentCli`]'s quirks) or, where the client reads it for any agent, listed there.
//! This crate's own kind:
//!
//! - **`acp`** ([`AcpBackend`]): any ACP agent, given as a command line
//!   ([`AcpOptions::command`], or [`AcpConfig::binary`] and [`AcpConfig::args`]).
//!
//! What the client does: `initialize` (protocol version 1, the file system advertised only when
//! served, no terminal), `session/new` with the run's working directory (or `session/load` to
//! resume, when the agent advertises `loadSession`), one `session/prompt` per turn ended by its
//! `stopReason` (the prompt's images go inline, base64, when the agent's `promptCapabilities.image`
//! says it takes them, else the turn fails with `UnsupportedCapability`; attachments go as
//! `resource_link`s to `file://` URIs, which every ACP agent takes); `session/update` kinds become
//! transcript items (the table below); permission requests go through `agent_api::kit::hitl` and
//! the decision selects the offered option by its kind; `fs/read_text_file` /
//! `fs/write_text_file` are served confined to the working directory ([`ConfinedFs`]);
//! `terminal/*` is not offered (the agents run their shell tools themselves); cancel sends
//! `session/cancel`, answers pending permissions `cancelled`, and the driver kills the process
//! group after the grace period.
//!
//! | native message | universal events |
//! |---|---|
//! | `initialize` answer, `session/new` answer | `session.started` (agent name, version, capabilities, modes) |
//! | `session/load` answer, then the replayed updates | `history` status items (warm sessions: at the start of the first turn) |
//! | `session/update` `user_message_chunk` / `agent_message_chunk` / `agent_thought_chunk` | user message, assistant text and reasoning items and their deltas |
//! | `session/update` `tool_call` / `tool_call_update` | tool call and tool result items (the facet's kind from the ACP tool kind, command, exit code, diffs as `file_ref`s) |
//! | `session/update` `plan`, `available_commands_update`, `current_mode_update`, others | status items |
//! | `session/request_permission` | `permission.requested`, then `.resolved` |
//! | `fs/read_text_file`, `fs/write_text_file` | served confined, no event of their own |
//! | `session/prompt` answer | the turn's end (its `stopReason` a status), usage |
//! | an error answer | one typed error (by the HTTP status its text names) |
//! | a stderr line naming a retry (as the agent's crate reads it; any ACP agent's: [`read_retries`]) | `api_retry` status, and a `rate_limited` notice for a limit |
//!
//! Sessions (`spec/run-protocol.md` §8): on ACP every kind opens a warm session, one live agent
//! and one ACP session whose turns are `session/prompt`s; a cancelled turn ends with the
//! `cancelled` stop reason and the session goes on. A session opened with a native id loads it
//! first (`session/load`) and writes the replayed history as `history` status items at the start
//! of its first turn.
//!
//! Message types are the published schema crate's (`agent-client-protocol-schema`), pinned to
//! 0.11.7: every 1.x release turns on serde_json's `preserve_order` feature, which Cargo would
//! then enable for every crate in the workspace (changing every map's key order and the cost of
//! every parsed line). The 0.11 schema is protocol version 1, which is what the agents of the
//! workspace speak (their recordings replay through it). The upstream
//! `agent-client-protocol` crate is not used: it brings its own runtime, and the kit's driver
//! already owns the process and its lines.

mod agent;
mod chat_snapshot;
mod chats;
mod errors;
mod fs;
mod options;
mod permission_options;
mod plan_exit;
mod portable;
mod protocol;
mod requests;
mod retries;
mod rpc;
mod updates;

use agent_api::capabilities as caps;
use agent_api::kit::async_trait;
use agent_api::kit::cli::{CliAgent, CliBackend, Launch, Turn};
use agent_api::kit::replay::RecordingFormat;
use agent_api::kit::Protocol;
use agent_api::{AgentError, AgentKind, BackendInfo, CapabilitySet, RunRequest};

pub use agent::{approval_mode_args, run_dir, text_only, AgentCli};
pub use chat_snapshot::ChatFiles;
pub use chats::{ChatLayout, ChatStore};
pub use errors::{explanation, status_in};
pub use fs::ConfinedFs;
pub use options::{absolute, AcpConfig, AcpOptions};
pub use plan_exit::ExitPlan;
pub use portable::{acp_servers, prepare, RunFiles, ACP_ATTACHMENTS, ACP_IMAGES};
pub use protocol::{prompt_blocks, session_log, Acp, Plan, StderrReader};
pub use requests::{FsMode, Requests};
pub use retries::{read_retries, Retry};

/// The generic kind.
pub const KIND: AgentKind = AgentKind::from_static("acp");

/// Capability id: the client serves `fs/read_text_file` and `fs/write_text_file`, confined to the
/// working directory.
pub const CAP_FS_CONFINED: &str = "backend.acp.fs_confined";
/// Capability id: a resumed ACP run or warm session loads its session with `session/load` (the
/// agent advertises `loadSession`), its replayed history marked as such.
pub const CAP_SESSION_LOAD: &str = "backend.acp.session_load";

/// The generic ACP backend (kind `acp`): any agent speaking ACP on stdio, given as a command line.
pub type AcpBackend = CliBackend<AnyAgent>;

/// The option naming the agent's command line ([`AcpOptions::command`]).
const COMMAND_OPTION: &str = "backend.acp.command";

/// Any ACP agent, as the shared backend runs it ([`CliAgent`]): its command line is the
/// caller's, so it has no program, flags, variables or home of its own; its stderr is read for
/// the family's retry lines ([`read_retries`]).
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct AnyAgent;

#[async_trait]
impl CliAgent for AnyAgent {
    type Config = AcpConfig;
    const PROGRAM: &'static str = "acp";

    fn info() -> BackendInfo {
        BackendInfo::new(KIND, capabilities())
            .with_options::<AcpOptions>()
            .with_option_mappings(portable::MAPPINGS)
    }

    /// Any ACP agent takes no output schema of its own: the SDK asks in the prompt.
    fn prepare(
        _config: &AcpConfig,
        request: RunRequest,
        _turn: Turn,
    ) -> Result<RunRequest, AgentError> {
        Ok(prepare(request, false))
    }

    /// The command line of [`AcpOptions::command`], else the config's binary. Any ACP agent's
    /// directories are unknown, so it never advertises homes and only ever inherits; its
    /// variables are the caller's to pass in `env`.
    async fn launch(
        config: &AcpConfig,
        request: &RunRequest,
        turn: Turn,
    ) -> Result<Launch, AgentError> {
        let options = request.options::<AcpOptions>()?;
        let (program, args) = match options.command.split_first() {
            Some((program, args)) => (program.into(), args.to_vec()),
            None => (
                config
                    .binary
                    .clone()
                    .ok_or_else(|| AgentError::InvalidRequest {
                        reason: format!("the acp backend needs a command line ({COMMAND_OPTION})"),
                    })?,
                Vec::new(),
            ),
        };
        let cwd = run_dir(config, request);
        let spec = agent::launch_spec(config, program, args, request, &cwd, &[], &[]);
        let warm = turn == Turn::Session;
        let acp = agent::client("acp", request, cwd, options.fs.unwrap_or(true), false, warm)?
            .with_stderr_reader(Some(read_retries));
        Ok(Launch::command(spec, acp))
    }

    /// Its command line: the request's [`AcpOptions::command`], else the config's binary. Options
    /// that do not parse need nothing more here: the run refuses them itself.
    fn missing_option(config: &AcpConfig, request: &RunRequest) -> Option<&'static str> {
        let named = request
            .options::<AcpOptions>()
            .map_or(true, |options| !options.command.is_empty());
        (!named && config.binary.is_none()).then_some(COMMAND_OPTION)
    }

    fn replay_protocol(format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError> {
        match format {
            RecordingFormat::Session => Ok(Box::new(
                Acp::replay("acp").with_stderr_reader(Some(read_retries)),
            )),
            other => Err(other.not_replayable_by("acp")),
        }
    }
}

/// What every agent on this client can do over ACP (recording replays, the fake ACP agent, and
/// end-to-end runs of the agents built on it); each adds its own.
pub fn base_capabilities() -> CapabilitySet {
    CapabilitySet::from_ids([
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
    ])
}

/// The `acp` kind's capabilities. Resuming needs the agent's `loadSession`; without it a resumed
/// run fails typed. Every run builds its argv through `CommandSpec::for_request`, so the
/// launchers apply.
pub fn capabilities() -> CapabilitySet {
    let mut set = base_capabilities();
    for id in [
        caps::REASONING,
        caps::SESSION_RESUME,
        CAP_SESSION_LOAD,
        caps::SESSION_MODE_SWITCH,
    ] {
        set.insert(id);
    }
    agent_api::kit::launch::with_launchers(set)
}
