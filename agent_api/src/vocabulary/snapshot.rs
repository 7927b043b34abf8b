//! [`SessionSnapshot`]: an agent's own state for one native session, taken out of its home so the
//! session can go on in another home, on another machine (`spec/run-protocol.md` §8.4).
//!
//! A backend that advertises `agent_api.session.snapshot` exports the files its CLI keeps for one
//! session ([`AgentBackend::export_snapshot`](crate::AgentBackend::export_snapshot)) and imports
//! them into a home ([`AgentBackend::import_snapshot`](crate::AgentBackend::import_snapshot)),
//! re-keyed where the CLI keys its files by working directory. A caller takes one after a turn with
//! [`Session::snapshot`](crate::Session::snapshot), keeps its bytes anywhere
//! ([`SessionSnapshot::to_bytes`]), and opens the session again elsewhere with
//! [`RunRequest::with_snapshot`](crate::RunRequest::with_snapshot): the files are restored into the
//! run's home first, then the agent resumes its own session natively.
//!
//! A snapshot is hostile input when it comes back: [`SessionSnapshot::from_bytes`] checks its size
//! ([`SNAPSHOT_BOUND`]), its version, and every file name in it (plain relative components, no
//! `..`, no absolute path, within [`SNAPSHOT_MAX_FILES`]) before anything is written, and the
//! restore itself is confined to the home by the kernel (`openat2`).
//!
//! ```
//! use agent_api::{AgentKind, SessionSnapshot};
//! use agent_api::snapshot::{SnapshotError, SnapshotFile};
//! let mut snapshot = SessionSnapshot::new(AgentKind::new("my_agent").unwrap(), "s-1");
//! snapshot.files.push(SnapshotFile::new("MY_AGENT_HOME", "sessions/s-1.jsonl", b"{}\n".to_vec()));
//! let bytes = snapshot.to_bytes().unwrap();
//! assert_eq!(SessionSnapshot::from_bytes(&bytes).unwrap(), snapshot);
//! // Cut short in transit: a typed error, not a half snapshot.
//! assert!(matches!(SessionSnapshot::from_bytes(&bytes[..bytes.len() / 2]), Err(SnapshotError::Corrupt { .. })));
//! ```

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::vocabulary::kind::AgentKind;
pub use crate::vocabulary::snapshot_error::SnapshotError;

/// The snapshot format this build writes and reads.
pub const SNAPSHOT_VERSION: u32 = 1;

/// The largest snapshot, serialized, in bytes (64 MiB). A session whose native files are larger
/// is not exported natively: its snapshot says [`Continuity::Replay`] with the reason, and the
/// session continues by replay, flagged.
pub const SNAPSHOT_BOUND: u64 = 64 * 1024 * 1024;

/// The native files' bytes a snapshot may hold, all files together (48 MiB: base64 makes the
/// serialized snapshot a third larger, which stays within [`SNAPSHOT_BOUND`]).
pub const SNAPSHOT_FILES_BOUND: u64 = 48 * 1024 * 1024;

/// The most files one snapshot names.
pub const SNAPSHOT_MAX_FILES: usize = 4096;

/// The longest file name (relative path) in a snapshot, in bytes.
const PATH_BOUND: usize = 1024;

/// How the session continues from this snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Continuity {
    /// The agent's own files are in the snapshot: restored, then resumed natively.
    Native,
    /// The agent keeps the session in its service (threads on its server): the native id is all
    /// it needs, and the snapshot holds no file.
    Service,
    /// The session cannot continue natively (its files are over the bound, or the agent keeps
    /// nothing that can move): whoever holds the transcript primes a new native session with it,
    /// and says so (`replay`).
    Replay {
        /// Why, in words (no path, no content).
        reason: String,
    },
}

