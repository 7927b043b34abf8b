//! A built-in scripted agent: no external binary, the same pipeline as every real backend.
//!
//! The agent runs as a task of this process and speaks a small native JSON-lines protocol of
//! its own over in-memory pipes (see [`wire`]); [`protocol::ScriptedProtocol`] converts that
//! protocol to the universal transcript exactly as a CLI backend converts its CLI's output.
//! It plays one of the [`Scenario`]s: streamed text, reasoning, a tool call and result, a
//! permission request that waits for the caller's answer, a question, an error.
//!
//! It is the default agent of `agent-api run` on a machine with no agent CLI installed, and the
//! backend the conformance suite uses to exercise every event type of both views.
//!
//! Defaults: the [`Scenario::Text`] scenario (a plain answer quoting the prompt, with no request
//! to the caller), each scenario's own pause between streamed words ([`Scenario::default_delay`]),
//! and the request's permission policy (`Ask` unless set). It remembers its sessions for as long as
//! the backend lives (or, where the run's environment names [`HOME_VAR`], as files in that home):
//! `SessionSelector::Resume` continues one (the answer says which turn it is), `Fork` copies one
//! under a new id, and an unknown id is [`AgentError::SessionNotFound`]. Its sessions move between
//! homes and backends as snapshots (`agent_api.session.snapshot`).
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use agent_api::{AgentBackend, RunRequest, SessionSelector};
//! let backend = agent_api_scripted::ScriptedBackend::new();
//! let first = backend.run(RunRequest::new("hello")).await.unwrap().collect_wrapper().await.1.unwrap();
//! assert_eq!(first.final_text.as_deref(), Some("You said: hello"));
//! let session = first.native_session_id.unwrap();
//! let again = RunRequest::new("again").with_session(SessionSelector::Resume(session.into()));
//! let second = backend.run(again).await.unwrap().collect_wrapper().await.1.unwrap();
//! assert_eq!(second.final_text.as_deref(), Some("You said: again (turn 2 of this session)"));
//! # });
//! ```

mod agent;
pub mod protocol;
mod scenario;
mod sessions;
pub mod wire;

use std::time::Duration;

use agent_api::capabilities as caps;
use agent_api::kit::caller_tools::client::McpClient;
use agent_api::kit::caller_tools::ToolServer;
use agent_api::kit::{start_run, start_session, RunSettings, Transport};
use agent_api::{
    AgentBackend, AgentError, AgentKind, BackendInfo, CapabilitySet, RunHandle, RunRequest,
    Session, SessionSelector,
};
use async_trait::async_trait;
use std::sync::LazyLock;

pub use scenario::Scenario;
pub use sessions::{outlive_this_process as sessions_outlive_this_process, HOME_VAR};

use std::path::Path;

use agent_api::kit::snapshot::{blocking, restore_file, SnapshotBuilder};
use agent_api::request::SessionRef;
use agent_api::snapshot::{SnapshotError, SnapshotFile, SnapshotImport};
use agent_api::SessionSnapshot;

/// The scripted agent's kind.
pub const KIND: AgentKind = AgentKind::from_static("scripted");

/// Extension key choosing the scenario (a string: see [`Scenario::from_name`]).
pub const EXT_SCENARIO: &str = "backend.scripted.scenario";
/// Extension key setting the pause between streamed chunks, in milliseconds.
pub const EXT_DELAY_MS: &str = "backend.scripted.delay_ms";

