//! A snapshot's files where the agent runs elsewhere (the Prefix, Container and Ssh launchers):
//! its home is on the far side, so each file is read and written there by a small POSIX `sh`
//! script started through the same launcher as the agent ([`crate::kit::process::spawn`]: the
//! same far wrapper, environment and stop), never by this process's own filesystem calls.
//!
//! A backend that finds a session's file by looking through a folder of its home (files by
//! date, by project) gets that folder's listing the same way
//! ([`list_below`]): a walk bounded in depth and in bytes there, printing each entry as a type
//! and a path of plain names, each ended by a NUL (no name holds one); here every name is checked
//! again, the count is bounded, and a symbolic link anywhere in the walk is refused.
//!
//! The scripts get the directory and the file's path as separate arguments (one per component,
//! plain names only, checked here first), so no path is ever parsed as shell text. On the far
//! side a symbolic link in the path is refused, as is a file that is not regular or has another
//! name (hard link); a read is bounded there (`head -c`) and here (what this side takes from the
//! pipe), and a write goes to a new private file (umask 077) beside the name, checked for its
//! length, then renamed over it, so a link at the name is replaced, never written through. The
//! far side is the agent's own machine or container: a path there reaches only what the agent
//! itself can reach, and nothing of this machine's filesystem is touched.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::guards::files::FileRefusal;
use crate::kit::command::CommandSpec;
use crate::vocabulary::launcher::Launcher;

/// The longest one file's transfer may take, the far side's start included (an ssh connection).
const TRANSFER_LIMIT: Duration = Duration::from_secs(120);
/// What is kept of the far script's stderr, for the log.
const STDERR_KEPT: u64 = 4096;

/// The start of a script given `$dir` and the path's components as its arguments: goes into
/// `$dir`, then into each component but the last `$keep`, none a symbolic link (exit 11), each a
/// folder (exit 10: not found).
macro_rules! into_folder {
    () => {
        r#"[ -d "$dir" ] || exit 10
cd -P -- "$dir" || exit 10
while [ "$#" -gt "$keep" ]; do
  [ -L "$1" ] && exit 11
  [ -d "$1" ] || exit 10
  cd -- "$1" || exit 10
  shift
done
"#
    };
}

/// Reads `$1/$3/…/$N` (the path's components) when it is a regular file with one name reached
/// through no symbolic link: prints `LINKS SIZE MTIME` on a line, then at most `$2` bytes of it
/// (none when it has another name or is larger). Exit 10: not found; 11: a link; 12: not regular.
const READ_SCRIPT: &str = concat!(
    r#"dir=$1; most=$2; shift 2; keep=1
"#,
    into_folder!(),
    r#"[ -L "$1" ] && exit 11
[ -e "$1" ] || exit 10
[ -f "$1" ] || exit 12
meta=$(stat -c '%h %s %Y' -- "$1") || exit 13
printf '%s\n' "$meta"
set -- "$1" $meta
[ "$2" = 1 ] && [ "$3" -lt "$most" ] || exit 0
exec head -c "$most" -- "$1""#
);

/// Writes stdin to `$1/$3/…/$N` (missing folders made, private), when it is `$2` bytes: to a new
/// file beside the name, renamed over it. Exit 11: a link on the way; 12: a folder on the way is
/// not one; 14: the write failed; 15: the bytes were not all there.
const WRITE_SCRIPT: &str = r#"dir=$1; size=$2; shift 2
umask 077
mkdir -p -- "$dir" && cd -P -- "$dir" || exit 14
while [ "$#" -gt 1 ]; do
  [ -L "$1" ] && exit 11
  [ -d "$1" ] || mkdir -- "$1" || exit 12
  cd -- "$1" || exit 12
  shift
done
[ -L "$1" ] || [ ! -e "$1" ] || [ -f "$1" ] || exit 12
new=".$1.agent-api-$$"
cat > "$new" || { rm -f -- "$new"; exit 14; }
[ "$(wc -c < "$new")" -eq "$size" ] || { rm -f -- "$new"; exit 15; }
mv -f -- "$new" "$1""#;

