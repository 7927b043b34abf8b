//! `fs/read_text_file` and `fs/write_text_file`, served by the SDK and confined by the kernel to
//! the run's working directory ([`agent_api::kit::files::ConfinedDir`]: `openat2` beneath the
//! directory's handle, no symbolic link and no `..` at any component, regular files only, reads
//! bounded). This module adds only what is ACP's: the requests' shapes, line slicing, and the
//! JSON-RPC error codes of the refusals.

use std::path::{Path, PathBuf};

use agent_api::kit::files::{ConfinedDir, FileRefusal};
use agent_client_protocol_schema::{ReadTextFileRequest, WriteTextFileRequest};

/// Largest file served by `fs/read_text_file` (it travels as one JSON-RPC line).
pub(crate) const READ_CAP: u64 = 8 * 1024 * 1024;

/// The run's working directory, as the file-system methods see it.
#[derive(Debug, Clone)]
pub struct ConfinedFs {
    dir: ConfinedDir,
}

/// The JSON-RPC error code a refusal is answered with: ACP's "resource not found" for a missing
/// file, "internal error" for a failed read or write, "invalid params" for every refusal.
pub(crate) fn error_code(refusal: &FileRefusal) -> i64 {
    match refusal {
        FileRefusal::NotFound => -32002,
        FileRefusal::Io(_) => -32603,
        _ => -32602,
    }
}

/// The status label of a refusal: `fs_refused` for a way out of the working directory,
/// `fs_failed` for anything else.
pub(crate) fn status_label(refusal: &FileRefusal) -> &'static str {
    if refusal.is_escape() {
        "fs_refused"
    } else {
        "fs_failed"
    }
}

impl ConfinedFs {
    /// Confines to `cwd`, held open from now on (a later change of its path does not move it).
    pub fn new(cwd: &Path) -> std::io::Result<Self> {
        Ok(Self {
            dir: ConfinedDir::open(cwd)?,
        })
    }

    /// Serves `fs/read_text_file`: the file's text, or the `limit` lines from 1-based `line`.
    pub fn read(&self, request: &ReadTextFileRequest) -> Result<String, FileRefusal> {
        let text = self.read_text(&request.path)?;
        if request.line.is_none() && request.limit.is_none() {
            return Ok(text);
        }
        let skip = request.line.map_or(0, |l| l.saturating_sub(1)) as usize;
        let take = request.limit.map_or(usize::MAX, |l| l as usize);
        Ok(text.split_inclusive('\n').skip(skip).take(take).collect())
    }

    /// The whole text of the file at `path` (absolute, beneath the directory; at most
    /// [`READ_CAP`] bytes, invalid UTF-8 replaced).
    pub(crate) fn read_text(&self, path: &Path) -> Result<String, FileRefusal> {
        Ok(String::from_utf8_lossy(&self.dir.read(path, READ_CAP)?).into_owned())
    }

    /// Serves `fs/write_text_file`, creating missing parent folders (inside the directory only);
    /// returns the file's path.
    pub fn write(&self, request: &WriteTextFileRequest) -> Result<PathBuf, FileRefusal> {
        self.dir.write(&request.path, request.content.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol_schema::SessionId;

    fn read(fs: &ConfinedFs, path: &Path) -> Result<String, FileRefusal> {
        fs.read(&ReadTextFileRequest::new(SessionId::new("s"), path))
    }

    fn write(fs: &ConfinedFs, path: &Path, text: &str) -> Result<PathBuf, FileRefusal> {
        fs.write(&WriteTextFileRequest::new(SessionId::new("s"), path, text))
    }

    #[test]
    fn inside_reads_and_writes_work_and_lines_are_sliced() {
        let dir = tempfile::tempdir().unwrap();
        let fs = ConfinedFs::new(dir.path()).unwrap();
        let file = dir.path().join("sub/new.txt");
        write(&fs, &file, "a\nb\nc\n").unwrap();
        assert_eq!(read(&fs, &file).unwrap(), "a\nb\nc\n");
        let sliced = fs
            .read(
                &ReadTextFileRequest::new(SessionId::new("s"), &file)
                    .line(2)
                    .limit(1),
            )
            .unwrap();
        assert_eq!(sliced, "b\n");
        assert_eq!(
            read(&fs, &dir.path().join("missing.txt")),
            Err(FileRefusal::NotFound)
        );
    }

    #[test]
    fn refusals_map_to_json_rpc_codes_and_labels() {
        assert_eq!(
            (
                error_code(&FileRefusal::NotFound),
                status_label(&FileRefusal::NotFound)
            ),
            (-32002, "fs_failed")
        );
        assert_eq!(
            (
                error_code(&FileRefusal::Symlink),
                status_label(&FileRefusal::Symlink)
            ),
            (-32602, "fs_refused")
        );
        let hard = FileRefusal::HardLinked { links: 2 };
        assert_eq!(
            (error_code(&hard), status_label(&hard)),
            (-32602, "fs_refused")
        );
        let fifo = FileRefusal::NotRegular;
        assert_eq!(
            (error_code(&fifo), status_label(&fifo)),
            (-32602, "fs_failed")
        );
    }
}
