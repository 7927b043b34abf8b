use agent_api::kit::tool_table::Tool;
use agent_api::request::ToolCategory;
use serde_json::json;

use super::*;

/// A table in the shape of the protocol's own.
const TOOLS: ToolTable = ToolTable::new(&[
    Tool::new("Bash", ToolCategory::Shell, FacetKind::CommandExecution),
    Tool::new("Edit", ToolCategory::FileWrite, FacetKind::FileChange).file(FileAction::Patch),
    Tool::new("Grep", ToolCategory::FileRead, FacetKind::ToolUse),
])
.mcp_prefix("mcp__");

#[test]
fn tool_items_take_their_facet_kind_from_the_table() {
    let kind = |name: &str| call_meta(&TOOLS, name, &json!({"command": "ls"})).kind;
    assert_eq!(kind("Bash"), "command_execution");
    assert_eq!(kind("Edit"), "file_change");
    assert_eq!(kind("mcp__github__create_issue"), "mcp_tool_call");
    assert_eq!(kind("Grep"), "tool_use");
    assert_eq!(
        call_meta(&TOOLS, "Bash", &json!({"command": "ls"}))
            .command
            .as_deref(),
        Some("ls")
    );
    assert_eq!(
        call_meta(&TOOLS, "Grep", &json!({"command": "ls"})).command,
        None,
        "only a command tool has a command"
    );
}

#[test]
fn summaries_show_one_bounded_line_of_the_identifying_field() {
    let long = "x".repeat(500);
    let s = summary(
        "Bash",
        &json!({ "command": format!("{long}\nsecond line") }),
    );
    assert!(
        s.starts_with("Bash: xxx") && s.ends_with('…') && s.len() < 220,
        "{s}"
    );
    assert_eq!(summary("Task", &json!({})), "Task");
}

#[test]
fn bash_results_carry_exit_codes_and_byte_counts() {
    let call = ToolCallInfo {
        item_id: "itm_1".into(),
        name: "Bash".into(),
        input: json!({"command": "ls"}),
    };
    let ok = map_result(
        &TOOLS,
        &json!({"tool_use_id": "t", "content": "a\nb"}),
        Some(&call),
        Some(&json!({"stdout": "a\nb", "stderr": "w", "interrupted": false})),
    );
    assert_eq!(
        (
            ok.meta.exit_code,
            ok.meta.bytes.stdout,
            ok.meta.bytes.stderr,
            ok.failed
        ),
        (Some(0), 3, 1, false)
    );
    let failed = map_result(
        &TOOLS,
        &json!({"tool_use_id": "t", "is_error": true, "content": "Exit code 127\nnot found"}),
        Some(&call),
        None,
    );
    assert_eq!((failed.meta.exit_code, failed.failed), (Some(127), true));
    let interrupted = map_result(
        &TOOLS,
        &json!({"tool_use_id": "t", "content": ""}),
        Some(&call),
        Some(&json!({"stdout": "", "stderr": "", "interrupted": true})),
    );
    assert_eq!(interrupted.meta.exit_code, None);
}

#[test]
fn edits_become_patch_file_refs_with_a_unified_diff_and_denied_edits_none() {
    let call = ToolCallInfo {
        item_id: "itm_1".into(),
        name: "Edit".into(),
        input: json!({"file_path": "/w/a.txt"}),
    };
    let structured = json!({"filePath": "/w/a.txt", "structuredPatch": [{"oldStart": 1, "oldLines": 1, "newStart": 1, "newLines": 1, "lines": ["-old", "+new"]}]});
    let mapped = map_result(
        &TOOLS,
        &json!({"tool_use_id": "t", "content": "ok"}),
        Some(&call),
        Some(&structured),
    );
    let ContentPart::FileRef { path, action, diff } = &mapped.parts[1] else {
        panic!("{:?}", mapped.parts)
    };
    assert_eq!((path.as_str(), *action), ("/w/a.txt", FileAction::Patch));
    assert_eq!(
        diff.as_deref(),
        Some("--- a/w/a.txt\n+++ b/w/a.txt\n@@ -1,1 +1,1 @@\n-old\n+new\n")
    );
    assert_eq!(mapped.meta.bytes.diff, diff.as_ref().unwrap().len() as u64);
    let denied = map_result(
        &TOOLS,
        &json!({"tool_use_id": "t", "is_error": true, "content": "denied"}),
        Some(&call),
        None,
    );
    assert_eq!(denied.parts.len(), 1);
}