/// The scripted backend's own options (`backend.scripted.*`).
///
/// ```
/// use agent_api::RunRequest;
/// use agent_api_scripted::ScriptedOptions;
/// let request = RunRequest::new("hi").with_options(&ScriptedOptions::scenario("text").delay_ms(0));
/// assert_eq!(request.extensions["backend.scripted.scenario"], "text");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ScriptedOptions {
    /// The scenario to play (see [`Scenario::NAMES`]); [`Scenario::Text`] when absent.
    pub scenario: Option<String>,
    /// The pause between streamed chunks, in milliseconds; the scenario's own when absent.
    pub delay_ms: Option<u64>,
    /// How long exporting a session's snapshot takes, in milliseconds (none when absent): an
    /// agent whose export starts a CLI of its own, slow on a loaded machine.
    pub export_delay_ms: Option<u64>,
    /// Refuses every turn of a session opened to continue one (`SessionSelector::Resume`) with
    /// `AgentError::SessionNotFound`, the open itself taken: an agent that loads its session
    /// lazily, on the first turn, and fails to although its files are there (as an ACP agent's
    /// failing `session/load` does). Off when absent.
    pub refuse_load: Option<bool>,
}

impl ScriptedOptions {
    /// Options playing the scenario `name`.
    pub fn scenario(name: impl Into<String>) -> Self {
        Self {
            scenario: Some(name.into()),
            ..Self::default()
        }
    }

    /// Sets the pause between streamed chunks.
    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.delay_ms = Some(ms);
        self
    }
}

impl agent_api::request::BackendOptions for ScriptedOptions {
    const KIND: &'static str = "scripted";
}

/// What the backend is: the capabilities its tests prove, its options (both may be set by a
/// remote client: a scenario's name and a pause name nothing outside the process), how it takes
/// the portable ones, and its modes.
static INFO: LazyLock<BackendInfo> = LazyLock::new(|| {
    let own = CapabilitySet::from_ids([
        caps::RUN,
        caps::EVENTS,
        caps::EVENTS_LIVE,
        caps::CONTROL_CANCEL,
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
        caps::STREAMING_DELTAS,
        caps::USAGE,
        caps::MODEL_SELECTION,
        caps::SESSION_RESUME,
        caps::SESSION_FORK,
        caps::SESSION_WARM,
        caps::SESSION_RESUME_PER_TURN,
        caps::SESSION_MODE_SWITCH,
        caps::SESSION_SNAPSHOT,
        "backend.scripted.scenarios",
    ]);
    BackendInfo::new(KIND, own)
        .with_options::<ScriptedOptions>()
        .with_client_keys(agent_api::kit::options::extension_keys::<ScriptedOptions>())
        .with_option_mappings(MAPPINGS)
        .with_modes(MODES)
});

/// The scripted backend.
#[derive(Debug, Clone, Default)]
pub struct ScriptedBackend {
    sessions: sessions::Sessions,
}

impl ScriptedBackend {
    /// The backend.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl AgentBackend for ScriptedBackend {
    fn info(&self) -> &BackendInfo {
        &INFO
    }

    async fn run(&self, request: RunRequest) -> Result<RunHandle, AgentError> {
        self.validate(&request)?;
        let mut request = request.in_session_dir(None);
        let (tools, mcp) = caller_tools(&mut request).await?;
        let request = agent_api::kit::structured::ask_in_prompt(request);
        let (scenario, delay) = scenario_of(&request)?;
        let mut settings = RunSettings::for_request(KIND, &request, &self.info().capabilities);
        settings.hold(tools);
        let home = sessions::home_of(&request);
        let session = self.sessions.begin(
            &request.session,
            home.as_deref(),
            Some(&request.prompt.text),
        )?;
        let script = scenario.script(
            &request.prompt.text,
            request.model.as_deref(),
            &session,
            plans(&request),
        );
        let transport = Transport::in_process(settings.line_cap, move |pipes| {
            agent::play(script, delay, pipes, mcp)
        });
        let protocol = protocol::ScriptedProtocol::new(
            request.prompt.text.clone(),
            request.permissions.clone(),
        );
        Ok(start_run(settings, transport, Box::new(protocol)))
    }

    async fn export_snapshot(
        &self,
        request: &RunRequest,
        session: &SessionRef,
    ) -> Result<SessionSnapshot, AgentError> {
        self.export(request, session).await
    }

