//! The agents this tool knows, found through the library's discovery ([`agent_api::detect`]).

use std::path::PathBuf;
use std::sync::Arc;

use agent_api::detect::BackendProbe;
use agent_api::{AgentBackend, AgentKind, Gateway};

/// Every supported agent CLI, in the order `run` prefers them.
pub(crate) fn probes() -> [BackendProbe; 6] {
    [
        agent_api_claude_code::probe(),
        agent_api_codex::probe(),
        agent_api_opencode::probe(),
        agent_api_acp::gemini_probe(),
        agent_api_acp::qwen_probe(),
        agent_api_amp::probe(),
    ]
}

/// The CLI the test bench installed (`bash tests/bench/install-clis.sh`): under `$AGENT_API_CLI_DIR`
/// (default `~/.cache/agent_api/clis`), newest install first. `run` never picks these by itself: they
/// are pinned for tests against a loopback model server, not configured for real use.
pub(crate) fn locate_bench(probe: &BackendProbe) -> Option<PathBuf> {
    let root = std::env::var_os("AGENT_API_CLI_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/agent_api/clis")))?;
    let mut installs: Vec<_> = std::fs::read_dir(&root).ok()?.filter_map(Result::ok).collect();
    installs.sort_by_key(|e| std::cmp::Reverse(e.metadata().and_then(|m| m.modified()).ok()));
    installs.into_iter().map(|e| e.path().join("node_modules/.bin").join(probe.executable)).find(|exe| exe.is_file())
}

/// A backend for `kind`: the installed CLI where discovery finds one, else one that runs the
/// executable's bare name (and so fails with a typed "not found" when it runs).
pub(crate) fn backend(kind: &str) -> Result<Arc<dyn AgentBackend>, String> {
    if kind == "scripted" {
        return Ok(Arc::new(agent_api_scripted::ScriptedBackend::new()));
    }
    if kind == "acp" {
        return Ok(Arc::new(agent_api_acp::AcpBackend::generic(agent_api_acp::AcpConfig::default())));
    }
    let probe = probes().into_iter().find(|p| p.kind.as_str() == kind).ok_or_else(|| {
        let known: Vec<_> = known_kinds().iter().map(|k| agent_api::display::line(k, 64)).collect();
        format!("unknown agent kind `{}`; known: {}", agent_api::display::line(kind, 64), known.join(", "))
    })?;
    let binary = probe.locate().unwrap_or_else(|| PathBuf::from(probe.executable));
    Ok((probe.build)(binary))
}

/// Every kind this tool can build a backend for.
pub(crate) fn known_kinds() -> Vec<String> {
    let mut kinds: Vec<String> = probes().iter().map(|p| p.kind.to_string()).collect();
    kinds.extend(["acp".into(), "scripted".into()]);
    kinds
}

/// A gateway holding every known backend (without probing versions: a run should not wait for
/// every CLI's `--version`).
pub(crate) fn gateway() -> Gateway {
    let mut gateway = Gateway::new();
    for kind in known_kinds() {
        if let Ok(backend) = backend(&kind) {
            let _ = gateway.register(backend);
        }
    }
    gateway
}

/// The agent `run` uses without `--agent`: the first supported CLI installed, else the scripted agent.
pub(crate) fn default_kind() -> (String, Option<PathBuf>) {
    probes().iter().find_map(|p| p.locate().map(|path| (p.kind.to_string(), Some(path)))).unwrap_or(("scripted".into(), None))
}

/// Parses a kind given on the command line.
pub(crate) fn parse_kind(kind: &str) -> Result<AgentKind, String> {
    AgentKind::new(kind).map_err(|e| agent_api::display::line(&e.to_string(), 200))
}
