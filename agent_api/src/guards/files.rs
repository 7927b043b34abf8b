//! File access that names come from outside: bounded reads of a caller's files, and the file
//! service the SDK performs on an agent's behalf, confined by the kernel to one directory.
//!
//! Both treat every name as hostile:
//!
//! - [`read_regular`] (and [`read_regular_async`], which runs it on the blocking pool) reads a
//!   file a caller named (`--image`, a JSON Schema, an MCP config, a history store): it opens
//!   the name without blocking (`O_NONBLOCK`), asks the *open file* what it is and how big it is
//!   (`fstat`, never `metadata()` of the name, which a swap would fool), refuses anything but a
//!   regular file (a FIFO, a socket, `/dev/zero`) and anything over the cap, and reads at most
//!   the cap. Nothing a caller names can make it wait or fill memory.
//! - [`ConfinedDir`] serves reads and writes an agent asks for (ACP's `fs/*` methods) beneath a
//!   working directory opened once. Every open is `openat2` relative to that directory's handle
//!   with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`: a symbolic link at any
//!   component, dangling or not, and any `..` are refused by the kernel at the moment of the
//!   open, so a path swapped between a check and its use has nothing to exploit (there is no
//!   separate check). Missing parent folders of a write are made one component at a time, each
//!   relative to the handle of the one before. Only regular files are read or written (opened
//!   `O_NONBLOCK`, then `fstat`), a file with more than one hard link is refused for reads and
//!   writes alike (another name, perhaps outside the directory, reaches the same file: reading
//!   it would show that file, writing it would change it), and reads are bounded.
//!
//! ```
//! use agent_api::kit::files::{ConfinedDir, FileRefusal};
//! let outer = tempfile::tempdir().unwrap();
//! let cwd = outer.path().join("cwd");
//! std::fs::create_dir(&cwd).unwrap();
//! std::os::unix::fs::symlink(outer.path().join("outside.txt"), cwd.join("dangling")).unwrap();
//!
//! let dir = ConfinedDir::open(&cwd).unwrap();
//! dir.write(&cwd.join("notes/plan.md"), b"step 1").unwrap();
//! assert_eq!(dir.read(&cwd.join("notes/plan.md"), 1024).unwrap(), b"step 1");
//! // A dangling link to a file outside: refused, and nothing is created out there.
//! assert!(matches!(dir.write(&cwd.join("dangling"), b"x"), Err(FileRefusal::Symlink)));
//! assert!(!outer.path().join("outside.txt").exists());
//! ```

use std::io::{ErrorKind, Read, Write};
use std::path::{Component, Path, PathBuf};

/// Why a file was not read or written.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileRefusal {
    /// The path is relative where an absolute one is required.
    #[error("the path is not absolute")]
    Relative,
    /// The path has a `..` component.
    #[error("the path has a `..` component")]
    ParentComponent,
    /// The path names something outside the confining directory.
    #[error("the path is outside the working directory")]
    OutsideRoot,
    /// A component of the path is a symbolic link (followed links could lead anywhere).
    #[error("the path goes through a symbolic link")]
    Symlink,
    /// The path names a FIFO, a socket, a device or a directory, not a regular file.
    #[error("not a regular file")]
    NotRegular,
    /// The file has more than one hard link: another name, perhaps outside the confining
    /// directory, reaches the same file.
    #[error("the file has {links} hard links; another name, perhaps outside the working directory, reaches the same file")]
    HardLinked {
        /// How many names the file has.
        links: u64,
    },
    /// The file does not exist.
    #[error("the file does not exist")]
    NotFound,
    /// The file is larger than the cap.
    #[error("the file is larger than {cap} bytes")]
    TooLarge {
        /// The largest size allowed, in bytes.
        cap: u64,
    },
    /// A folder holds more names than a listing of it takes.
    #[error("the folder holds more than {bound} names")]
    TooMany {
        /// The most names a listing takes.
        bound: u64,
    },
    /// This system cannot confine file access (no `openat2`: Linux 5.6 or later is needed).
    #[error("confined file access needs openat2 (Linux 5.6 or later)")]
    Unsupported,
    /// Reading or writing failed.
    #[error("file-system error: {0}")]
    Io(ErrorKind),
}

