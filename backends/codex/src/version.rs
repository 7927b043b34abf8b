//! The Codex CLI versions the backend is tested with (`agent-api doctor` reads the installed one
//! through `agent_api::detect`).

/// codex-cli versions whose protocol the backend was written from and tested against.
pub const SUPPORTED_VERSIONS: &[&str] = &["0.169.0"];
