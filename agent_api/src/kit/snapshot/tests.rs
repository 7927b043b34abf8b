use std::os::unix::fs::PermissionsExt;

use super::*;

fn session() -> SessionRef {
    SessionRef::new(
        crate::vocabulary::kind::AgentKind::from_static("my_agent"),
        "s-1",
        "/work",
    )
}

fn file(bytes: &[u8]) -> SnapshotFile {
    SnapshotFile::new("MY_HOME", "sessions/s-1.jsonl", bytes.to_vec())
}

#[test]
fn an_export_follows_no_link_out_of_the_home() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "sk-outside").unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join("sessions")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret"),
        home.path().join("sessions/s-1.jsonl"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), home.path().join("linked")).unwrap();
    let mut builder = SnapshotBuilder::new(&session());
    for path in ["sessions/s-1.jsonl", "linked/secret"] {
        let err = builder
            .add("MY_HOME", home.path(), path.as_ref(), path)
            .unwrap_err();
        assert!(
            matches!(err, SnapshotError::File { escape: true, .. }),
            "{path}: {err}"
        );
    }
    assert!(matches!(
        builder.finish(),
        Err(SnapshotError::Missing { .. })
    ));
}

#[test]
fn files_over_the_bound_make_a_replay_snapshot_with_no_file() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("big"), vec![b'x'; 100]).unwrap();
    let mut builder = SnapshotBuilder::new(&session()).with_bound(64);
    builder
        .add("MY_HOME", home.path(), "big".as_ref(), "big")
        .unwrap();
    let snapshot = builder.finish().unwrap();
    assert!(matches!(snapshot.continuity, Continuity::Replay { .. }));
    assert!(snapshot.files.is_empty());
}

#[test]
fn a_restore_writes_private_files_whole_and_keeps_a_newer_copy() {
    let home = tempfile::tempdir().unwrap();
    let relative = Path::new("sessions/s-1.jsonl");
    let mut report = SnapshotImport::default();
    restore_file(home.path(), relative, &file(b"turn 1\n"), &mut report).unwrap();
    let path = home.path().join(relative);
    assert_eq!(std::fs::read(&path).unwrap(), b"turn 1\n");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    // The same again: left alone.
    restore_file(home.path(), relative, &file(b"turn 1\n"), &mut report).unwrap();
    assert_eq!(report.unchanged.len(), 1);
    // The home went on (turn 2): the snapshot's older copy is dropped, and the report says so.
    std::fs::write(&path, "turn 1\nturn 2\n").unwrap();
    restore_file(home.path(), relative, &file(b"turn 1\n"), &mut report).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"turn 1\nturn 2\n");
    assert_eq!(report.kept_newer, ["MY_HOME/sessions/s-1.jsonl"]);
    assert!(report.summary().contains("newest wins"));
    // A snapshot newer than the home's copy replaces it.
    let newer = file(b"turn 1\nturn 2\nturn 3\n").modified_at(Some(u64::MAX / 2));
    restore_file(home.path(), relative, &newer, &mut report).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"turn 1\nturn 2\nturn 3\n");
    // No temporary file is left beside it.
    assert_eq!(
        std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
        1
    );
}

#[test]
fn a_restore_never_writes_through_a_link_in_the_home() {
    let outside = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), home.path().join("sessions")).unwrap();
    let mut report = SnapshotImport::default();
    let err = restore_file(
        home.path(),
        "sessions/s-1.jsonl".as_ref(),
        &file(b"x"),
        &mut report,
    )
    .unwrap_err();
    assert!(
        matches!(err, SnapshotError::File { escape: true, .. }),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    // A link at the file's own name is replaced, not written through.
    std::fs::write(outside.path().join("target"), "keep").unwrap();
    let real = tempfile::tempdir().unwrap();
    std::fs::create_dir(real.path().join("sessions")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("target"),
        real.path().join("sessions/s-1.jsonl"),
    )
    .unwrap();
    let _ = restore_file(
        real.path(),
        "sessions/s-1.jsonl".as_ref(),
        &file(b"x"),
        &mut report,
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("target")).unwrap(),
        "keep"
    );
}