impl FileRefusal {
    /// Whether the request was refused as a way out of the confining directory (as opposed to a
    /// file that is missing, too large, or not a regular file).
    pub fn is_escape(&self) -> bool {
        matches!(
            self,
            Self::Relative
                | Self::ParentComponent
                | Self::OutsideRoot
                | Self::Symlink
                | Self::HardLinked { .. }
        )
    }
}

impl From<std::io::Error> for FileRefusal {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            ErrorKind::NotFound => Self::NotFound,
            kind => Self::Io(kind),
        }
    }
}

/// Reads the regular file `path` names, at most `cap` bytes, without ever waiting on it: a FIFO,
/// socket or device is refused before a byte is read, and the size comes from the open file.
///
/// Symbolic links are followed: the name is the caller's own, confined by nothing but the
/// caller's rights. Blocking (disk I/O of at most `cap` bytes): from async code use
/// [`read_regular_async`].
///
/// ```
/// use agent_api::kit::files::{read_regular, FileRefusal};
/// assert_eq!(read_regular("/dev/zero".as_ref(), 1024), Err(FileRefusal::NotRegular));
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
/// assert_eq!(read_regular(&dir.path().join("a.txt"), 5).unwrap(), b"hello");
/// assert_eq!(read_regular(&dir.path().join("a.txt"), 4), Err(FileRefusal::TooLarge { cap: 4 }));
/// ```
pub fn read_regular(path: &Path, cap: u64) -> Result<Vec<u8>, FileRefusal> {
    read_open_file(open_regular(path)?, cap)
}

/// Opens the regular file `path` names for reading, without ever waiting on it: opened
/// `O_NONBLOCK` (a FIFO does not wait for a writer), then asked what it is (`fstat` of the open
/// file); a FIFO, socket, device or directory is refused. Reading the returned file is
/// unbounded: bound it (`Read::take`) or use [`read_regular`].
pub fn open_regular(path: &Path) -> Result<std::fs::File, FileRefusal> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(FileRefusal::NotRegular);
    }
    Ok(file)
}

/// [`read_regular`] on the blocking pool, for async code: the runtime's threads never wait on a
/// caller's file.
pub async fn read_regular_async(path: PathBuf, cap: u64) -> Result<Vec<u8>, FileRefusal> {
    tokio::task::spawn_blocking(move || read_regular(&path, cap))
        .await
        .unwrap_or(Err(FileRefusal::Io(ErrorKind::Interrupted)))
}

/// The bytes of an open file, when it is regular and within `cap` (checked on the open file, and
/// again while reading: a file that grows past the cap is refused, not cut).
fn read_open_file(mut file: std::fs::File, cap: u64) -> Result<Vec<u8>, FileRefusal> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(FileRefusal::NotRegular);
    }
    if meta.len() > cap {
        return Err(FileRefusal::TooLarge { cap });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&mut file)
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(FileRefusal::TooLarge { cap });
    }
    Ok(bytes)
}

/// A directory an agent's file requests are confined to, held open for the life of the run: a
/// later rename or replacement of its path does not move the confinement.
#[derive(Debug, Clone)]
pub struct ConfinedDir {
    /// The directory, opened `O_PATH`; `None` where the system cannot confine (every request is
    /// then refused with [`FileRefusal::Unsupported`]).
    #[cfg(target_os = "linux")]
    root: std::sync::Arc<std::os::fd::OwnedFd>,
    /// The path it was opened by, and its canonical form: an agent may name files by either.
    given: PathBuf,
    canonical: PathBuf,
}

impl ConfinedDir {
    /// Opens `dir` as the confining directory.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        let canonical = dir.canonicalize()?;
        #[cfg(target_os = "linux")]
        let root = {
            use rustix::fs::{Mode, OFlags};
            let fd = rustix::fs::open(
                &canonical,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            std::sync::Arc::new(fd)
        };
        Ok(Self {
            #[cfg(target_os = "linux")]
            root,
            given: std::path::absolute(dir)?,
            canonical,
        })
    }

    /// The confining directory, canonical.
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// The path below the directory that the absolute `requested` names, as plain components
    /// (`.` dropped, `..` refused). The kernel, not this function, keeps the open beneath the
    /// directory; this only turns the agent's absolute path into a relative one.
    pub fn relative(&self, requested: &Path) -> Result<PathBuf, FileRefusal> {
        if !requested.is_absolute() {
            return Err(FileRefusal::Relative);
        }
        if requested.components().any(|c| c == Component::ParentDir) {
            return Err(FileRefusal::ParentComponent);
        }
        let rest = requested
            .strip_prefix(&self.canonical)
            .or_else(|_| requested.strip_prefix(&self.given))
            .map_err(|_| FileRefusal::OutsideRoot)?;
        let relative: PathBuf = rest
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        if relative.as_os_str().is_empty() {
            return Err(FileRefusal::NotRegular);
        }
        Ok(relative)
    }

