//! What a backend builds its session snapshots from (`agent_api.session.snapshot`): where its
//! CLI's directories are for a request ([`home_dir`]), finding a session's file by listing a
//! folder of them ([`list_files`], [`find_files`]), taking the files it names for one session
//! out of them ([`SnapshotBuilder`], [`export_files`]), and putting a snapshot's files back
//! ([`restore_file`], [`import_files`]). Each of these goes where a run of the request finds its
//! agent's home: this machine, or a Prefix, Container or Ssh launcher's far side, through it.
//!
//! Every file is read and written through [`ConfinedDir`]: opened with `openat2` beneath the
//! directory, through no symbolic link, regular files only, bounded. A restored file is written
//! whole (a new file renamed over the name) with the private modes agents keep their homes in
//! (0600, folders 0700). A file the home already holds in a newer version is kept: newest wins,
//! and the [`SnapshotImport`] says so.
//!
//! ```
//! use agent_api::kit::snapshot::{restore_file, SnapshotBuilder};
//! use agent_api::request::SessionRef;
//! use agent_api::snapshot::SnapshotImport;
//! let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
//! std::fs::create_dir(a.path().join("sessions")).unwrap();
//! std::fs::write(a.path().join("sessions/s-1.jsonl"), "turn 1\n").unwrap();
//!
//! let kind = agent_api::AgentKind::new("my_agent").unwrap();
//! let mut builder = SnapshotBuilder::new(&SessionRef::new(kind, "s-1", "/work"));
//! builder.add("MY_HOME", a.path(), "sessions/s-1.jsonl".as_ref(), "sessions/s-1.jsonl").unwrap();
//! let snapshot = builder.finish().unwrap();
//!
//! let mut report = SnapshotImport::default();
//! restore_file(b.path(), "sessions/s-1.jsonl".as_ref(), &snapshot.files[0], &mut report).unwrap();
//! assert_eq!(std::fs::read_to_string(b.path().join("sessions/s-1.jsonl")).unwrap(), "turn 1\n");
//! assert_eq!(report.written, ["MY_HOME/sessions/s-1.jsonl"]);
//! ```

use std::path::{Path, PathBuf};

use crate::guards::files::{ConfinedDir, FileRefusal};
use crate::vocabulary::error::AgentError;
use crate::vocabulary::home::Home;
use crate::vocabulary::launcher::Launcher;
use crate::vocabulary::request::RunRequest;
use crate::vocabulary::session_ref::SessionRef;
pub use crate::vocabulary::snapshot::{
    Continuity, SessionSnapshot, SnapshotError, SnapshotFile, SnapshotImport, SNAPSHOT_FILES_BOUND,
};

/// The directory the agent's CLI finds through the variable `var` for a run of `request` on a
/// backend whose own environment is `base` (inheriting this process's when `inherit`): the
/// request's environment, then `base`, then this process's; where unset, `default_under_home`
/// below `HOME` (found the same way). Snapshots are taken from and restored into homes that
/// outlive their run ([`Home::Inherit`], with the directories the environment names); an
/// isolated or hermetic home is removed with its run, so it is refused.
pub fn home_dir(
    request: &RunRequest,
    base: &std::collections::BTreeMap<String, String>,
    inherit: bool,
    var: &str,
    default_under_home: &str,
) -> Result<PathBuf, AgentError> {
    if request.home != Home::Inherit {
        return Err(AgentError::InvalidRequest {
            reason: "a session snapshot is taken from and restored into a home that outlives its run \
                     (the inherited one, with the directories the environment names); an isolated or \
                     hermetic home is removed with its run"
                .into(),
        });
    }
    let value = |name: &str| {
        request
            .env
            .get(name)
            .or_else(|| base.get(name))
            .cloned()
            .or_else(|| inherit.then(|| std::env::var(name).ok()).flatten())
            .filter(|v| !v.is_empty())
    };
    if let Some(dir) = value(var) {
        return Ok(PathBuf::from(dir));
    }
    value("HOME")
        .map(|home| Path::new(&home).join(default_under_home))
        .ok_or_else(|| AgentError::InvalidRequest {
            reason: format!("neither {var} nor HOME is set: the agent's home is unknown"),
        })
}

/// One of the agent's files for a session, as a backend names it for an export: the variable
/// naming its directory, that directory here, its path below it, and its name in the snapshot.
#[derive(Debug, Clone)]
pub struct NativeFile {
    /// The variable naming the directory (`MY_AGENT_HOME`).
    pub root: &'static str,
    /// The directory here.
    pub dir: PathBuf,
    /// The file's path below it.
    pub relative: PathBuf,
    /// Its name in the snapshot (the backend's own, where it re-keys on import).
    pub stored: String,
}