/// Lists `$1/$3/…/$N` (the folder's components, none a symbolic link) to a depth of `$2`: each
/// regular file as `f PATH`, each symbolic link as `l PATH` (never followed), PATH below the
/// folder, each entry ended by a NUL; at most `$3` bytes in all (`head -c`). Folders deeper than
/// the depth and anything else (a FIFO, a socket) are left out. Exit 10: no such folder; 11: a
/// link on the way.
const LIST_SCRIPT: &str = concat!(
    r#"dir=$1; depth=$2; most=$3; shift 3; keep=0
"#,
    into_folder!(),
    r#"walk() (
  cd -- "$1" || exit 0
  for name in * .[!.]* ..?*; do
    if [ -L "$name" ]; then printf 'l %s%s\0' "$2" "$name"
    elif [ -f "$name" ]; then printf 'f %s%s\0' "$2" "$name"
    elif [ -d "$name" ] && [ "$3" -gt 1 ]; then walk "$name" "$2$name/" $(($3 - 1))
    fi
  done
)
walk . "" "$depth" | head -c "$most""#
);

/// What a far listing prints at most, in bytes: past it, the folder holds too many names.
const LISTING_BYTES: u64 = 4 * 1024 * 1024;

/// The regular files in the folder `under` below `dir` on `launcher`'s far side, at most `depth`
/// folders down, as paths below `dir` (`under` first), at most `bound` of them; a symbolic link
/// met on the way or in the walk is refused, as is a listing past the bounds (see the module
/// docs). [`FileRefusal::NotFound`] when there is no such folder.
pub(crate) async fn list_below(
    launcher: &Launcher,
    dir: &Path,
    under: &Path,
    depth: usize,
    bound: usize,
) -> Result<Vec<PathBuf>, FileRefusal> {
    let mut args = vec![
        dir.as_os_str().to_owned(),
        depth.to_string().into(),
        (LISTING_BYTES + 1).to_string().into(),
    ];
    args.extend(plain_names(under)?);
    let out = run(launcher, LIST_SCRIPT, args, None, LISTING_BYTES + 1).await?;
    parse_listing(&out, under, depth, bound)
}

/// The paths of a far listing's files (`f PATH`, each entry ended by a NUL), below `under`: every
/// component a plain name, no deeper than `depth`, at most `bound` of them; a link (`l PATH`) is
/// refused, and so is anything else the far side printed.
fn parse_listing(
    out: &[u8],
    under: &Path,
    depth: usize,
    bound: usize,
) -> Result<Vec<PathBuf>, FileRefusal> {
    use std::os::unix::ffi::OsStrExt;
    if out.len() as u64 > LISTING_BYTES {
        return Err(FileRefusal::TooMany {
            bound: bound as u64,
        });
    }
    let Some(entries) = out.strip_suffix(b"\0") else {
        return if out.is_empty() {
            Ok(Vec::new())
        } else {
            Err(FileRefusal::Io(std::io::ErrorKind::InvalidData))
        };
    };
    let mut files = Vec::new();
    for entry in entries.split(|b| *b == 0) {
        let path = match entry {
            [b'f', b' ', path @ ..] => path,
            [b'l', b' ', ..] => return Err(FileRefusal::Symlink),
            _ => return Err(FileRefusal::Io(std::io::ErrorKind::InvalidData)),
        };
        let names: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
        let plain = |name: &&[u8]| !name.is_empty() && *name != b"." && *name != b"..";
        if names.len() > depth || !names.iter().all(plain) {
            return Err(FileRefusal::Io(std::io::ErrorKind::InvalidData));
        }
        if files.len() == bound {
            return Err(FileRefusal::TooMany {
                bound: bound as u64,
            });
        }
        files.push(under.join(std::ffi::OsStr::from_bytes(path)));
    }
    Ok(files)
}