/// One of the agent's own files, relative to a directory of its home.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SnapshotFile {
    /// The variable that names the directory the file is under (the agent's own, such as
    /// `MY_AGENT_HOME`, or `HOME`): the backend's own home layout says where it points on the
    /// importing side.
    pub root: String,
    /// The file's path below that directory, `/`-separated plain components. Where the CLI keys
    /// its files by working directory, the backend writes its own placeholder here and re-keys on
    /// import.
    pub path: String,
    /// The file's bytes (base64 in the serialized form).
    #[serde(with = "base64_bytes")]
    pub bytes: Vec<u8>,
    /// When the file was last written on the exporting side (milliseconds since the Unix epoch):
    /// a restore keeps a file already in the home that is newer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_ms: Option<u64>,
}

/// The file's names and size, never its bytes (they may hold secrets).
impl std::fmt::Debug for SnapshotFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotFile")
            .field("root", &self.root)
            .field("path", &self.path)
            .field("bytes", &self.bytes.len())
            .field("modified_ms", &self.modified_ms)
            .finish()
    }
}

impl SnapshotFile {
    /// A file under the directory `root` names, at `path` there.
    pub fn new(root: impl Into<String>, path: impl Into<String>, bytes: Vec<u8>) -> Self {
        Self {
            root: root.into(),
            path: path.into(),
            bytes,
            modified_ms: None,
        }
    }

    /// Sets when the file was last written.
    pub fn modified_at(mut self, modified_ms: Option<u64>) -> Self {
        self.modified_ms = modified_ms;
        self
    }

    /// The path as plain relative components, or why it is refused.
    pub fn relative_path(&self) -> Result<PathBuf, SnapshotError> {
        checked_relative(&self.path)
    }
}

/// What changed in a session's snapshot since an earlier one ([`SessionSnapshot::delta_from`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SnapshotDelta {
    /// The format's version ([`SNAPSHOT_VERSION`]).
    pub version: u32,
    /// The agent's own session id.
    pub native_session_id: String,
    /// The working directory the session ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<PathBuf>,
    /// How the session continues.
    pub continuity: Continuity,
    /// Every file of the newer snapshot, each with what changed.
    pub files: Vec<FileDelta>,
    /// When the newer snapshot was taken.
    pub taken_at_ms: u64,
}

impl SnapshotDelta {
    /// The delta as bytes (JSON, the files' bytes in base64), within [`SNAPSHOT_BOUND`], as a
    /// store keeps it beside the snapshot it follows.
    pub fn to_bytes(&self) -> Result<Vec<u8>, SnapshotError> {
        self.check()?;
        write_bounded(self)
    }

    /// Reads a delta written by [`SnapshotDelta::to_bytes`], checked as
    /// [`SessionSnapshot::from_bytes`] checks a snapshot: over the bound, cut short, damaged, of
    /// another version, or naming a file outside its directory is a typed error.
    ///
    /// ```
    /// use agent_api::{AgentKind, SessionSnapshot};
    /// use agent_api::snapshot::{SnapshotDelta, SnapshotError, SnapshotFile};
    /// let kind = AgentKind::new("my_agent").unwrap();
    /// let mut first = SessionSnapshot::new(kind.clone(), "s-1");
    /// first.files.push(SnapshotFile::new("HOME", "s-1.jsonl", b"turn 1\n".to_vec()));
    /// let mut second = first.clone();
    /// second.files[0].bytes.extend_from_slice(b"turn 2\n");
    /// let bytes = second.delta_from(&first).to_bytes().unwrap();
    /// let delta = SnapshotDelta::from_bytes(&bytes).unwrap();
    /// assert_eq!(first.applied(&delta).unwrap(), second);
    /// assert!(matches!(SnapshotDelta::from_bytes(&bytes[..10]), Err(SnapshotError::Corrupt { .. })));
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SnapshotError> {
        let delta: Self = read_versioned(bytes)?;
        delta.check()?;
        Ok(delta)
    }

    /// Checks every name in the delta and its bounds (its version, session id, file count and
    /// names; what it carries stays within [`SNAPSHOT_FILES_BOUND`]).
    pub fn check(&self) -> Result<(), SnapshotError> {
        check_parts(
            self.version,
            &self.native_session_id,
            self.bytes(),
            self.files
                .iter()
                .map(|f| (f.root.as_str(), f.path.as_str())),
        )
    }