/// The snapshot of `session` holding `files`, found where a run of `request` finds its agent's
/// home: on this machine (on the blocking pool; bubblewrap's home is this machine's too) or, for a
/// launcher whose agent runs elsewhere (a prefix, a container, ssh), on that far side, through the
/// same launcher (`spec/launchers.md`, "Session snapshots through a launcher"). Missing files are
/// left out, [`SnapshotError::Missing`] when none is there, [`Continuity::Replay`] past the bound.
pub async fn export_files(
    request: &RunRequest,
    session: &SessionRef,
    files: Vec<NativeFile>,
) -> Result<SessionSnapshot, AgentError> {
    let mut builder = SnapshotBuilder::new(session);
    if let Some(launcher) = far_launcher(request) {
        for file in &files {
            let read = far::read_below(launcher, &file.dir, &file.relative, builder.left()).await;
            builder.add_read(file.root, &file.stored, read)?;
        }
        return Ok(builder.finish()?);
    }
    blocking(move || {
        for file in &files {
            builder.add(file.root, &file.dir, &file.relative, &file.stored)?;
        }
        builder.finish()
    })
    .await
}

/// Restores the files of `snapshot` that `place` gives a home for (its directory and its path
/// below it, re-keyed as the backend needs; `None` leaves a file out), where a run of `request`
/// finds its agent's home: here, on the blocking pool, or on a launcher's far side through that
/// launcher (`spec/launchers.md`, "Session snapshots through a launcher"), with the same checks
/// and the same newest-wins rule ([`restore_file`]).
/// [`SnapshotError::Missing`] when `place` takes none of them.
pub async fn import_files(
    request: &RunRequest,
    snapshot: &SessionSnapshot,
    place: impl Fn(&SnapshotFile) -> Option<(PathBuf, PathBuf)>,
) -> Result<SnapshotImport, AgentError> {
    snapshot.check()?;
    let placed: Vec<(SnapshotFile, PathBuf, PathBuf)> = snapshot
        .files
        .iter()
        .filter_map(|file| place(file).map(|(dir, relative)| (file.clone(), dir, relative)))
        .collect();
    if placed.is_empty() {
        return Err(SnapshotError::Missing {
            id: snapshot.native_session_id.clone(),
        }
        .into());
    }
    if let Some(launcher) = far_launcher(request) {
        let mut report = SnapshotImport::default();
        for (file, dir, relative) in &placed {
            let shown = shown(file, relative);
            let cap = file.bytes.len() as u64 + SNAPSHOT_FILES_BOUND;
            let existing = far::read_below(launcher, dir, relative, cap).await;
            if !keep_existing(existing, file, &shown, &mut report)? {
                far::replace_private(launcher, dir, relative, &file.bytes)
                    .await
                    .map_err(|refusal| file_error(&shown, "restored", refusal))?;
                report.written.push(shown);
            }
        }
        return Ok(report);
    }
    blocking(move || {
        let mut report = SnapshotImport::default();
        for (file, dir, relative) in &placed {
            restore_file(dir, relative, file, &mut report)?;
        }
        Ok(report)
    })
    .await
}

/// Whether a run of `request` has its agent's home on this machine (no launcher, or bubblewrap);
/// otherwise [`export_files`], [`import_files`], [`list_files`] and [`read_file`] reach it through
/// the launcher.
pub fn home_is_here(request: &RunRequest) -> bool {
    far_launcher(request).is_none()
}

/// The launcher of `request` when its agent's home is not on this machine's filesystem.
fn far_launcher(request: &RunRequest) -> Option<&Launcher> {
    request
        .launcher
        .as_ref()
        .filter(|launcher| !launcher.is_local_filesystem())
}

/// The most files a listing of a folder of the agent's home takes ([`list_files`]): past it the
/// listing is refused, typed.
pub const LISTED_BOUND: usize = 10_000;

