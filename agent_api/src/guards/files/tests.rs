use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// An outer directory with a working directory `cwd` inside it and a `secret.txt` beside it.
struct Layout {
    outer: tempfile::TempDir,
    cwd: PathBuf,
}

impl Layout {
    fn new() -> Self {
        let outer = tempfile::tempdir().unwrap();
        let cwd = outer.path().join("cwd");
        std::fs::create_dir(&cwd).unwrap();
        std::fs::write(outer.path().join("secret.txt"), "secret").unwrap();
        Self { outer, cwd }
    }

    fn outside(&self, name: &str) -> PathBuf {
        self.outer.path().join(name)
    }

    fn dir(&self) -> ConfinedDir {
        ConfinedDir::open(&self.cwd).unwrap()
    }
}

/// Runs `f` on a thread and fails the test if it has not returned within 20 s: a refusal that
/// blocks instead of answering is the defect these tests look for.
fn without_hanging<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what} blocked instead of answering"))
}

fn mkfifo(path: &Path) {
    let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(name.as_ptr(), 0o600) },
        0,
        "mkfifo {}",
        path.display()
    );
}

#[test]
fn reads_and_writes_inside_work_and_make_missing_folders() {
    let layout = Layout::new();
    let dir = layout.dir();
    let written = dir.write(&layout.cwd.join("a/b/c.txt"), b"hello").unwrap();
    assert_eq!(
        written,
        layout.cwd.canonicalize().unwrap().join("a/b/c.txt")
    );
    assert_eq!(
        dir.read(&layout.cwd.join("a/b/c.txt"), 100).unwrap(),
        b"hello"
    );
    assert_eq!(
        dir.read(&layout.cwd.join("./a/./b/c.txt"), 100).unwrap(),
        b"hello"
    );
    // Overwriting truncates.
    dir.write(&layout.cwd.join("a/b/c.txt"), b"hi").unwrap();
    assert_eq!(std::fs::read(layout.cwd.join("a/b/c.txt")).unwrap(), b"hi");
    assert_eq!(
        dir.read(&layout.cwd.join("missing.txt"), 100),
        Err(FileRefusal::NotFound)
    );
}

#[test]
fn names_outside_relative_or_with_dot_dot_are_refused() {
    let layout = Layout::new();
    let dir = layout.dir();
    assert_eq!(
        dir.read(Path::new("secret.txt"), 100),
        Err(FileRefusal::Relative)
    );
    assert_eq!(
        dir.read(&layout.cwd.join("../secret.txt"), 100),
        Err(FileRefusal::ParentComponent)
    );
    assert_eq!(
        dir.read(&layout.outside("secret.txt"), 100),
        Err(FileRefusal::OutsideRoot)
    );
    assert_eq!(
        dir.write(&layout.outside("planted.txt"), b"x"),
        Err(FileRefusal::OutsideRoot)
    );
    assert_eq!(dir.write(&layout.cwd, b"x"), Err(FileRefusal::NotRegular));
    assert!(!layout.outside("planted.txt").exists());
}

#[test]
fn a_dangling_symlink_to_a_file_outside_is_never_written_through() {
    let layout = Layout::new();
    std::os::unix::fs::symlink(layout.outside("planted.txt"), layout.cwd.join("dangling")).unwrap();
    let dir = layout.dir();
    assert_eq!(
        dir.write(&layout.cwd.join("dangling"), b"pwned"),
        Err(FileRefusal::Symlink)
    );
    assert!(
        !layout.outside("planted.txt").exists(),
        "nothing is created outside through the link"
    );
}

#[test]
fn a_symlink_to_a_directory_outside_is_refused_for_reads_and_writes() {
    let layout = Layout::new();
    std::os::unix::fs::symlink(layout.outer.path(), layout.cwd.join("link")).unwrap();
    let dir = layout.dir();
    assert_eq!(
        dir.read(&layout.cwd.join("link/secret.txt"), 100),
        Err(FileRefusal::Symlink)
    );
    assert_eq!(
        dir.write(&layout.cwd.join("link/secret.txt"), b"pwned"),
        Err(FileRefusal::Symlink)
    );
    assert_eq!(
        dir.write(&layout.cwd.join("link/new/planted.txt"), b"pwned"),
        Err(FileRefusal::Symlink)
    );
    assert_eq!(
        std::fs::read_to_string(layout.outside("secret.txt")).unwrap(),
        "secret"
    );
    assert!(!layout.outside("new").exists());
}

#[test]
fn a_symlink_to_a_file_outside_is_refused() {
    let layout = Layout::new();
    std::os::unix::fs::symlink(layout.outside("secret.txt"), layout.cwd.join("secret-link"))
        .unwrap();
    let dir = layout.dir();
    assert_eq!(
        dir.read(&layout.cwd.join("secret-link"), 100),
        Err(FileRefusal::Symlink)
    );
    assert_eq!(
        dir.write(&layout.cwd.join("secret-link"), b"pwned"),
        Err(FileRefusal::Symlink)
    );
    assert_eq!(
        std::fs::read_to_string(layout.outside("secret.txt")).unwrap(),
        "secret"
    );
}

#[test]
fn a_hard_link_to_a_file_outside_is_not_written() {
    let layout = Layout::new();
    std::fs::hard_link(layout.outside("secret.txt"), layout.cwd.join("hard")).unwrap();
    let dir = layout.dir();
    assert_eq!(
        dir.write(&layout.cwd.join("hard"), b"pwned"),
        Err(FileRefusal::HardLinked { links: 2 })
    );
    assert_eq!(
        std::fs::read_to_string(layout.outside("secret.txt")).unwrap(),
        "secret"
    );
}