    /// The file bytes the delta carries.
    pub fn bytes(&self) -> u64 {
        self.files
            .iter()
            .map(|f| match &f.change {
                FileChange::Same => 0,
                FileChange::Append { bytes, .. } | FileChange::Whole { bytes } => {
                    bytes.len() as u64
                }
            })
            .sum()
    }
}

/// One file of a [`SnapshotDelta`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FileDelta {
    /// The variable naming the file's directory.
    pub root: String,
    /// The file's path below it.
    pub path: String,
    /// When the file was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_ms: Option<u64>,
    /// What changed.
    pub change: FileChange,
}

/// What changed in one file.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum FileChange {
    /// Nothing.
    Same,
    /// It grew: these bytes follow the first `from`.
    Append {
        /// The length of the file it grew from.
        from: u64,
        /// The new bytes (base64 in the serialized form).
        #[serde(with = "base64_bytes")]
        bytes: Vec<u8>,
    },
    /// It changed otherwise: all of it.
    Whole {
        /// The file's bytes (base64 in the serialized form).
        #[serde(with = "base64_bytes")]
        bytes: Vec<u8>,
    },
}

/// The change's kind and size, never its bytes.
impl std::fmt::Debug for FileChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileChange::Same => f.write_str("Same"),
            FileChange::Append { from, bytes } => {
                write!(f, "Append {{ from: {from}, bytes: {} }}", bytes.len())
            }
            FileChange::Whole { bytes } => write!(f, "Whole {{ bytes: {} }}", bytes.len()),
        }
    }
}

/// An agent's own state for one native session (see the module's docs). Serialized as JSON with
/// the files' bytes in base64; [`SessionSnapshot::to_bytes`] and [`SessionSnapshot::from_bytes`]
/// hold it to [`SNAPSHOT_BOUND`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SessionSnapshot {
    /// The format's version ([`SNAPSHOT_VERSION`]).
    pub version: u32,
    /// The agent whose session it is.
    pub agent: AgentKind,
    /// The agent's own session id.
    pub native_session_id: String,
    /// The working directory the session ran in on the exporting side (re-keyed on import where
    /// the agent keys its sessions by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<PathBuf>,
    /// How the session continues from it.
    pub continuity: Continuity,
    /// The agent's files for the session.
    #[serde(default)]
    pub files: Vec<SnapshotFile>,
    /// When it was taken (milliseconds since the Unix epoch).
    #[serde(default)]
    pub taken_at_ms: u64,
}

/// What a restore did ([`AgentBackend::import_snapshot`](crate::AgentBackend::import_snapshot)):
/// which files it wrote, and which it kept because the home already held a newer copy (newest wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SnapshotImport {
    /// Files written into the home, as `root/path` (re-keyed where the agent keys by directory).
    pub written: Vec<String>,
    /// Files already in the home, identical: left alone.
    pub unchanged: Vec<String>,
    /// Files already in the home and newer than the snapshot's (they hold what the snapshot
    /// holds and more, or were written later): kept, the snapshot's copy dropped.
    pub kept_newer: Vec<String>,
}

impl SnapshotImport {
    /// One line saying what the restore did, for a log or a status item (names, never content).
    pub fn summary(&self) -> String {
        let mut line = format!(
            "{} file(s) restored, {} already there",
            self.written.len(),
            self.unchanged.len()
        );
        if !self.kept_newer.is_empty() {
            line.push_str(&format!(
                "; the home's newer copy kept (newest wins): {}",
                self.kept_newer.join(", ")
            ));
        }
        line
    }
}

impl SessionSnapshot {
    /// An empty native snapshot of `agent`'s session `native_session_id`, taken now.
    pub fn new(agent: AgentKind, native_session_id: impl Into<String>) -> Self {
        Self {
            version: SNAPSHOT_VERSION,
            agent,
            native_session_id: native_session_id.into(),
            working_dir: None,
            continuity: Continuity::Native,
            files: Vec::new(),
            taken_at_ms: now_ms(),
        }
    }