    /// Reads the regular file `requested` names (absolute, beneath the directory), at most `cap`
    /// bytes; a file with more than one hard link is refused as a write is.
    pub fn read(&self, requested: &Path, cap: u64) -> Result<Vec<u8>, FileRefusal> {
        let relative = self.relative(requested)?;
        self.read_relative(&relative, cap)
    }

    /// Writes `content` to the file `requested` names (absolute, beneath the directory),
    /// creating it and its missing parent folders; an existing file must be regular with one
    /// hard link. Returns the file's path, canonical.
    pub fn write(&self, requested: &Path, content: &[u8]) -> Result<PathBuf, FileRefusal> {
        let relative = self.relative(requested)?;
        self.write_relative(&relative, content)?;
        Ok(self.canonical.join(relative))
    }

    /// Reads the regular file at `relative` (plain components below the directory), at most
    /// `cap` bytes, with the time it was last written.
    pub fn read_below(
        &self,
        relative: &Path,
        cap: u64,
    ) -> Result<(Vec<u8>, Option<std::time::SystemTime>), FileRefusal> {
        let file = self.open_below(relative)?;
        let modified = file.metadata().ok().and_then(|m| m.modified().ok());
        Ok((read_open_file(file, cap)?, modified))
    }

    /// Writes `content` to `relative` (plain components below the directory) as a private file
    /// (mode 0600, missing folders 0700, whatever the umask), all at once: the bytes go to a new
    /// file beside it that is then renamed over the name, so a reader never sees half of it and a
    /// link or hard link at the name is replaced, never written through.
    pub fn replace_private(&self, relative: &Path, content: &[u8]) -> Result<(), FileRefusal> {
        self.replace_relative(relative, content)
    }

