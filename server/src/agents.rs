//! The agents endpoints: what each backend is, whether its CLI is installed, its modes.

use agent_api::capabilities as caps;
use agent_api::AgentKind;
use axum::http::StatusCode;

use crate::error::ApiError;
use crate::state::Server;
use crate::wire::{AgentCapabilities, AgentInfo, AgentModeInfo, AgentModesResponse, DEFAULT_MODE};

/// The reference's booleans from a backend's capability ids.
pub(crate) fn capabilities(set: &agent_api::CapabilitySet) -> AgentCapabilities {
    let has = |id: &str| set.contains(id);
    AgentCapabilities {
        // Every backend advertising modes lists `plan` among them (`agentMode: "plan"`).
        plan_mode: has(caps::MODES),
        permissions: has(caps::PERMISSIONS),
        questions: has(caps::QUESTIONS),
        tool_calls: has(caps::TOOL_CALLS),
        tool_results: has(caps::TOOL_RESULTS),
        text_messages: has(caps::TEXT_MESSAGES),
        images: has(caps::IMAGES),
        file_attachments: has(caps::FILE_ATTACHMENTS),
        session_lifecycle: has(caps::SESSION_LIFECYCLE),
        error_events: has(caps::ERROR_EVENTS),
        reasoning: has(caps::REASONING),
        // The transcript gives every agent status items (turn started, turn completed, …) and an
        // `item.started` for every item (a synthetic one where the agent sends none).
        status: true,
        command_execution: has(caps::COMMAND_EXECUTION),
        file_changes: has(caps::FILE_CHANGES),
        mcp_tools: has(caps::MCP_TOOLS),
        streaming_deltas: has(caps::STREAMING_DELTAS),
        item_started: true,
        shared_process: has(caps::SESSION_WARM),
    }
}

/// Every agent of the gateway, with its CLI where a probe finds one (probed side by side).
pub(crate) async fn list(server: &Server) -> Vec<AgentInfo> {
    let gateway = &server.inner.gateway;
    let probes = &server.inner.probes;
    let found = futures::future::join_all(gateway.kinds().into_iter().map(|kind| async move {
        let probe = probes.iter().find(|p| p.kind == kind);
        let installed = match probe {
            Some(probe) => probe.detect().await,
            None => None,
        };
        let set = gateway.capabilities(&kind).unwrap_or_default();
        let mut ids: Vec<String> = set.iter().map(ToString::to_string).collect();
        ids.sort();
        let needs = gateway
            .backend(&kind)
            .ok()
            .and_then(|backend| backend.missing_option(&server.inner.defaults));
        let found = probe.is_none() || installed.is_some();
        let reason = match (needs, found) {
            (Some(option), _) => Some(needs_reason(server, option)),
            (None, false) => probe.map(|p| {
                format!(
                    "`{}` is not on this server's PATH (nor named in {})",
                    p.executable,
                    p.binary_var()
                )
            }),
            (None, true) => None,
        };
        AgentInfo {
            id: kind.to_string(),
            // An agent with no probe is built in (needs no CLI) or configured by request;
            // one whose sessions lack an option it needs runs nothing as configured.
            installed: found && needs.is_none(),
            needs_option: needs.map(Into::into),
            reason,
            version: installed.as_ref().and_then(|i| i.version.clone()),
            path: installed
                .as_ref()
                .map(|i| i.binary.to_string_lossy().into_owned()),
            capabilities: capabilities(&set),
            server_status: None,
            capability_ids: ids,
        }
    }))
    .await;
    found
}

/// Why an agent needing `option` cannot run here, and how to give it.
fn needs_reason(server: &Server, option: &str) -> String {
    let clients_may = server
        .inner
        .config
        .client_options
        .iter()
        .any(|o| o == "*" || o == option);
    let how = if clients_may {
        "name it in the `options` of each session's creation (this server lets clients set it)"
    } else {
        "this server does not let clients set it either: its operator can (`agent-api serve --client-option KEY`), then name it in each session's `options`"
    };
    format!("it needs `{option}`, which this server's session defaults do not set: {how}")
}

/// An agent's modes: `build` (its default), then those its backend lists (`plan`, its own).
pub(crate) fn modes(listed: &[agent_api::request::ModeInfo]) -> AgentModesResponse {
    let default = AgentModeInfo {
        id: DEFAULT_MODE.into(),
        name: "Build".into(),
        description:
            "The agent's own default mode: it works on the task with its tools; the session's permission mode decides what it may do."
                .into(),
    };
    let listed = listed.iter().map(|m| AgentModeInfo {
        id: m.id.into(),
        name: title(m.id),
        description: m.description.into(),
    });
    AgentModesResponse {
        modes: std::iter::once(default).chain(listed).collect(),
    }
}

/// A mode's id as a name: its first letter capitalised (`plan` → `Plan`).
fn title(id: &str) -> String {
    let mut chars = id.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Installs an agent's CLI: there is nothing to do when it is installed; this server installs
/// none itself, and says how to.
pub(crate) async fn install(
    server: &Server,
    kind: &AgentKind,
    reinstall: bool,
) -> Result<(), ApiError> {
    let Some(probe) = server.inner.probes.iter().find(|p| &p.kind == kind) else {
        return Ok(());
    };
    if !reinstall && probe.locate().is_some() {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::BAD_REQUEST,
        "install_failed",
        format!(
            "agent-api serve installs no agent CLI{}: install `{}` on this machine and put it on PATH, or name it in {}",
            if reinstall { " (nor reinstalls one)" } else { "" },
            probe.executable,
            probe.binary_var()
        ),
    ))
}