    /// Sets the working directory the session ran in.
    pub fn in_working_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.working_dir = dir;
        self
    }

    /// Sets how the session continues.
    pub fn with_continuity(mut self, continuity: Continuity) -> Self {
        self.continuity = continuity;
        self
    }

    /// The native files' bytes, all files together.
    pub fn file_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes.len() as u64).sum()
    }

    /// What changed since `base` (an earlier snapshot of the same session), for a store that
    /// keeps a session's snapshots turn after turn: a file that only grew (as agents' session
    /// logs do) is its new tail, an unchanged file is named only, anything else is whole. Storing
    /// the first snapshot and then each turn's delta costs about the native bytes once, not once
    /// per turn. [`SessionSnapshot::apply`] puts it back together.
    ///
    /// ```
    /// use agent_api::{AgentKind, SessionSnapshot};
    /// use agent_api::snapshot::SnapshotFile;
    /// let kind = AgentKind::new("my_agent").unwrap();
    /// let mut first = SessionSnapshot::new(kind.clone(), "s-1");
    /// first.files.push(SnapshotFile::new("HOME", "s-1.jsonl", b"turn 1\n".to_vec()));
    /// let mut second = SessionSnapshot::new(kind, "s-1");
    /// second.files.push(SnapshotFile::new("HOME", "s-1.jsonl", b"turn 1\nturn 2\n".to_vec()));
    /// let delta = second.delta_from(&first);
    /// assert_eq!(delta.bytes(), 7); // "turn 2\n" only
    /// assert_eq!(first.apply(&delta).unwrap(), second);
    /// ```
    pub fn delta_from(&self, base: &SessionSnapshot) -> SnapshotDelta {
        let files = self
            .files
            .iter()
            .map(|file| {
                let before = base
                    .files
                    .iter()
                    .find(|b| b.root == file.root && b.path == file.path);
                let change = match before {
                    Some(b) if b.bytes == file.bytes => FileChange::Same,
                    Some(b) if file.bytes.starts_with(&b.bytes) => FileChange::Append {
                        from: b.bytes.len() as u64,
                        bytes: file.bytes[b.bytes.len()..].to_vec(),
                    },
                    _ => FileChange::Whole {
                        bytes: file.bytes.clone(),
                    },
                };
                FileDelta {
                    root: file.root.clone(),
                    path: file.path.clone(),
                    modified_ms: file.modified_ms,
                    change,
                }
            })
            .collect();
        SnapshotDelta {
            version: SNAPSHOT_VERSION,
            native_session_id: self.native_session_id.clone(),
            working_dir: self.working_dir.clone(),
            continuity: self.continuity.clone(),
            files,
            taken_at_ms: self.taken_at_ms,
        }
    }

    /// This snapshot with `delta` (made by [`SessionSnapshot::delta_from`] against it) applied:
    /// [`SnapshotError::Corrupt`] where the delta does not fit (another session, a file it
    /// appends to that is missing or of another length), and the result checked as
    /// [`SessionSnapshot::from_bytes`] checks.
    pub fn apply(&self, delta: &SnapshotDelta) -> Result<SessionSnapshot, SnapshotError> {
        self.clone().applied(delta)
    }

    /// [`SessionSnapshot::apply`] taking the snapshot: its files' bytes are moved, not copied, so
    /// that a chain of deltas (a store's base and every turn's delta since) is put back together
    /// in time and memory of the result, not of the result times the deltas.
    pub fn applied(self, delta: &SnapshotDelta) -> Result<SessionSnapshot, SnapshotError> {
        let corrupt = |reason: String| SnapshotError::Corrupt { reason };
        if delta.native_session_id != self.native_session_id {
            return Err(corrupt("the delta is another session's".into()));
        }
        let mut before: std::collections::HashMap<(String, String), Vec<u8>> = self
            .files
            .into_iter()
            .map(|f| ((f.root, f.path), f.bytes))
            .collect();
        let mut files = Vec::with_capacity(delta.files.len());
        for file in &delta.files {
            let held = before.remove(&(file.root.clone(), file.path.clone()));
            let bytes = match (&file.change, held) {
                (FileChange::Whole { bytes }, _) => bytes.clone(),
                (FileChange::Same, Some(held)) => held,
                (FileChange::Append { from, bytes }, Some(mut held))
                    if held.len() as u64 == *from =>
                {
                    held.extend_from_slice(bytes);
                    held
                }
                _ => {
                    return Err(corrupt(format!(
                        "the delta changes `{}`, which the base does not hold as it expects",
                        crate::guards::bounds::utf8_prefix(&file.path, 128)
                    )))
                }
            };
            files.push(SnapshotFile {
                root: file.root.clone(),
                path: file.path.clone(),
                bytes,
                modified_ms: file.modified_ms,
            });
        }
        let snapshot = SessionSnapshot {
            version: delta.version,
            agent: self.agent,
            native_session_id: delta.native_session_id.clone(),
            working_dir: delta.working_dir.clone(),
            continuity: delta.continuity.clone(),
            files,
            taken_at_ms: delta.taken_at_ms,
        };
        snapshot.check()?;
        Ok(snapshot)
    }

    /// Whether the session continues natively (its files, or the agent's service).
    pub fn is_native(&self) -> bool {
        !matches!(self.continuity, Continuity::Replay { .. })
    }

    /// The snapshot as bytes (JSON), within [`SNAPSHOT_BOUND`].
    pub fn to_bytes(&self) -> Result<Vec<u8>, SnapshotError> {
        self.check()?;
        write_bounded(self)
    }

    /// Reads a snapshot written by [`SessionSnapshot::to_bytes`]: over the bound, cut short,
    /// damaged, of another version, or naming a file outside its directory is a typed error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SnapshotError> {
        let snapshot: Self = read_versioned(bytes)?;
        snapshot.check()?;
        Ok(snapshot)
    }

    /// Checks the snapshot is `agent`'s.
    pub fn check_agent(&self, agent: &AgentKind) -> Result<(), SnapshotError> {
        if &self.agent != agent {
            return Err(SnapshotError::WrongAgent {
                expected: agent.to_string(),
                found: self.agent.to_string(),
            });
        }
        Ok(())
    }

    /// Checks every name in the snapshot and its bounds (what [`SessionSnapshot::from_bytes`]
    /// checks after parsing; a snapshot built in memory is checked again before it is restored).
    pub fn check(&self) -> Result<(), SnapshotError> {
        check_parts(
            self.version,
            &self.native_session_id,
            self.file_bytes(),
            self.files
                .iter()
                .map(|f| (f.root.as_str(), f.path.as_str())),
        )
    }
}