/// Reads the regular file at `relative` below `dir` on `launcher`'s far side, at most `cap`
/// bytes, with the time it was last written (see the module docs).
pub(crate) async fn read_below(
    launcher: &Launcher,
    dir: &Path,
    relative: &Path,
    cap: u64,
) -> Result<(Vec<u8>, Option<SystemTime>), FileRefusal> {
    let most = cap.saturating_add(1);
    let mut args = vec![dir.as_os_str().to_owned(), most.to_string().into()];
    args.extend(components(relative)?);
    let out = run(launcher, READ_SCRIPT, args, None, cap.saturating_add(64)).await?;
    let newline = out
        .iter()
        .position(|b| *b == b'\n')
        .ok_or(FileRefusal::Io(std::io::ErrorKind::InvalidData))?;
    let meta = String::from_utf8_lossy(&out[..newline]).into_owned();
    let mut fields = meta.split_whitespace().map(str::parse::<u64>);
    let (Some(Ok(links)), Some(Ok(size)), Some(Ok(mtime))) =
        (fields.next(), fields.next(), fields.next())
    else {
        return Err(FileRefusal::Io(std::io::ErrorKind::InvalidData));
    };
    if links > 1 {
        return Err(FileRefusal::HardLinked { links });
    }
    let bytes = out[newline + 1..].to_vec();
    if size > cap || bytes.len() as u64 > cap {
        return Err(FileRefusal::TooLarge { cap });
    }
    let modified = SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(mtime));
    Ok((bytes, modified))
}

/// Writes `content` to `relative` below `dir` on `launcher`'s far side, as a private file
/// replacing whatever is at the name (see the module docs).
pub(crate) async fn replace_private(
    launcher: &Launcher,
    dir: &Path,
    relative: &Path,
    content: &[u8],
) -> Result<(), FileRefusal> {
    let mut args = vec![dir.as_os_str().to_owned(), content.len().to_string().into()];
    args.extend(components(relative)?);
    run(launcher, WRITE_SCRIPT, args, Some(content), 0).await?;
    Ok(())
}

/// `relative`'s components, each a plain name, at least one: anything else is refused before
/// anything runs.
fn components(relative: &Path) -> Result<Vec<OsString>, FileRefusal> {
    let names = plain_names(relative)?;
    if names.is_empty() {
        return Err(FileRefusal::NotRegular);
    }
    Ok(names)
}

/// `relative`'s components (none for an empty path), each a plain name: a `..`, a root or a
/// prefix is refused.
pub(super) fn plain_names(relative: &Path) -> Result<Vec<OsString>, FileRefusal> {
    let mut names = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(name) => names.push(name.to_owned()),
            Component::ParentDir => return Err(FileRefusal::ParentComponent),
            _ => return Err(FileRefusal::OutsideRoot),
        }
    }
    Ok(names)
}