    #[cfg(target_os = "linux")]
    fn open_below(&self, relative: &Path) -> Result<std::fs::File, FileRefusal> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = beneath(&self.root, relative, flags, Mode::empty())?;
        // A second name may be outside the directory: refused for reads as for writes.
        Ok(std::fs::File::from(single_link(fd)?))
    }

    #[cfg(not(target_os = "linux"))]
    fn open_below(&self, _relative: &Path) -> Result<std::fs::File, FileRefusal> {
        Err(FileRefusal::Unsupported)
    }

    /// The folder `relative`'s parent names, made where missing with `dir_mode`, each folder
    /// opened from the handle of the one before (never resolved again from the top).
    #[cfg(target_os = "linux")]
    fn parent_below(
        &self,
        relative: &Path,
        dir_mode: u32,
    ) -> Result<Option<std::os::fd::OwnedFd>, FileRefusal> {
        use rustix::fs::{Mode, OFlags};
        let mut parent: Option<std::os::fd::OwnedFd> = None;
        for folder in relative.parent().into_iter().flat_map(Path::components) {
            let at = parent.as_ref().unwrap_or(&self.root);
            let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let fd = match beneath(at, Path::new(folder.as_os_str()), dir_flags, Mode::empty()) {
                Err(FileRefusal::NotFound) => {
                    match rustix::fs::mkdirat(at, folder.as_os_str(), Mode::from_raw_mode(dir_mode))
                    {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(std::io::Error::from(e).into()),
                    }
                    beneath(at, Path::new(folder.as_os_str()), dir_flags, Mode::empty())?
                }
                other => other?,
            };
            parent = Some(fd);
        }
        Ok(parent)
    }

    #[cfg(target_os = "linux")]
    fn replace_relative(&self, relative: &Path, content: &[u8]) -> Result<(), FileRefusal> {
        use rustix::fs::{Mode, OFlags};
        let name = relative.file_name().ok_or(FileRefusal::NotRegular)?;
        let parent = self.parent_below(relative, 0o700)?;
        let at = parent.as_ref().unwrap_or(&self.root);
        let mut temporary = std::ffi::OsString::from(".");
        temporary.push(name);
        temporary.push(format!(".agent_api-{}-{}", std::process::id(), unique()));
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = beneath(at, Path::new(&temporary), flags, Mode::from_raw_mode(0o600))?;
        // The umask may have taken bits away, never added any; set exactly 0600.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600)).map_err(std::io::Error::from)?;
        let mut file = std::fs::File::from(fd);
        let written = file.write_all(content).and_then(|()| file.sync_data());
        let renamed = written.and_then(|()| {
            rustix::fs::renameat(at, temporary.as_os_str(), at, name).map_err(Into::into)
        });
        if let Err(e) = renamed {
            let _ = rustix::fs::unlinkat(at, temporary.as_os_str(), rustix::fs::AtFlags::empty());
            return Err(e.into());
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    fn replace_relative(&self, _relative: &Path, _content: &[u8]) -> Result<(), FileRefusal> {
        Err(FileRefusal::Unsupported)
    }

    fn read_relative(&self, relative: &Path, cap: u64) -> Result<Vec<u8>, FileRefusal> {
        read_open_file(self.open_below(relative)?, cap)
    }

    #[cfg(target_os = "linux")]
    fn write_relative(&self, relative: &Path, content: &[u8]) -> Result<(), FileRefusal> {
        use rustix::fs::{Mode, OFlags};
        let name = relative.file_name().ok_or(FileRefusal::NotRegular)?;
        // Each missing folder is made in, and then opened from, the handle of the one before:
        // no name is ever resolved again from the top, so nothing swapped in can redirect it.
        let parent = self.parent_below(relative, 0o777)?;
        let at = parent.as_ref().unwrap_or(&self.root);
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = beneath(at, Path::new(name), flags, Mode::from_raw_mode(0o666))?;
        let mut file = std::fs::File::from(single_link(fd)?);
        file.set_len(0)?;
        file.write_all(content)?;
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    fn write_relative(&self, _relative: &Path, _content: &[u8]) -> Result<(), FileRefusal> {
        Err(FileRefusal::Unsupported)
    }
}

/// `fd` when it is a regular file with one name: a second hard link may be a name outside the
/// confining directory for the same file (asked of the open file, so no swap fools it).
#[cfg(target_os = "linux")]
fn single_link(fd: std::os::fd::OwnedFd) -> Result<std::os::fd::OwnedFd, FileRefusal> {
    let stat = rustix::fs::fstat(&fd).map_err(std::io::Error::from)?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(FileRefusal::NotRegular);
    }
    // `st_nlink` is narrower than u64 on some targets.
    #[allow(clippy::useless_conversion)]
    let links = u64::from(stat.st_nlink);
    if links > 1 {
        return Err(FileRefusal::HardLinked { links });
    }
    Ok(fd)
}

/// `openat2(at, relative, flags, mode)` kept beneath `at`, through no symbolic link, with the
/// kernel's refusals named.
#[cfg(target_os = "linux")]
fn beneath(
    at: &std::os::fd::OwnedFd,
    relative: &Path,
    flags: rustix::fs::OFlags,
    mode: rustix::fs::Mode,
) -> Result<std::os::fd::OwnedFd, FileRefusal> {
    use rustix::fs::ResolveFlags;
    use rustix::io::Errno;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    loop {
        return match rustix::fs::openat2(at, relative, flags, mode, resolve) {
            Ok(fd) => Ok(fd),
            // openat2 asks to be retried when a rename raced its walk.
            Err(Errno::AGAIN) | Err(Errno::INTR) => continue,
            Err(Errno::LOOP) => Err(FileRefusal::Symlink),
            Err(Errno::XDEV) => Err(FileRefusal::OutsideRoot),
            Err(Errno::NOSYS) => Err(FileRefusal::Unsupported),
            // Opening a socket, or a FIFO for writing with no reader: not a regular file.
            Err(Errno::NXIO) | Err(Errno::OPNOTSUPP) => Err(FileRefusal::NotRegular),
            Err(Errno::ISDIR) => Err(FileRefusal::NotRegular),
            Err(Errno::NOTDIR) => Err(FileRefusal::Io(ErrorKind::NotADirectory)),
            Err(e) => Err(std::io::Error::from(e).into()),
        };
    }
}

/// A number no other temporary file of this process has.
#[cfg(target_os = "linux")]
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Finds `program` the way `execvp` would: a path with a slash as is, else on `PATH`.
pub fn resolve_program(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests;
