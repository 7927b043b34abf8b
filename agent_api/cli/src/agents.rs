//! The agents this tool knows, and where their CLIs are installed.

use std::path::PathBuf;
use std::sync::Arc;

use agent_api::{AgentBackend, AgentKind, Gateway};

/// A supported agent CLI.
pub struct CliAgent {
    /// Its agent kind.
    pub kind: &'static str,
    /// Its executable's name.
    pub executable: &'static str,
    /// Versions its backend is tested against.
    pub supported_versions: &'static [&'static str],
}

/// Every supported agent CLI, in the order `run` prefers them.
pub const CLI_AGENTS: &[CliAgent] = &[
    CliAgent { kind: "claude_code", executable: "claude", supported_versions: agent_api_claude_code::SUPPORTED_VERSIONS },
    CliAgent { kind: "codex", executable: "codex", supported_versions: agent_api_codex::SUPPORTED_VERSIONS },
    CliAgent { kind: "gemini", executable: "gemini", supported_versions: agent_api_acp::SUPPORTED_VERSIONS },
];

/// The CLI a user installed: `$AGENT_API_<KIND>_BIN`, else the executable on `PATH`.
pub fn locate_installed(agent: &CliAgent) -> Option<PathBuf> {
    let var = format!("AGENT_API_{}_BIN", agent.kind.to_uppercase());
    if let Some(path) = std::env::var_os(&var).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    agent_api::kit::process::resolve_program(std::path::Path::new(agent.executable))
}

/// The CLI the test bench installed (`bash tests/bench/install-clis.sh`): under `$AGENT_API_CLI_DIR`
/// (default `~/.cache/agent_api/clis`), newest install first. `run` never picks these by itself: they
/// are pinned for tests against a loopback model server, not configured for real use.
pub fn locate_bench(agent: &CliAgent) -> Option<PathBuf> {
    let root = std::env::var_os("AGENT_API_CLI_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/agent_api/clis")))?;
    let mut installs: Vec<_> = std::fs::read_dir(&root).ok()?.filter_map(Result::ok).collect();
    installs.sort_by_key(|e| std::cmp::Reverse(e.metadata().and_then(|m| m.modified()).ok()));
    installs.into_iter().map(|e| e.path().join("node_modules/.bin").join(agent.executable)).find(|exe| exe.is_file())
}

/// A backend for `kind`, running the user's installed CLI (`locate_installed`) where it has one.
pub fn backend(kind: &str) -> Result<Arc<dyn AgentBackend>, String> {
    let binary = |kind: &str| CLI_AGENTS.iter().find(|a| a.kind == kind).and_then(locate_installed);
    match kind {
        "scripted" => Ok(Arc::new(agent_api_scripted::ScriptedBackend::new())),
        "claude_code" => {
            let mut config = agent_api_claude_code::ClaudeCodeConfig::default();
            if let Some(path) = binary(kind) {
                config = config.with_binary(path);
            }
            Ok(Arc::new(agent_api_claude_code::ClaudeCodeBackend::new(config)))
        }
        "codex" => {
            let config = binary(kind).map(agent_api_codex::CodexConfig::with_binary).unwrap_or_default();
            Ok(Arc::new(agent_api_codex::CodexBackend::new(config)))
        }
        "gemini" => {
            Ok(Arc::new(agent_api_acp::AcpBackend::gemini(binary(kind).map(agent_api_acp::AcpConfig::with_binary).unwrap_or_default())))
        }
        "acp" => Ok(Arc::new(agent_api_acp::AcpBackend::generic(agent_api_acp::AcpConfig::default()))),
        other => Err(format!("unknown agent kind `{other}`; known: {}", known_kinds().join(", "))),
    }
}

/// Every kind this tool can build a backend for.
pub fn known_kinds() -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = CLI_AGENTS.iter().map(|a| a.kind).collect();
    kinds.extend(["acp", "scripted"]);
    kinds
}

/// A gateway holding every known backend.
pub fn gateway() -> Gateway {
    let mut gateway = Gateway::new();
    for kind in known_kinds() {
        let backend = backend(kind).expect("known kinds build");
        gateway.register(backend).expect("kinds are unique");
    }
    gateway
}

/// The agent `run` uses without `--agent`: the first supported CLI installed, else the scripted agent.
pub fn default_kind() -> (&'static str, Option<PathBuf>) {
    CLI_AGENTS.iter().find_map(|a| locate_installed(a).map(|path| (a.kind, Some(path)))).unwrap_or(("scripted", None))
}

/// Parses a kind given on the command line.
pub fn parse_kind(kind: &str) -> Result<AgentKind, String> {
    AgentKind::new(kind).map_err(|e| e.to_string())
}
