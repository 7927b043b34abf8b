//! The bench's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while running the bench: starting the model server, finding a CLI,
/// preparing a sandbox, running or recording a CLI.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A pinned CLI is not installed where the bench looks for it.
    #[error(
        "{cli} is not installed under {searched}: run `bash tests/bench/install-clis.sh` \
         (set AGENT_API_E2E=skip to skip the end-to-end tests instead)"
    )]
    CliNotInstalled {
        /// The CLI's name (`claude_code`, `codex`, ...).
        cli: &'static str,
        /// Where the bench looked.
        searched: String,
    },
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What the bench was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// JSON could not be read or written.
    #[error("{context}: {source}")]
    Json {
        /// What the bench was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A child process did not finish in time; its whole process group was killed.
    #[error("{what} did not finish within {seconds} s (process group killed)")]
    Timeout {
        /// The command that ran.
        what: String,
        /// The limit that was exceeded.
        seconds: u64,
    },
    /// A name (CLI, interface, scenario) is not known to the bench.
    #[error("unknown {kind} `{name}`; known: {known}")]
    Unknown {
        /// What kind of name it was.
        kind: &'static str,
        /// The name given.
        name: String,
        /// The names that would have been accepted.
        known: String,
    },
    /// A two-way driver saw the CLI behave in a way it cannot go on from.
    #[error("protocol: {0}")]
    Protocol(String),
    /// A path could not be used (not UTF-8, not absolute, ...).
    #[error("bad path {path}: {reason}")]
    BadPath {
        /// The path.
        path: PathBuf,
        /// Why it cannot be used.
        reason: &'static str,
    },
}

impl BenchError {
    /// Wraps an I/O error with what the bench was doing.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        BenchError::Io {
            context: context.into(),
            source,
        }
    }

    /// Wraps a JSON error with what the bench was doing.
    pub fn json(context: impl Into<String>, source: serde_json::Error) -> Self {
        BenchError::Json {
            context: context.into(),
            source,
        }
    }
}
