//! `spec/README.md` is the reader's way into the spec, so it cannot rot: every file in `spec/` has
//! its one row in the index table, and every row names a file that exists.

use std::collections::BTreeSet;
use std::path::Path;

/// The files the index's table rows link: the `(file)` target of each `| [`file`](file) | … |` row.
fn indexed(readme: &str) -> Vec<String> {
    readme
        .lines()
        .filter_map(|line| line.strip_prefix("| [`"))
        .filter_map(|rest| rest.split_once("`]("))
        .filter_map(|(_, rest)| rest.split_once(')'))
        .map(|(target, _)| target.to_owned())
        .collect()
}

#[test]
fn spec_readme_lists_every_spec_file_once_and_nothing_else() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec");
    let readme = std::fs::read_to_string(spec.join("README.md")).expect("spec/README.md");
    let rows = indexed(&readme);
    let listed: BTreeSet<String> = rows.iter().cloned().collect();
    assert_eq!(
        listed.len(),
        rows.len(),
        "a spec file has two rows in spec/README.md: {rows:?}"
    );

    let files: BTreeSet<String> = std::fs::read_dir(&spec)
        .expect("spec/")
        .map(|entry| entry.expect("spec/ entry"))
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "README.md")
        .collect();
    let unlisted: Vec<_> = files.difference(&listed).collect();
    let missing: Vec<_> = listed.difference(&files).collect();
    assert!(
        unlisted.is_empty() && missing.is_empty(),
        "spec/README.md's table is out of step with spec/: not listed {unlisted:?}, listed but absent {missing:?}"
    );
}
