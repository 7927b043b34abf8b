//! `spec/faults.md` cannot rot: every test it links exists in the file it names, every row links
//! at least one, and the table keeps its twenty rows.

use std::path::Path;

const TABLE: &str = include_str!("../../../spec/faults.md");

/// The `path::test_name` links of one table row.
fn links(row: &str) -> Vec<(&str, &str)> {
    row.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|code| code.split_once(".rs::"))
        .collect()
}

/// The table's data rows: the lines starting with `| <number> |`.
fn rows() -> Vec<&'static str> {
    TABLE
        .lines()
        .filter(|line| {
            line.strip_prefix("| ")
                .and_then(|rest| rest.split_once(' '))
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
        .collect()
}

#[test]
fn fault_table_links_only_tests_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let rows = rows();
    assert!(
        rows.len() >= 20,
        "the fault table has {} rows, issue 16 asks for at least 20",
        rows.len()
    );
    let mut missing = Vec::new();
    for row in &rows {
        let links = links(row);
        assert!(!links.is_empty(), "a fault without a test: {row}");
        for (path, test) in links {
            let file = format!("{path}.rs");
            let source = std::fs::read_to_string(root.join(&file)).unwrap_or_default();
            if !source.contains(&format!("fn {test}(")) {
                missing.push(format!("{file}::{test}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "spec/faults.md links tests that do not exist: {missing:#?}"
    );
}

#[test]
fn the_link_parser_finds_paths_and_names_and_ignores_other_code() {
    let row = "| 1 | x | `crash` | `Err(Timeout)` | `a/b.rs::one_test`, `c.rs::two` (real CLI) |";
    assert_eq!(links(row), vec![("a/b", "one_test"), ("c", "two")]);
}
