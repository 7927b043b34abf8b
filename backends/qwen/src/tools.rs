//! Qwen Code's own tools, as the SDK needs to know them: their categories for a run's policy
//! (pre-approved on a print run's `--allowed-tools`, removed by a denied category), the category
//! of each permission request, and the tools facet's kind. Both interfaces share the table.

use agent_api::kit::tool_table::{Tool, ToolTable};
use agent_api::request::ToolCategory;
use agent_api::run::FacetKind;
use agent_api::universal::FileAction;

/// Qwen's own tools: what a print run's policy pre-approves (the listed ones of each approved
/// category), what a denied category removes, the category of each permission request and the
/// tools facet's kind.
pub const TOOLS: ToolTable = ToolTable::new(&[
    Tool::new(
        "run_shell_command",
        ToolCategory::Shell,
        FacetKind::CommandExecution,
    ),
    Tool::new("edit", ToolCategory::FileWrite, FacetKind::FileChange).file(FileAction::Patch),
    Tool::new("write_file", ToolCategory::FileWrite, FacetKind::FileChange).file(FileAction::Write),
    Tool::new("web_fetch", ToolCategory::Network, FacetKind::ToolUse),
    Tool::new("read_file", ToolCategory::FileRead, FacetKind::ToolUse).file(FileAction::Read),
    Tool::new("grep_search", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("glob", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("list_directory", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("web_search", ToolCategory::Network, FacetKind::WebSearch).unlisted(),
])
.mcp_prefix("mcp__");
