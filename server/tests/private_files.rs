//! The transcripts are the operator's alone (issue 46): the SQLite store, its WAL and
//! shared-memory files 0600 in 0700 directories, whatever the umask; another user reads none of
//! them. (Its own test binary: the umask is the process's. A message's image copies are checked
//! beside the code that makes them, `server/src/turn.rs`.)

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_api_server::ServerConfig;
use common::*;
use serde_json::json;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Whether the user `nobody` can read `path` (`None`: this process cannot switch users).
fn nobody_reads(path: &Path) -> Option<bool> {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let status = std::process::Command::new("cat")
        .arg(path)
        .uid(65534)
        .gid(65534)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    Some(status.success())
}

/// Checks that another user reads none of `paths`, or says loudly that it could not try.
fn unreadable_by_another_user(paths: &[PathBuf]) {
    for path in paths {
        match nobody_reads(path) {
            Some(read) => assert!(!read, "the user nobody read {}", path.display()),
            None => eprintln!(
                "NOT CHECKED: reading {} as another user needs root (the modes were checked)",
                path.display()
            ),
        }
    }
}

#[tokio::test]
async fn the_store_is_private_whatever_the_umask() {
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The loosest umask: nothing is taken away from what the server asks for.
    // SAFETY: umask has no preconditions.
    unsafe { libc::umask(0) };

    let db = root.path().join("made/here/server.sqlite3");
    let store = agent_api_server::StoreUrl::Sqlite(db.clone())
        .open()
        .await
        .unwrap();
    // A session and its events, so that SQLite has written its WAL and shared memory.
    let api = serve_with(
        ServerConfig::default(),
        store,
        agent_api::RunRequest::new(""),
    )
    .await;
    assert_eq!(
        api.post("/v1/sessions/s", scripted("text")).await.status,
        200
    );
    assert_eq!(
        api.post("/v1/sessions/s/messages", json!({"message": "hi"}))
            .await
            .status,
        204
    );
    // The store: the folders it made, the database and the files SQLite made beside it.
    tokio::time::sleep(Duration::from_millis(100)).await;
    for dir in [root.path().join("made"), root.path().join("made/here")] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
    let mut stored = vec![db.clone()];
    for suffix in ["-wal", "-shm"] {
        let mut name = db.clone().into_os_string();
        name.push(suffix);
        let path = PathBuf::from(name);
        assert!(path.exists(), "{} (WAL mode)", path.display());
        stored.push(path);
    }
    for file in &stored {
        assert_eq!(mode(file), 0o600, "{}", file.display());
        assert_eq!(std::fs::metadata(file).unwrap().uid(), unsafe {
            libc::geteuid()
        });
    }
    unreadable_by_another_user(&stored);

    // A store made by an older version, readable by all, is made private when opened.
    let old = root.path().join("old.sqlite3");
    std::fs::write(&old, b"").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    let _reopened = agent_api_server::StoreUrl::Sqlite(old.clone())
        .open()
        .await
        .unwrap();
    assert_eq!(mode(&old), 0o600);
}
