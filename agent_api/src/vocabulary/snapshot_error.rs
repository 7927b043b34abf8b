//! [`SnapshotError`]: why a session snapshot could not be read, taken or restored (its own module,
//! below [`crate::AgentError`], which holds it).

/// Why a snapshot could not be read, taken or restored. The session then continues by replay,
/// flagged, never by a silent fresh start.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The snapshot is larger than the bound.
    #[error("the snapshot is {bytes} bytes, over the {bound}-byte bound")]
    TooLarge {
        /// Its size, in bytes.
        bytes: u64,
        /// The bound, in bytes.
        bound: u64,
    },
    /// The bytes are not a snapshot (cut short, damaged, or something else).
    #[error("the snapshot is corrupt: {reason}")]
    Corrupt {
        /// What is wrong, in words (never the content).
        reason: String,
    },
    /// The snapshot was written by a format this build does not read.
    #[error("the snapshot has format version {found}; this build reads version {supported}")]
    UnsupportedVersion {
        /// The snapshot's version.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// The snapshot is another agent's.
    #[error("the snapshot is `{found}`'s session, not `{expected}`'s")]
    WrongAgent {
        /// The agent it was opened for.
        expected: String,
        /// The agent it belongs to.
        found: String,
    },
    /// A name in the snapshot (a file's path, its directory, the session id) is refused.
    #[error("the snapshot names `{name}`, which is refused: {reason}")]
    UnsafeName {
        /// The name, cut to 128 bytes.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// A file of the session could not be read or written in the home (a link out of it, a file
    /// that is not regular, a file-system error).
    #[error("the session file `{path}` could not be {action}: {reason}")]
    File {
        /// The file's path below its directory.
        path: String,
        /// `read` or `restored`.
        action: &'static str,
        /// Why, as [`crate::kit::files::FileRefusal`] says it.
        reason: String,
        /// Whether it was refused as a way out of the home (a link, `..`, a hard link).
        escape: bool,
    },
    /// The session's native files are not in the home (nothing to export).
    #[error("no file of session `{id}` is in this home")]
    Missing {
        /// The native session id.
        id: String,
    },
    /// The snapshot says the session continues by replay: it holds no native state.
    #[error("the snapshot holds no native state ({reason}); the session continues by replay")]
    ReplayOnly {
        /// Why, as the snapshot says.
        reason: String,
    },
}

impl SnapshotError {
    /// A refused name, cut to 128 bytes.
    pub(crate) fn unsafe_name(name: &str, reason: &'static str) -> Self {
        SnapshotError::UnsafeName {
            name: crate::guards::bounds::utf8_prefix(name, 128).to_string(),
            reason,
        }
    }
}