    async fn import_snapshot(
        &self,
        request: &RunRequest,
        snapshot: &SessionSnapshot,
    ) -> Result<SnapshotImport, AgentError> {
        self.import(request, snapshot).await
    }

    async fn open_session(&self, request: RunRequest) -> Result<Session, AgentError> {
        self.validate_session_template(&request)?;
        let mut request = request.in_session_dir(None);
        let (tools, mcp) = caller_tools(&mut request).await?;
        let (scenario, delay) = scenario_of(&request)?;
        let mut settings = RunSettings::for_request(KIND, &request, &self.info().capabilities);
        settings.hold(tools);
        // The first turn is taken now, so that an unknown session to resume is refused when the
        // session opens; every later turn continues it, as a resumed run would.
        let home = sessions::home_of(&request);
        let first = self
            .sessions
            .begin(&request.session, home.as_deref(), None)?;
        let refuse = request.options::<ScriptedOptions>()?.refuse_load == Some(true)
            && matches!(request.session, SessionSelector::Resume(_));
        let sessions = self.sessions.clone();
        let model = request.model.clone();
        let mut last: Option<sessions::SessionTurn> = None;
        let script_for = move |prompt: &str, plan: bool| {
            if refuse {
                return scenario::refused(&first.id, model.as_deref());
            }
            let turn = match &last {
                None => {
                    if let Err(e) = sessions.record(home.as_deref(), &first, prompt) {
                        tracing::warn!(error = %e, "the scripted agent could not record its turn");
                    }
                    first.clone()
                }
                Some(previous) => sessions.next_turn(home.as_deref(), &previous.id, prompt),
            };
            let script = scenario.script(prompt, model.as_deref(), &turn, plan);
            last = Some(turn);
            script
        };
        let plan = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(plans(&request)));
        let transport = Transport::in_process(settings.line_cap, move |pipes| {
            agent::serve(script_for, delay, pipes, mcp, plan)
        });
        let protocol = protocol::ScriptedProtocol::session(request.permissions.clone());
        Ok(start_session(settings, transport, Box::new(protocol)))
    }
}

impl ScriptedBackend {
    /// Exports the scripted agent's session file (see [`HOME_VAR`]).
    async fn export(
        &self,
        request: &RunRequest,
        session: &SessionRef,
    ) -> Result<SessionSnapshot, AgentError> {
        agent_api::snapshot::check_session_id(&session.id)?;
        let options: ScriptedOptions = request.options()?;
        if let Some(ms) = options.export_delay_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let stored = sessions::session_file(&session.id);
        let stored = stored.to_string_lossy().into_owned();
        match sessions::home_of(request) {
            Some(home) => {
                let session = session.clone();
                blocking(move || {
                    let mut builder = SnapshotBuilder::new(&session);
                    builder.add(HOME_VAR, &home, stored.as_ref(), &stored)?;
                    builder.finish()
                })
                .await
            }
            None => {
                let lines = self.sessions.lines(None, &session.id).ok_or_else(|| {
                    SnapshotError::Missing {
                        id: session.id.clone(),
                    }
                })?;
                let mut snapshot = SessionSnapshot::new(KIND, session.id.clone())
                    .in_working_dir(session.working_dir.clone());
                snapshot
                    .files
                    .push(SnapshotFile::new(HOME_VAR, stored, lines.into_bytes()));
                Ok(snapshot)
            }
        }
    }

