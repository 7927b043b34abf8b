//! The agents this tool knows, found by the one discovery the library offers
//! ([`agent_api_builtin`]): `doctor`, `run` and a program all get the same answer.

use std::path::PathBuf;
use std::sync::Arc;

use agent_api::kit::detect::BackendProbe;
use agent_api::kit::replay::Replay;
use agent_api::{AgentBackend, AgentKind, Gateway};

/// The CLI the test bench installed (`bash tests/bench/install-clis.sh`): under `$AGENT_API_CLI_DIR`
/// (default `~/.cache/agent_api/clis`), newest install first. It is not an installation (nothing
/// finds it by itself: it is pinned for tests against a loopback model server, not configured for
/// real use); `doctor` mentions it beside an agent that is not installed.
pub(crate) fn locate_bench(probe: &BackendProbe) -> Option<PathBuf> {
    let root = std::env::var_os("AGENT_API_CLI_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/agent_api/clis"))
        })?;
    let mut installs: Vec<_> = std::fs::read_dir(&root)
        .ok()?
        .filter_map(Result::ok)
        .collect();
    installs.sort_by_key(|e| std::cmp::Reverse(e.metadata().and_then(|m| m.modified()).ok()));
    installs
        .into_iter()
        .map(|e| e.path().join("node_modules/.bin").join(probe.executable))
        .find(|exe| exe.is_file())
}

/// A backend for `kind`: the installed CLI where discovery finds one, else one that runs the
/// executable's bare name (and so fails with a typed "not found" when it runs).
pub(crate) fn backend(kind: &str) -> Result<Arc<dyn AgentBackend>, String> {
    replayer(kind).map(|backend| backend as Arc<dyn AgentBackend>)
}

/// The backend of [`backend`], as the [`Replay`] every built-in backend is (`agent-api replay`).
pub(crate) fn replayer(kind: &str) -> Result<Arc<dyn Replay>, String> {
    let unknown = || {
        let known: Vec<_> = agent_api_builtin::kinds()
            .iter()
            .map(|k| agent_api::display::line(k.as_str(), 64))
            .collect();
        format!(
            "unknown agent kind `{}`; known: {}",
            agent_api::display::line(kind, 64),
            known.join(", ")
        )
    };
    let kind = AgentKind::new(kind).map_err(|_| unknown())?;
    agent_api_builtin::replayer(&kind).map_err(|_| unknown())
}

/// A gateway holding every known backend (without probing versions: a run should not wait for
/// every CLI's `--version`).
pub(crate) fn gateway() -> Gateway {
    agent_api_builtin::gateway()
}

/// The agent `run` uses without `--agent`: the first CLI discovery finds, else the built-in one.
pub(crate) fn default_kind() -> (String, Option<PathBuf>) {
    let (kind, path) = agent_api_builtin::default_kind();
    (kind.to_string(), path)
}

/// Parses a kind given on the command line.
pub(crate) fn parse_kind(kind: &str) -> Result<AgentKind, String> {
    AgentKind::new(kind).map_err(|e| agent_api::display::line(&e.to_string(), 200))
}
