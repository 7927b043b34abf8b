//! Claude Code's stream-json dialect ([`DIALECT`]): its tools, one table read by the permission
//! path, the tools facet, print mode's pre-approved tools and the deny list, and its quirks
//! (it speaks the control protocol, its user messages carry images, a user message sent mid-turn
//! joins the turn).

use agent_api::kit::tool_table::{Tool, ToolTable};
use agent_api::request::ToolCategory;
use agent_api::run::FacetKind;
use agent_api::universal::FileAction;
use agent_api_stream_json::Dialect;

/// Claude Code's own tools. Print mode pre-approves the listed ones of each approved category;
/// the unlisted ones only come with another (its background shell's), run on Windows only, or
/// are an older listing tool, or are the model API's server tools; each is still decided by its
/// category.
pub const TOOLS: ToolTable = ToolTable::new(&[
    Tool::new("Bash", ToolCategory::Shell, FacetKind::CommandExecution),
    Tool::new("Write", ToolCategory::FileWrite, FacetKind::FileChange).file(FileAction::Write),
    Tool::new("Edit", ToolCategory::FileWrite, FacetKind::FileChange).file(FileAction::Patch),
    Tool::new("MultiEdit", ToolCategory::FileWrite, FacetKind::FileChange).file(FileAction::Patch),
    Tool::new(
        "NotebookEdit",
        ToolCategory::FileWrite,
        FacetKind::FileChange,
    )
    .file(FileAction::Patch),
    Tool::new("WebFetch", ToolCategory::Network, FacetKind::ToolUse),
    Tool::new("WebSearch", ToolCategory::Network, FacetKind::WebSearch),
    Tool::new("Read", ToolCategory::FileRead, FacetKind::ToolUse).file(FileAction::Read),
    Tool::new("Glob", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("Grep", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("BashOutput", ToolCategory::Shell, FacetKind::ToolUse).unlisted(),
    Tool::new("KillShell", ToolCategory::Shell, FacetKind::ToolUse).unlisted(),
    Tool::new(
        "PowerShell",
        ToolCategory::Shell,
        FacetKind::CommandExecution,
    )
    .unlisted(),
    Tool::new("LS", ToolCategory::FileRead, FacetKind::ToolUse).unlisted(),
    // The model API's own server tool (`server_tool_use`), run by the API, never asked about.
    Tool::new("web_search", ToolCategory::Network, FacetKind::WebSearch).unlisted(),
])
.mcp_prefix("mcp__");

/// Claude Code's dialect: the control protocol on stdin, images in user messages.
pub const DIALECT: Dialect = Dialect::new("claude_code.stream_json", TOOLS)
    .with_images()
    .steerable();