    /// Restores the scripted agent's session file into the request's home (or memory).
    async fn import(
        &self,
        request: &RunRequest,
        snapshot: &SessionSnapshot,
    ) -> Result<SnapshotImport, AgentError> {
        snapshot.check_agent(&KIND)?;
        let stored = sessions::session_file(&snapshot.native_session_id);
        let file = snapshot
            .files
            .iter()
            .find(|f| f.root == HOME_VAR && Path::new(&f.path) == stored)
            .cloned()
            .ok_or_else(|| SnapshotError::Missing {
                id: snapshot.native_session_id.clone(),
            })?;
        if std::str::from_utf8(&file.bytes).is_err() {
            return Err(SnapshotError::Corrupt {
                reason: "the session file is not UTF-8".into(),
            }
            .into());
        }
        match sessions::home_of(request) {
            Some(home) => {
                blocking(move || {
                    let mut report = SnapshotImport::default();
                    restore_file(&home, &stored, &file, &mut report)?;
                    Ok(report)
                })
                .await
            }
            None => {
                let mut report = SnapshotImport::default();
                let shown = format!("{HOME_VAR}/{}", file.path);
                let text = String::from_utf8(file.bytes).unwrap_or_default();
                match self.sessions.lines(None, &snapshot.native_session_id) {
                    Some(held) if held == text => report.unchanged.push(shown),
                    Some(held) if held.len() > text.len() && held.starts_with(&text) => {
                        report.kept_newer.push(shown)
                    }
                    _ => {
                        self.sessions.set_memory(&snapshot.native_session_id, text);
                        report.written.push(shown);
                    }
                }
                Ok(report)
            }
        }
    }
}

impl agent_api::kit::replay::Replay for ScriptedBackend {
    fn replay_protocol(
        &self,
        format: agent_api::kit::replay::RecordingFormat,
    ) -> Result<Box<dyn agent_api::kit::Protocol>, AgentError> {
        let _ = format;
        Ok(Box::new(protocol::ScriptedProtocol::replaying()))
    }
}

/// What the scripted agent maps: structured output by the SDK, and its modes on its own wire.
const MAPPINGS: &[agent_api::kit::options::OptionMapping] = &[
    agent_api::kit::options::OptionMapping::new(
        caps::OUTPUT_SCHEMA,
        agent_api::kit::options::SDK_SCHEMA,
    ),
    agent_api::kit::options::OptionMapping::new(
        caps::MODES,
        "plan: no tool runs, the agent says what it would run and ends with the exit-plan question; a set_mode line on its wire (warm session)",
    ),
];

/// The modes the scripted agent offers besides its default: `plan` runs no tool (it says what it
/// would run) and ends each turn with the exit-plan question; approving it leaves plan mode.
/// A warm session switches between `default` and `plan` between turns.
pub const MODES: &[agent_api::request::ModeInfo] = &[agent_api::request::ModeInfo::new(
    "plan",
    r#"{"type":"set_mode","mode":"plan"}"#,
    "Plans: runs no tool, says what it would run, and ends asking to leave plan mode.",
)];

/// Whether `request` asks for plan mode.
fn plans(request: &RunRequest) -> bool {
    request.mode == Some(agent_api::request::AgentMode::Plan)
}

/// Serves the request's caller tools, and the client the scripted agent calls them with (over
/// HTTP with the run's secret, as any agent would).
async fn caller_tools(
    request: &mut RunRequest,
) -> Result<(Option<ToolServer>, Option<McpClient>), AgentError> {
    let Some(server) = agent_api::kit::caller_tools::attach(request).await? else {
        return Ok((None, None));
    };
    let client = McpClient::new(&server.url(), Some(&format!("Bearer {}", server.secret())))?;
    Ok((Some(server), Some(client)))
}

/// The scenario a request asks for, and its pause between streamed chunks.
fn scenario_of(request: &RunRequest) -> Result<(Scenario, Duration), AgentError> {
    let options: ScriptedOptions = request.options()?;
    let scenario = match &options.scenario {
        None => Scenario::Text,
        Some(name) => Scenario::from_name(name).ok_or_else(|| AgentError::InvalidExtension {
            key: EXT_SCENARIO.into(),
            reason: format!(
                "unknown scenario {name:?}; known: {}",
                Scenario::NAMES.join(", ")
            ),
        })?,
    };
    let delay = options
        .delay_ms
        .map_or_else(|| scenario.default_delay(), Duration::from_millis);
    Ok((scenario, delay))
}