/// The regular files in the folder `under` below `dir` where a run of `request` finds its agent's
/// home, at most `depth` folders down (1: the folder's own files), as paths below `dir` (`under`
/// first), sorted: for a backend that finds a session's file by looking through its home (by
/// date, by project). Listed here, or on a launcher's far side through that launcher
/// (`spec/launchers.md`, "Session snapshots through a launcher"), the same way: no symbolic link
/// is followed, and one met (on the way to the folder or in it) refuses the listing, typed, as a
/// way out; so do more than [`LISTED_BOUND`] files. No such folder lists nothing. The files are
/// names only: read them with [`read_file`] or [`export_files`], which check each again.
pub async fn list_files(
    request: &RunRequest,
    dir: &Path,
    under: &Path,
    depth: usize,
) -> Result<Vec<PathBuf>, AgentError> {
    let listed = match far_launcher(request) {
        Some(launcher) => far::list_below(launcher, dir, under, depth, LISTED_BOUND).await,
        None => {
            let (dir, under) = (dir.to_path_buf(), under.to_path_buf());
            tokio::task::spawn_blocking(move || list_here(&dir, &under, depth, LISTED_BOUND))
                .await
                .unwrap_or(Err(FileRefusal::Io(std::io::ErrorKind::Other)))
        }
    };
    match listed {
        Ok(mut files) => {
            files.sort();
            Ok(files)
        }
        Err(FileRefusal::NotFound) => Ok(Vec::new()),
        Err(refusal) => Err(file_error(&under.display().to_string(), "listed", refusal).into()),
    }
}

/// [`list_files`] on this machine.
fn list_here(
    dir: &Path,
    under: &Path,
    depth: usize,
    bound: usize,
) -> Result<Vec<PathBuf>, FileRefusal> {
    if !std::fs::metadata(dir)?.is_dir() {
        return Err(FileRefusal::NotFound);
    }
    let mut folder = dir.to_path_buf();
    for name in far::plain_names(under)? {
        folder.push(name);
        let meta = std::fs::symlink_metadata(&folder)?;
        if meta.file_type().is_symlink() {
            return Err(FileRefusal::Symlink);
        }
        if !meta.is_dir() {
            return Err(FileRefusal::NotFound);
        }
    }
    let mut files = Vec::new();
    let mut level = vec![under.to_path_buf()];
    for left in (0..depth).rev() {
        let mut next = Vec::new();
        for relative in level {
            let Ok(entries) = std::fs::read_dir(dir.join(&relative)) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = relative.join(entry.file_name());
                if kind.is_symlink() {
                    return Err(FileRefusal::Symlink);
                } else if kind.is_file() {
                    if files.len() == bound {
                        return Err(FileRefusal::TooMany {
                            bound: bound as u64,
                        });
                    }
                    files.push(path);
                } else if kind.is_dir() && left > 0 {
                    next.push(path);
                }
            }
        }
        level = next;
    }
    Ok(files)
}

/// The files [`list_files`] lists that `pick` takes, listed again until there is one, for at
/// most `limit`: for a CLI that writes a session's file a moment after it reports the turn's end.
/// Empty when none came.
pub async fn find_files(
    request: &RunRequest,
    dir: &Path,
    under: &Path,
    depth: usize,
    limit: std::time::Duration,
    pick: impl Fn(&Path) -> bool,
) -> Result<Vec<PathBuf>, AgentError> {
    // Each far listing starts a process there (a `docker exec`, an ssh connection).
    let every = match far_launcher(request) {
        Some(_) => std::time::Duration::from_millis(500),
        None => std::time::Duration::from_millis(100),
    };
    let started = tokio::time::Instant::now();
    loop {
        let mut found = list_files(request, dir, under, depth).await?;
        found.retain(|path| pick(path));
        if !found.is_empty() || started.elapsed() >= limit {
            return Ok(found);
        }
        tokio::time::sleep(every).await;
    }
}

/// Reads the regular file at `relative` below `dir` where a run of `request` finds its agent's
/// home, here or through its launcher, with the checks of [`export_files`]: `None` when there is
/// no such file or it is larger than `cap`; a link, a second name or a way out of `dir` is
/// refused, typed.
pub async fn read_file(
    request: &RunRequest,
    dir: &Path,
    relative: &Path,
    cap: u64,
) -> Result<Option<Vec<u8>>, AgentError> {
    let read = match far_launcher(request) {
        Some(launcher) => far::read_below(launcher, dir, relative, cap).await,
        None => {
            let (dir, relative) = (dir.to_path_buf(), relative.to_path_buf());
            tokio::task::spawn_blocking(move || {
                ConfinedDir::open(&dir)
                    .map_err(FileRefusal::from)
                    .and_then(|confined| confined.read_below(&relative, cap))
            })
            .await
            .unwrap_or(Err(FileRefusal::Io(std::io::ErrorKind::Other)))
        }
    };
    match read {
        Ok((bytes, _)) => Ok(Some(bytes)),
        Err(FileRefusal::NotFound | FileRefusal::TooLarge { .. }) => Ok(None),
        Err(refusal) => Err(file_error(&relative.display().to_string(), "read", refusal).into()),
    }
}

