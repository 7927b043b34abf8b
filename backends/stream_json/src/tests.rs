//! The converter's typed hot path against the recordings (the agents' own mapping tests live in
//! their crates, with their dialects).

use agent_api::kit::tool_table::ToolTable;

use super::{stream, Dialect, StreamJson};

#[test]
fn the_typed_stream_event_path_matches_the_value_path_on_every_print_fixture() {
    const DIALECT: Dialect =
        Dialect::new("test.stream_json", ToolTable::new(&[]).mcp_prefix("mcp__"));
    let dir = agent_bench::fixtures_dir().join("claude_code/print");
    let mut typed_lines = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".stdout.jsonl") {
            continue;
        }
        let text = std::fs::read(&path).unwrap();
        let lines: Vec<&[u8]> = text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        typed_lines += lines
            .iter()
            .filter(|l| stream::looks_like_stream_event(l))
            .count();
        for line in &lines {
            if stream::looks_like_stream_event(line) {
                assert!(
                    agent_api::kit::parse_typed::<stream::StreamLine>(line).is_some(),
                    "{}",
                    path.display()
                );
            }
        }
        agent_api_conformance::typed::assert_typed_matches_value(
            || Box::new(StreamJson::replaying(DIALECT)),
            &lines,
        );
    }
    assert!(
        typed_lines > 20,
        "the fixtures stream: {typed_lines} stream_event lines"
    );
}