/// What a snapshot and a delta both check: the version, the session id, the file count and
/// bytes, and every file's directory and name (plain, relative, each once).
fn check_parts<'a>(
    version: u32,
    native_session_id: &str,
    file_bytes: u64,
    files: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
) -> Result<(), SnapshotError> {
    if version != SNAPSHOT_VERSION {
        return Err(SnapshotError::UnsupportedVersion {
            found: version,
            supported: SNAPSHOT_VERSION,
        });
    }
    check_session_id(native_session_id)?;
    if files.len() > SNAPSHOT_MAX_FILES {
        return Err(SnapshotError::Corrupt {
            reason: format!(
                "{} files, over the {SNAPSHOT_MAX_FILES}-file bound",
                files.len()
            ),
        });
    }
    if file_bytes > SNAPSHOT_FILES_BOUND {
        return Err(SnapshotError::TooLarge {
            bytes: file_bytes,
            bound: SNAPSHOT_FILES_BOUND,
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    for (root, path) in files {
        check_root(root)?;
        checked_relative(path)?;
        if !seen.insert((root, path)) {
            return Err(unsafe_name(path, "named twice"));
        }
    }
    Ok(())
}

/// A native session id as a file name may hold it: 1 to 200 bytes of ASCII letters, digits,
/// `-`, `_`, `.` and `:`, not starting with a dot.
pub fn check_session_id(id: &str) -> Result<(), SnapshotError> {
    let ok = !id.is_empty()
        && id.len() <= 200
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if ok {
        Ok(())
    } else {
        Err(unsafe_name(
            id,
            "a session id is 1 to 200 of [A-Za-z0-9._:-], not starting with a dot",
        ))
    }
}

fn check_root(root: &str) -> Result<(), SnapshotError> {
    let ok = !root.is_empty()
        && root.len() <= 64
        && root
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(unsafe_name(root, "a directory is named by its variable"))
    }
}

fn checked_relative(path: &str) -> Result<PathBuf, SnapshotError> {
    if path.is_empty() || path.len() > PATH_BOUND {
        return Err(unsafe_name(path, "empty or over 1024 bytes"));
    }
    if path.contains('\0') || path.contains('\\') {
        return Err(unsafe_name(path, "holds a NUL byte or a backslash"));
    }
    let as_path = Path::new(path);
    let mut relative = PathBuf::new();
    for component in as_path.components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(unsafe_name(path, "has a `..` component")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(unsafe_name(path, "is absolute"))
            }
        }
    }
    if relative.as_os_str().is_empty() {
        return Err(unsafe_name(path, "names no file"));
    }
    Ok(relative)
}