/// Waits for the file at `relative` below `dir` to settle where a run of `request` finds its
/// agent's home: here, until it has not changed for `quiet` ([`settle`], at most `limit`); on a
/// launcher's far side, for `quiet`.
pub async fn settle_file(
    request: &RunRequest,
    dir: &Path,
    relative: &Path,
    quiet: std::time::Duration,
    limit: std::time::Duration,
) {
    if home_is_here(request) {
        settle(&dir.join(relative), quiet, limit).await;
    } else {
        tokio::time::sleep(quiet).await;
    }
}

/// A snapshot being taken: files added one by one, bounded together by [`SNAPSHOT_FILES_BOUND`]
/// (past it, the snapshot says [`Continuity::Replay`] and holds no file).
#[derive(Debug)]
pub struct SnapshotBuilder {
    snapshot: SessionSnapshot,
    bytes: u64,
    bound: u64,
    over: bool,
}

impl SnapshotBuilder {
    /// A snapshot of `session` (its agent, native id and working directory).
    pub fn new(session: &SessionRef) -> Self {
        let agent = session
            .agent
            .clone()
            .unwrap_or_else(|| crate::vocabulary::kind::AgentKind::from_static("unknown"));
        Self {
            snapshot: SessionSnapshot::new(agent, session.id.clone())
                .in_working_dir(session.working_dir.clone()),
            bytes: 0,
            bound: SNAPSHOT_FILES_BOUND,
            over: false,
        }
    }

    /// Lowers the bound of the files' bytes (tests of the over-bound path use a small one).
    pub fn with_bound(mut self, bound: u64) -> Self {
        self.bound = bound.min(SNAPSHOT_FILES_BOUND);
        self
    }

