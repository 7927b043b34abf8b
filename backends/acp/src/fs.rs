//! `fs/read_text_file` and `fs/write_text_file`, served by the SDK and confined to the run's
//! working directory.
//!
//! A path is served only when it names something inside the working directory after every
//! symbolic link is followed: relative paths and `..` components are refused outright (ACP paths
//! are absolute), and the deepest part of the path that exists is canonicalized and must stay
//! under the canonical working directory. Nothing outside is read, written or created.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use agent_client_protocol_schema::{ReadTextFileRequest, WriteTextFileRequest};

/// Largest file served by `fs/read_text_file` (it travels as one JSON-RPC line).
pub const READ_CAP: u64 = 8 * 1024 * 1024;

/// Why a file-system request was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsRefusal {
    /// The path is relative; ACP paths are absolute.
    #[error("the path is not absolute")]
    Relative,
    /// The path has a `..` component.
    #[error("the path has a `..` component")]
    ParentComponent,
    /// The path (after following links) is outside the run's working directory.
    #[error("the path is outside the working directory")]
    OutsideCwd,
    /// The file does not exist (inside the working directory).
    #[error("the file does not exist")]
    NotFound,
    /// The file is larger than [`READ_CAP`].
    #[error("the file is larger than {READ_CAP} bytes")]
    TooLarge,
    /// Reading or writing failed.
    #[error("file-system error: {0}")]
    Io(ErrorKind),
}

impl FsRefusal {
    /// The JSON-RPC error code to answer with (ACP's "resource not found" for a missing file).
    pub fn code(&self) -> i64 {
        match self {
            FsRefusal::NotFound => -32002,
            FsRefusal::Io(_) => -32603,
            _ => -32602,
        }
    }

    /// A short stable label for the status item.
    pub fn label(&self) -> &'static str {
        match self {
            FsRefusal::Relative | FsRefusal::ParentComponent | FsRefusal::OutsideCwd => "fs_refused",
            _ => "fs_failed",
        }
    }
}

impl From<std::io::Error> for FsRefusal {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            ErrorKind::NotFound => FsRefusal::NotFound,
            kind => FsRefusal::Io(kind),
        }
    }
}

/// The run's working directory, as the file-system methods see it.
#[derive(Debug, Clone)]
pub struct ConfinedFs {
    root: PathBuf,
}

impl ConfinedFs {
    /// Confines to `cwd` (canonicalized now, so a later change of the link does not move it).
    pub fn new(cwd: &Path) -> std::io::Result<Self> {
        Ok(Self { root: cwd.canonicalize()? })
    }

    /// The real path `requested` names, when it is inside the root; the file itself need not
    /// exist, but its deepest existing ancestor must be inside after links are followed.
    pub fn resolve(&self, requested: &Path) -> Result<PathBuf, FsRefusal> {
        if !requested.is_absolute() {
            return Err(FsRefusal::Relative);
        }
        if requested.components().any(|c| c == Component::ParentDir) {
            return Err(FsRefusal::ParentComponent);
        }
        let mut existing = requested.to_path_buf();
        let mut rest = Vec::new();
        let real = loop {
            match existing.canonicalize() {
                Ok(real) => break real,
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    let name = existing.file_name().ok_or(FsRefusal::OutsideCwd)?.to_os_string();
                    rest.push(name);
                    if !existing.pop() {
                        return Err(FsRefusal::OutsideCwd);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        };
        if !real.starts_with(&self.root) {
            return Err(FsRefusal::OutsideCwd);
        }
        Ok(rest.into_iter().rev().fold(real, |path, name| path.join(name)))
    }

    /// Serves `fs/read_text_file`: the file's text, or the `limit` lines from 1-based `line`.
    pub fn read(&self, request: &ReadTextFileRequest) -> Result<String, FsRefusal> {
        let path = self.resolve(&request.path)?;
        let len = std::fs::metadata(&path)?.len();
        if len > READ_CAP {
            return Err(FsRefusal::TooLarge);
        }
        let text = String::from_utf8_lossy(&std::fs::read(&path)?).into_owned();
        if request.line.is_none() && request.limit.is_none() {
            return Ok(text);
        }
        let skip = request.line.map_or(0, |l| l.saturating_sub(1)) as usize;
        let take = request.limit.map_or(usize::MAX, |l| l as usize);
        Ok(text.split_inclusive('\n').skip(skip).take(take).collect())
    }

    /// Serves `fs/write_text_file`, creating missing parent folders (inside the root only).
    pub fn write(&self, request: &WriteTextFileRequest) -> Result<PathBuf, FsRefusal> {
        let path = self.resolve(&request.path)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        // Re-check after creating folders: a link swapped in meanwhile must not redirect the write.
        let path = self.resolve(&path)?;
        std::fs::write(&path, request.content.as_bytes())?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol_schema::SessionId;

    fn read(fs: &ConfinedFs, path: &Path) -> Result<String, FsRefusal> {
        fs.read(&ReadTextFileRequest::new(SessionId::new("s"), path))
    }

    fn write(fs: &ConfinedFs, path: &Path, text: &str) -> Result<PathBuf, FsRefusal> {
        fs.write(&WriteTextFileRequest::new(SessionId::new("s"), path, text))
    }

    #[test]
    fn inside_reads_and_writes_work_and_lines_are_sliced() {
        let dir = tempfile::tempdir().unwrap();
        let fs = ConfinedFs::new(dir.path()).unwrap();
        let file = dir.path().join("sub/new.txt");
        write(&fs, &file, "a\nb\nc\n").unwrap();
        assert_eq!(read(&fs, &file).unwrap(), "a\nb\nc\n");
        let sliced = fs.read(&ReadTextFileRequest::new(SessionId::new("s"), &file).line(2).limit(1)).unwrap();
        assert_eq!(sliced, "b\n");
        assert!(matches!(read(&fs, &dir.path().join("missing.txt")), Err(FsRefusal::NotFound)));
    }

    #[test]
    fn escapes_are_refused_and_touch_nothing_outside() {
        let outer = tempfile::tempdir().unwrap();
        let cwd = outer.path().join("cwd");
        std::fs::create_dir(&cwd).unwrap();
        std::fs::write(outer.path().join("secret.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(outer.path(), cwd.join("link")).unwrap();
        let fs = ConfinedFs::new(&cwd).unwrap();
        assert!(matches!(read(&fs, Path::new("secret.txt")), Err(FsRefusal::Relative)));
        assert!(matches!(read(&fs, &cwd.join("../secret.txt")), Err(FsRefusal::ParentComponent)));
        assert!(matches!(read(&fs, &outer.path().join("secret.txt")), Err(FsRefusal::OutsideCwd)));
        assert!(matches!(read(&fs, &cwd.join("link/secret.txt")), Err(FsRefusal::OutsideCwd)));
        assert!(matches!(write(&fs, &cwd.join("link/new/x.txt"), "x"), Err(FsRefusal::OutsideCwd)));
        assert!(matches!(write(&fs, &cwd.join("link/secret.txt"), "x"), Err(FsRefusal::OutsideCwd)));
        assert!(!outer.path().join("new").exists());
        assert_eq!(std::fs::read_to_string(outer.path().join("secret.txt")).unwrap(), "secret");
    }
}
