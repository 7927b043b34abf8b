//! The session stores of Gemini CLI and Qwen Code (`agent_api.history.*`; `spec/history.md`).
//!
//! - Gemini CLI 0.61.0 keeps each chat as `~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl`
//!   ([`gemini`]); `<project>/.project_root` names the working directory.
//! - Qwen Code 0.15.10 keeps each chat as `~/.qwen/projects/<cwd with / as ->/chats/<id>.jsonl`
//!   ([`qwen`]).
//!
//! Both are found from the backend's environment: its config's `env`, then this process's.

pub mod gemini;
pub mod qwen;

use std::path::PathBuf;
use std::sync::Arc;

use agent_api::history::SessionStore;

use crate::{AcpConfig, Flavor};

/// `$HOME/<dir>` as the CLI would see it.
fn home_dir(config: &AcpConfig, dir: &str) -> Option<PathBuf> {
    let home = config.env.get("HOME").cloned().or_else(|| std::env::var("HOME").ok()).filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(dir))
}

/// The store of a flavor's CLI (none for a generic ACP agent).
pub(crate) fn store(flavor: Flavor, config: &AcpConfig) -> Option<Arc<dyn SessionStore>> {
    match flavor {
        Flavor::Gemini => Some(Arc::new(gemini::GeminiSessionStore::new(home_dir(config, ".gemini")?))),
        Flavor::Qwen => Some(Arc::new(qwen::QwenSessionStore::new(home_dir(config, ".qwen")?))),
        Flavor::Generic => None,
    }
}