    /// Adds the file at `relative` below `dir` (the directory the variable `root` names), stored
    /// in the snapshot as `stored` (the backend's own name for it, where it re-keys on import).
    /// `Ok(false)` when there is no such file; a link, a non-regular file or a way out of `dir`
    /// is refused.
    pub fn add(
        &mut self,
        root: &str,
        dir: &Path,
        relative: &Path,
        stored: &str,
    ) -> Result<bool, SnapshotError> {
        if self.over {
            return Ok(true);
        }
        let read = match ConfinedDir::open(dir) {
            Ok(confined) => confined.read_below(relative, self.left()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(FileRefusal::NotFound),
            Err(e) => Err(e.into()),
        };
        self.add_read(root, stored, read)
    }

    /// The bytes the snapshot may still take.
    pub fn left(&self) -> u64 {
        self.bound - self.bytes
    }

    /// Adds what reading a file gave (at most [`SnapshotBuilder::left`] bytes, with the time it was
    /// last written), as [`SnapshotBuilder::add`] does: for a file read elsewhere.
    pub fn add_read(
        &mut self,
        root: &str,
        stored: &str,
        read: Result<(Vec<u8>, Option<std::time::SystemTime>), FileRefusal>,
    ) -> Result<bool, SnapshotError> {
        if self.over {
            return Ok(true);
        }
        match read {
            Ok((bytes, modified)) => {
                self.bytes += bytes.len() as u64;
                self.snapshot
                    .files
                    .push(SnapshotFile::new(root, stored, bytes).modified_at(modified.map(millis)));
                Ok(true)
            }
            Err(FileRefusal::NotFound) => Ok(false),
            Err(FileRefusal::TooLarge { .. }) => {
                self.over = true;
                self.snapshot.files.clear();
                Ok(true)
            }
            Err(refusal) => Err(file_error(stored, "read", refusal)),
        }
    }

    /// The snapshot: [`Continuity::Replay`] (no file) past the bound, [`SnapshotError::Missing`]
    /// when no file of the session was found.
    pub fn finish(self) -> Result<SessionSnapshot, SnapshotError> {
        if self.over {
            return Ok(self.snapshot.with_continuity(Continuity::Replay {
                reason: format!(
                    "the session's files are over the snapshot bound of {} bytes",
                    self.bound
                ),
            }));
        }
        if self.snapshot.files.is_empty() {
            return Err(SnapshotError::Missing {
                id: self.snapshot.native_session_id,
            });
        }
        Ok(self.snapshot)
    }
}

/// Writes the snapshot's `file` to `relative` below `dir` (the directory its root names on this
/// side), unless the home holds it already: the same bytes are left alone, and a newer copy (one
/// that holds the snapshot's bytes and more, or was written after them) is kept, newest wins.
/// `report` says which.
pub fn restore_file(
    dir: &Path,
    relative: &Path,
    file: &SnapshotFile,
    report: &mut SnapshotImport,
) -> Result<(), SnapshotError> {
    let shown = shown(file, relative);
    let refused = |refusal: FileRefusal| file_error(&shown, "restored", refusal);
    std::fs::create_dir_all(dir).map_err(|e| refused(e.into()))?;
    let confined = ConfinedDir::open(dir).map_err(|e| refused(e.into()))?;
    let existing = confined.read_below(relative, file.bytes.len() as u64 + SNAPSHOT_FILES_BOUND);
    if keep_existing(existing, file, &shown, report)? {
        return Ok(());
    }
    confined
        .replace_private(relative, &file.bytes)
        .map_err(refused)?;
    report.written.push(shown);
    Ok(())
}

/// How a restored file is named in a [`SnapshotImport`]: its root and its path below it.
fn shown(file: &SnapshotFile, relative: &Path) -> String {
    format!("{}/{}", file.root, relative.display())
}

/// Whether the home's copy of `file` (what reading it gave) stays: the same bytes, or a newer
/// copy (one that holds the snapshot's bytes and more, or was written after them), newest wins;
/// said in `report`. `false`: the snapshot's file is to be written.
fn keep_existing(
    existing: Result<(Vec<u8>, Option<std::time::SystemTime>), FileRefusal>,
    file: &SnapshotFile,
    shown: &str,
    report: &mut SnapshotImport,
) -> Result<bool, SnapshotError> {
    match existing {
        Ok((existing, modified)) => {
            if existing == file.bytes {
                report.unchanged.push(shown.to_string());
                return Ok(true);
            }
            let grew = existing.len() > file.bytes.len() && existing.starts_with(&file.bytes);
            let later = matches!(
                (modified.map(millis), file.modified_ms),
                (Some(home), Some(snapshot)) if home > snapshot
            );
            if grew || later {
                tracing::info!(file = %shown, "restore kept the home's newer copy (newest wins)");
                report.kept_newer.push(shown.to_string());
                return Ok(true);
            }
            Ok(false)
        }
        Err(FileRefusal::NotFound) => Ok(false),
        Err(FileRefusal::TooLarge { .. }) => {
            report.kept_newer.push(shown.to_string());
            Ok(true)
        }
        Err(refusal) => Err(file_error(shown, "restored", refusal)),
    }
}

/// What `find` finds, asked again every 100 ms for at most `limit`: for a CLI that creates a new
/// session's file a moment after it reports the turn's end.
pub async fn found_within<T>(
    limit: std::time::Duration,
    find: impl Fn() -> Option<T>,
) -> Option<T> {
    let started = tokio::time::Instant::now();
    loop {
        if let Some(found) = find() {
            return Some(found);
        }
        if started.elapsed() >= limit {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Waits until the file at `path` exists and has not changed (size and time) for `quiet`, at
/// most `limit` in all: for a CLI that writes its session file a moment after it reports the
/// turn's end (it queues its transcript writes). Returns whether it settled.
pub async fn settle(path: &Path, quiet: std::time::Duration, limit: std::time::Duration) -> bool {
    let started = tokio::time::Instant::now();
    let mut last: Option<(u64, Option<std::time::SystemTime>)> = None;
    let mut since = started;
    loop {
        let now = tokio::time::Instant::now();
        let seen = std::fs::symlink_metadata(path)
            .ok()
            .map(|m| (m.len(), m.modified().ok()));
        if seen.is_some() && seen == last {
            if now.duration_since(since) >= quiet {
                return true;
            }
        } else {
            last = seen;
            since = now;
        }
        if now.duration_since(started) >= limit {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Runs the blocking file work `f` of an export or import on the blocking pool.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SnapshotError> + Send + 'static,
) -> Result<T, AgentError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| AgentError::InvalidRequest {
            reason: "the snapshot's file work stopped".into(),
        })?
        .map_err(AgentError::from)
}

fn file_error(path: &str, action: &'static str, refusal: FileRefusal) -> SnapshotError {
    SnapshotError::File {
        path: crate::guards::bounds::utf8_prefix(path, 256).to_string(),
        action,
        escape: refusal.is_escape(),
        reason: refusal.to_string(),
    }
}

fn millis(time: std::time::SystemTime) -> u64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

mod far;

#[cfg(test)]
mod tests;