fn unsafe_name(name: &str, reason: &'static str) -> SnapshotError {
    SnapshotError::unsafe_name(name, reason)
}

/// `value` as JSON, within [`SNAPSHOT_BOUND`].
fn write_bounded<T: Serialize>(value: &T) -> Result<Vec<u8>, SnapshotError> {
    let bytes = serde_json::to_vec(value).map_err(|e| SnapshotError::Corrupt {
        reason: e.to_string(),
    })?;
    if bytes.len() as u64 > SNAPSHOT_BOUND {
        return Err(SnapshotError::TooLarge {
            bytes: bytes.len() as u64,
            bound: SNAPSHOT_BOUND,
        });
    }
    Ok(bytes)
}

/// Reads JSON written by [`write_bounded`]: over the bound is refused before parsing, the version
/// is read first (so a newer format says so rather than failing on a field), and a parse error
/// says where, never what.
fn read_versioned<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, SnapshotError> {
    if bytes.len() as u64 > SNAPSHOT_BOUND {
        return Err(SnapshotError::TooLarge {
            bytes: bytes.len() as u64,
            bound: SNAPSHOT_BOUND,
        });
    }
    #[derive(Deserialize)]
    struct Version {
        version: u32,
    }
    let corrupt = |e: serde_json::Error| SnapshotError::Corrupt {
        reason: format!(
            "{} at line {} column {}",
            category(&e),
            e.line(),
            e.column()
        ),
    };
    let version: Version = serde_json::from_slice(bytes).map_err(corrupt)?;
    if version.version != SNAPSHOT_VERSION {
        return Err(SnapshotError::UnsupportedVersion {
            found: version.version,
            supported: SNAPSHOT_VERSION,
        });
    }
    serde_json::from_slice(bytes).map_err(corrupt)
}