#[test]
fn a_hard_link_to_a_file_outside_is_not_read() {
    let layout = Layout::new();
    std::fs::hard_link(layout.outside("secret.txt"), layout.cwd.join("hard")).unwrap();
    let dir = layout.dir();
    assert_eq!(
        dir.read(&layout.cwd.join("hard"), 1024),
        Err(FileRefusal::HardLinked { links: 2 })
    );
    assert!(FileRefusal::HardLinked { links: 2 }.is_escape());
}

#[test]
fn a_fifo_is_refused_at_once_for_reads_and_writes() {
    let layout = Layout::new();
    mkfifo(&layout.cwd.join("pipe"));
    let dir = layout.dir();
    let (reader, path) = (dir.clone(), layout.cwd.join("pipe"));
    assert_eq!(
        without_hanging("reading a FIFO", move || reader.read(&path, 100)),
        Err(FileRefusal::NotRegular)
    );
    let (writer, path) = (dir.clone(), layout.cwd.join("pipe"));
    assert_eq!(
        without_hanging("writing a FIFO", move || writer.write(&path, b"x")),
        Err(FileRefusal::NotRegular)
    );
}

#[test]
fn reads_are_bounded() {
    let layout = Layout::new();
    std::fs::write(layout.cwd.join("big.txt"), vec![b'x'; 4096]).unwrap();
    let dir = layout.dir();
    assert_eq!(
        dir.read(&layout.cwd.join("big.txt"), 4095),
        Err(FileRefusal::TooLarge { cap: 4095 })
    );
    assert_eq!(
        dir.read(&layout.cwd.join("big.txt"), 4096).unwrap().len(),
        4096
    );
}

#[test]
fn the_directory_stays_the_one_opened_when_its_path_is_replaced() {
    let layout = Layout::new();
    let dir = layout.dir();
    let moved = layout.outside("moved");
    std::fs::rename(&layout.cwd, &moved).unwrap();
    std::os::unix::fs::symlink(layout.outer.path(), &layout.cwd).unwrap();
    dir.write(&layout.cwd.join("secret.txt"), b"pwned").unwrap();
    assert_eq!(
        std::fs::read_to_string(layout.outside("secret.txt")).unwrap(),
        "secret"
    );
    assert_eq!(
        std::fs::read_to_string(moved.join("secret.txt")).unwrap(),
        "pwned"
    );
}

/// A folder swapped for a link to the outside while writes go on: with any check made on the
/// name before the open, some writes land outside.
#[test]
fn a_folder_swapped_for_a_link_mid_write_never_leads_outside() {
    let layout = Layout::new();
    let dir = layout.dir();
    let swapped = layout.cwd.join("d");
    std::fs::create_dir(&swapped).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // The link and the folder trade places atomically, so `d` always exists: a link or the folder.
    let link = layout.cwd.join("link");
    std::os::unix::fs::symlink(layout.outer.path(), &link).unwrap();
    let flipper = {
        let (stop, swapped, link) = (stop.clone(), swapped.clone(), link.clone());
        std::thread::spawn(move || {
            let mut flips = 0u32;
            while !stop.load(Ordering::Relaxed) && flips < 1_000_000 {
                let cwd = rustix::fs::CWD;
                rustix::fs::renameat_with(
                    cwd,
                    &swapped,
                    cwd,
                    &link,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                flips += 1;
            }
        })
    };
    for _ in 0..3000 {
        let _ = dir.write(&swapped.join("secret.txt"), b"pwned");
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    assert_eq!(
        std::fs::read_to_string(layout.outside("secret.txt")).unwrap(),
        "secret",
        "a write went outside"
    );
    // The same write goes through once the folder is back in place: the refusals above were the
    // swap's, not a path the service refuses anyway. (How many writes landed during the race
    // depends on the scheduler: on a loaded machine the flipper can win every time.)
    if std::fs::symlink_metadata(&swapped)
        .unwrap()
        .file_type()
        .is_symlink()
    {
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            &swapped,
            rustix::fs::CWD,
            &link,
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .unwrap();
    }
    dir.write(&swapped.join("secret.txt"), b"pwned")
        .expect("a write into the folder in place goes through");
    assert_eq!(
        std::fs::read_to_string(layout.cwd.join("d/secret.txt")).unwrap(),
        "pwned"
    );
}

#[test]
fn read_regular_refuses_devices_fifos_and_oversized_files_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        read_regular(Path::new("/dev/zero"), 1 << 20),
        Err(FileRefusal::NotRegular)
    );
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    assert_eq!(
        without_hanging("reading a FIFO", move || read_regular(&fifo, 100)),
        Err(FileRefusal::NotRegular)
    );
    let big = dir.path().join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(10 << 30)
        .unwrap();
    assert_eq!(
        read_regular(&big, 1 << 20),
        Err(FileRefusal::TooLarge { cap: 1 << 20 })
    );
    assert_eq!(
        read_regular(&dir.path().join("missing"), 1),
        Err(FileRefusal::NotFound)
    );
}

#[tokio::test]
async fn read_regular_async_reads_on_the_blocking_pool() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), "{}").unwrap();
    assert_eq!(
        read_regular_async(dir.path().join("a.json"), 10)
            .await
            .unwrap(),
        b"{}"
    );
    assert_eq!(
        read_regular_async("/dev/zero".into(), 10).await,
        Err(FileRefusal::NotRegular)
    );
}
