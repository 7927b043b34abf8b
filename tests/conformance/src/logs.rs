//! Long native logs for the benchmarks, built from short recordings.

use std::path::Path;

/// A log of `lines` lines: the recording's first `head` lines, its middle repeated with each of
/// `ids` made unique per round (`item_` becomes `item_r3_` in round 3, so items do not collide),
/// and its last line. Blank lines of the recording are left out.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("rec.jsonl");
/// std::fs::write(&path, "{\"a\":0}\n{\"id\":\"item_1\"}\n{\"end\":1}\n").unwrap();
/// let log = String::from_utf8(agent_api_conformance::logs::build_log(&path, 1, &["item_"], 4)).unwrap();
/// assert_eq!(log, "{\"a\":0}\n{\"id\":\"item_r1_1\"}\n{\"id\":\"item_r2_1\"}\n{\"end\":1}\n");
/// ```
pub fn build_log(recording: &Path, head: usize, ids: &[&str], lines: usize) -> Vec<u8> {
    let text = std::fs::read_to_string(recording)
        .unwrap_or_else(|e| panic!("{}: {e}", recording.display()));
    let recorded: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        recorded.len() >= head + 2,
        "{} is too short to repeat",
        recording.display()
    );
    let (first, rest) = recorded.split_at(head);
    let (body, last) = rest.split_at(rest.len() - 1);
    let mut out = Vec::new();
    let mut count = 0;
    for line in first {
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
        count += 1;
    }
    let mut round = 0;
    while count < lines - 1 {
        round += 1;
        for line in body.iter().take(lines - 1 - count) {
            let mut line = line.to_string();
            for id in ids {
                line = line.replace(id, &format!("{id}r{round}_"));
            }
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
            count += 1;
        }
    }
    out.extend_from_slice(last[0].as_bytes());
    out.push(b'\n');
    out
}