/// Runs `script` with `args` through `launcher`, `input` on its stdin, and returns at most
/// `kept` bytes of its stdout (plus one, so that more shows), mapping its exit status.
async fn run(
    launcher: &Launcher,
    script: &str,
    args: Vec<OsString>,
    input: Option<&[u8]>,
    kept: u64,
) -> Result<Vec<u8>, FileRefusal> {
    let mut spec = CommandSpec::new("sh")
        .args([OsString::from("-c"), script.into(), "agent-api".into()])
        .args(args)
        .with_launcher(launcher.clone());
    spec.stdin = input.is_some();
    let io = |e: &dyn std::fmt::Display| {
        tracing::warn!(error = %e, launcher = %launcher, "a snapshot file's transfer through the launcher failed");
        FileRefusal::Io(std::io::ErrorKind::Other)
    };
    let mut child = crate::kit::process::spawn(&spec).map_err(|e| io(&e))?;
    let far = child.far_group().cloned();
    let stdin = child.child.stdin.take();
    let stdout = child.child.stdout.take();
    let stderr = child.child.stderr.take();
    let work = async {
        let write = async {
            if let (Some(mut stdin), Some(input)) = (stdin, input) {
                stdin.write_all(input).await?;
                stdin.shutdown().await?;
            }
            Ok::<_, std::io::Error>(())
        };
        let mut out = Vec::new();
        let read = async {
            if let Some(stdout) = stdout {
                stdout
                    .take(kept.saturating_add(1))
                    .read_to_end(&mut out)
                    .await?;
            }
            Ok::<_, std::io::Error>(())
        };
        let mut err = Vec::new();
        let read_err = async {
            if let Some(stderr) = stderr {
                let _ = stderr.take(STDERR_KEPT).read_to_end(&mut err).await;
            }
            Ok::<_, std::io::Error>(())
        };
        let (written, read, _) = tokio::join!(write, read, read_err);
        // A script that refused early closes its stdin: its status says why, not the pipe.
        let status = child.child.wait().await?;
        read?;
        Ok::<_, std::io::Error>((status, written, out, err))
    };
    let outcome = tokio::time::timeout(TRANSFER_LIMIT, work).await;
    // Dropping the child kills what is left here; the far group is stopped and waited for, so
    // that nothing of the transfer outlives it there either.
    drop(child);
    if let Some(far) = far {
        far.stop().await;
    }
    let (status, written, out, err) = match outcome {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => return Err(io(&e)),
        Err(_) => return Err(FileRefusal::Io(std::io::ErrorKind::TimedOut)),
    };
    match status.code() {
        Some(0) => {
            written.map_err(|e| io(&e))?;
            Ok(out)
        }
        Some(10) => Err(FileRefusal::NotFound),
        Some(11) => Err(FileRefusal::Symlink),
        Some(12) => Err(FileRefusal::NotRegular),
        Some(15) => Err(FileRefusal::Io(std::io::ErrorKind::UnexpectedEof)),
        _ => {
            let shown = String::from_utf8_lossy(&err);
            Err(io(&format!(
                "exit {status}: {}",
                crate::guards::bounds::utf8_prefix(shown.trim(), 512)
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_crosses_as_plain_names_only() {
        assert_eq!(
            components(Path::new("projects/-w/s.jsonl")).unwrap(),
            ["projects", "-w", "s.jsonl"]
        );
        assert_eq!(
            components(Path::new("projects/../../etc/passwd")),
            Err(FileRefusal::ParentComponent)
        );
        assert_eq!(
            components(Path::new("/etc/passwd")),
            Err(FileRefusal::OutsideRoot)
        );
        assert_eq!(components(Path::new("")), Err(FileRefusal::NotRegular));
    }

    #[test]
    fn a_listing_takes_plain_names_within_its_bounds_and_refuses_links() {
        let under = Path::new("sessions");
        assert_eq!(
            parse_listing(b"f 2026/11/28/r.jsonl\0f a b\0", under, 4, 10).unwrap(),
            [
                PathBuf::from("sessions/2026/11/28/r.jsonl"),
                PathBuf::from("sessions/a b")
            ]
        );
        assert_eq!(
            parse_listing(b"", under, 4, 10).unwrap(),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            parse_listing(b"f a\0l 2026\0", under, 4, 10),
            Err(FileRefusal::Symlink)
        );
        assert_eq!(
            parse_listing(b"f a\0f b\0f c\0", under, 4, 2),
            Err(FileRefusal::TooMany { bound: 2 })
        );
        for hostile in [
            &b"f ../../etc/passwd\0"[..],
            b"f /etc/passwd\0",
            b"f a//b\0",
            b"f a/./b\0",
            b"f 1/2/3/4/5\0",
            b"d a\0",
            b"f a",
        ] {
            assert_eq!(
                parse_listing(hostile, under, 4, 10),
                Err(FileRefusal::Io(std::io::ErrorKind::InvalidData)),
                "{}",
                String::from_utf8_lossy(hostile)
            );
        }
    }
}