fn category(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Eof => "cut short",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "not a snapshot",
        serde_json::error::Category::Io => "unreadable",
    }
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> SessionSnapshot {
        let mut s = SessionSnapshot::new(AgentKind::new("my_agent").unwrap(), "s-1");
        s.files
            .push(SnapshotFile::new("HOME", "a/b.jsonl", b"x\n".to_vec()));
        s
    }

    #[test]
    fn a_snapshot_round_trips_and_checks_its_version_and_names() {
        let s = snapshot();
        assert_eq!(
            SessionSnapshot::from_bytes(&s.to_bytes().unwrap()).unwrap(),
            s
        );

        let mut newer = serde_json::to_value(&s).unwrap();
        newer["version"] = 2.into();
        let err = SessionSnapshot::from_bytes(&serde_json::to_vec(&newer).unwrap()).unwrap_err();
        assert_eq!(
            err,
            SnapshotError::UnsupportedVersion {
                found: 2,
                supported: 1
            }
        );

        for bad in ["../x", "/etc/passwd", "a/../../b", "", "a\\b", "."] {
            let mut hostile = s.clone();
            hostile.files[0].path = bad.into();
            let bytes = serde_json::to_vec(&hostile).unwrap();
            assert!(
                matches!(
                    SessionSnapshot::from_bytes(&bytes),
                    Err(SnapshotError::UnsafeName { .. })
                ),
                "{bad:?} was taken"
            );
        }
        let mut hostile = s.clone();
        hostile.native_session_id = "../../x".into();
        assert!(matches!(
            SessionSnapshot::from_bytes(&serde_json::to_vec(&hostile).unwrap()),
            Err(SnapshotError::UnsafeName { .. })
        ));
        let mut hostile = s;
        hostile.files[0].root = "home/../..".into();
        assert!(matches!(
            SessionSnapshot::from_bytes(&serde_json::to_vec(&hostile).unwrap()),
            Err(SnapshotError::UnsafeName { .. })
        ));
    }

    #[test]
    fn truncated_damaged_and_oversized_snapshots_are_typed_errors() {
        let bytes = snapshot().to_bytes().unwrap();
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            assert!(matches!(
                SessionSnapshot::from_bytes(&bytes[..cut]),
                Err(SnapshotError::Corrupt { .. })
            ));
        }
        let mut damaged = bytes.clone();
        let at = damaged.len() - 30;
        damaged[at] = b'!';
        assert!(SessionSnapshot::from_bytes(&damaged).is_err());
        let huge = vec![b' '; SNAPSHOT_BOUND as usize + 1];
        assert!(matches!(
            SessionSnapshot::from_bytes(&huge),
            Err(SnapshotError::TooLarge { .. })
        ));
        // The error says where, never what.
        let text = SessionSnapshot::from_bytes(&bytes[..bytes.len() / 2])
            .unwrap_err()
            .to_string();
        assert!(!text.contains("eAo="), "{text}");
    }

    #[test]
    fn a_delta_carries_only_what_grew_and_refuses_a_base_it_does_not_fit() {
        let base = snapshot();
        let mut grown = base.clone();
        grown.files[0].bytes.extend_from_slice(b"y\n");
        grown
            .files
            .push(SnapshotFile::new("HOME", "new.json", b"{}".to_vec()));
        let delta = grown.delta_from(&base);
        assert_eq!(delta.bytes(), 4);
        assert_eq!(base.apply(&delta).unwrap(), grown);
        // Applied to another base (one the append does not follow): refused, typed.
        let mut other = base.clone();
        other.files[0].bytes = b"something else".to_vec();
        assert!(matches!(
            other.apply(&delta),
            Err(SnapshotError::Corrupt { .. })
        ));
        // An unchanged snapshot's delta carries nothing.
        assert_eq!(grown.delta_from(&grown).bytes(), 0);
    }

    #[test]
    fn a_delta_round_trips_as_bytes_and_a_damaged_or_hostile_one_is_a_typed_error() {
        let base = snapshot();
        let mut grown = base.clone();
        grown.files[0].bytes.extend_from_slice(b"y\n");
        let bytes = grown.delta_from(&base).to_bytes().unwrap();
        let delta = SnapshotDelta::from_bytes(&bytes).unwrap();
        assert_eq!(base.clone().applied(&delta).unwrap(), grown);
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            assert!(matches!(
                SnapshotDelta::from_bytes(&bytes[..cut]),
                Err(SnapshotError::Corrupt { .. })
            ));
        }
        let mut hostile = serde_json::to_value(&delta).unwrap();
        hostile["files"][0]["path"] = "../../etc/passwd".into();
        assert!(matches!(
            SnapshotDelta::from_bytes(&serde_json::to_vec(&hostile).unwrap()),
            Err(SnapshotError::UnsafeName { .. })
        ));
        let mut newer = serde_json::to_value(&delta).unwrap();
        newer["version"] = 2.into();
        assert!(matches!(
            SnapshotDelta::from_bytes(&serde_json::to_vec(&newer).unwrap()),
            Err(SnapshotError::UnsupportedVersion { found: 2, .. })
        ));
    }

    #[test]
    fn a_file_shows_its_size_not_its_bytes() {
        let file = SnapshotFile::new("HOME", "auth.json", b"sk-secret".to_vec());
        assert!(!format!("{file:?}").contains("sk-secret"));
    }
}
