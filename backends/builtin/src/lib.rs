//! Every built-in backend in one dependency: which agent CLIs are installed (one call,
//! [`discover`]), a backend for any built-in kind ([`backend`]), and a gateway holding them all
//! ([`gateway`]). `agent-api doctor` and `agent-api run` answer from these same functions, so
//! the tool and a program find the same agents.
//!
//! A CLI is found where `AGENT_API_<KIND>_BIN` names it, else as its executable on `PATH`
//! ([`agent_api::kit::detect::BackendProbe::find`]); a test bench's pinned copy is not an installation.
//!
//! ```no_run
//! # async fn demo() {
//! for cli in agent_api_builtin::discover().await {
//!     let version = cli.version.as_deref().unwrap_or("unknown");
//!     println!("{} {version} at {} ({})", cli.kind, cli.binary.display(), cli.found_by);
//! }
//! # }
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use agent_api::kit::detect::{BackendProbe, FoundBy, Installed};
use agent_api::kit::replay::Replay;
use agent_api::{AgentBackend, AgentError, AgentKind, Gateway};

/// The kind of the built-in scripted agent, always available.
pub const SCRIPTED: AgentKind = agent_api_scripted::KIND;
/// The kind of any Agent Client Protocol agent (its command line comes with the request).
pub const ACP: AgentKind = AgentKind::from_static("acp");

/// The probe of every supported agent CLI, in the order `agent-api run` prefers them.
pub fn probes() -> [BackendProbe; 6] {
    [
        agent_api_claude_code::probe(),
        agent_api_codex::probe(),
        agent_api_opencode::probe(),
        agent_api_gemini::probe(),
        agent_api_qwen::probe(),
        agent_api_amp::probe(),
    ]
}

/// Every supported agent CLI found on this machine, with where and why, without running any
/// (what a program that starts an agent at once needs); the same list, in the same order, as
/// [`discover`].
pub fn locate() -> Vec<(AgentKind, PathBuf, FoundBy)> {
    probes()
        .into_iter()
        .filter_map(|probe| probe.find().map(|(path, by)| (probe.kind, path, by)))
        .collect()
}

/// Every supported agent CLI installed on this machine, in the order of [`probes`]: its kind,
/// binary, version (`<binary> --version`), whether that version is one the backend is tested
/// against, and why that binary ([`FoundBy`]).
pub async fn discover() -> Vec<Installed> {
    let mut found = Vec::new();
    for probe in probes() {
        found.extend(probe.detect().await);
    }
    found
}

/// Every built-in kind: the CLIs of [`probes`], then `acp` and `scripted`.
pub fn kinds() -> Vec<AgentKind> {
    let mut kinds: Vec<AgentKind> = probes().into_iter().map(|p| p.kind).collect();
    kinds.extend([ACP, SCRIPTED]);
    kinds
}

/// A backend for a built-in `kind`: a CLI's runs its installed binary where discovery finds one,
/// else the executable's bare name (a run then fails with a typed `BinaryNotFound`).
pub fn backend(kind: &AgentKind) -> Result<Arc<dyn AgentBackend>, AgentError> {
    replayer(kind).map(|backend| backend as Arc<dyn AgentBackend>)
}

/// The backend of [`backend`], as the [`Replay`] it also is: every built-in backend replays its
/// agent's recordings (`agent-api replay`).
pub fn replayer(kind: &AgentKind) -> Result<Arc<dyn Replay>, AgentError> {
    if *kind == SCRIPTED {
        return Ok(Arc::new(agent_api_scripted::ScriptedBackend::new()));
    }
    if *kind == ACP {
        return Ok(Arc::new(agent_api_acp::AcpBackend::new(
            agent_api_acp::AcpConfig::default(),
        )));
    }
    let probe = probes()
        .into_iter()
        .find(|p| p.kind == *kind)
        .ok_or_else(|| AgentError::UnknownBackend {
            kind: kind.to_string(),
        })?;
    let binary = probe
        .locate()
        .unwrap_or_else(|| PathBuf::from(probe.executable));
    Ok((probe.build)(binary))
}

/// A gateway holding a backend for every built-in kind ([`backend`]), without running any CLI.
pub fn gateway() -> Gateway {
    let mut gateway = Gateway::new();
    for kind in kinds() {
        if let Ok(backend) = backend(&kind) {
            let _ = gateway.register(backend);
        }
    }
    gateway
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_backend_of_that_kind() {
        for kind in kinds() {
            assert_eq!(backend(&kind).unwrap().info().kind, kind);
        }
        assert!(matches!(
            backend(&AgentKind::from_static("nobody")),
            Err(AgentError::UnknownBackend { .. })
        ));
        assert_eq!(gateway().kinds().len(), kinds().len());
    }
}
