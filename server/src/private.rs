//! Files only this server's user may read: transcripts and a message's images are the
//! operator's data. Directories this server makes are 0700 and its files 0600, set explicitly,
//! whatever the process's umask.

use std::fs::Permissions;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Creates `dir` and its missing parents, each made here 0700 (one that exists is left as it is).
pub(crate) fn create_dirs(dir: &Path) -> std::io::Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(path) = at.filter(|p| !p.as_os_str().is_empty()) {
        if path.exists() {
            break;
        }
        missing.push(path);
        at = path.parent();
    }
    for path in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => std::fs::set_permissions(path, Permissions::from_mode(0o700))?,
            // Made meanwhile by another: not ours to change.
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Makes `dir` (one of this server's own) 0700.
pub(crate) fn own_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::set_permissions(dir, Permissions::from_mode(0o700))
}

/// Makes the file `path` 0600, creating it empty when missing (SQLite gives its WAL and shared
/// memory files the database file's mode).
pub(crate) fn private_file(path: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    std::fs::set_permissions(path, Permissions::from_mode(0o600))
}

/// Makes those of the files `paths` that exist 0600.
pub(crate) fn private_if_there<'a>(
    paths: impl IntoIterator<Item = &'a Path>,
) -> std::io::Result<()> {
    for path in paths {
        match std::fs::set_permissions(path, Permissions::from_mode(0o600)) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    Ok(())
}

/// Writes `bytes` to the new file `path`, 0600 from its creation.
pub(crate) fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(Permissions::from_mode(0o600))?;
    file.write_all(bytes)
}
