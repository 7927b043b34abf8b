//! OpenCode's tools, one table ([`TOOLS`]) read by the deny list (its `tools` config), the
//! permission category of each permission the server asks, and the tools facet's kinds.

use agent_api::kit::tool_table::{Tool, ToolTable};
use agent_api::request::ToolCategory;
use agent_api::run::FacetKind;

/// OpenCode's own tools as its `tools` config and its permissions name them.
pub const TOOLS: ToolTable = ToolTable::new(&[
    Tool::new("bash", ToolCategory::Shell, FacetKind::CommandExecution),
    Tool::new("edit", ToolCategory::FileWrite, FacetKind::FileChange),
    Tool::new("write", ToolCategory::FileWrite, FacetKind::FileChange),
    Tool::new("patch", ToolCategory::FileWrite, FacetKind::FileChange),
    // Not in the deny list: the documented mapping (`spec/options.md`) names edit, write, patch.
    Tool::new("multiedit", ToolCategory::FileWrite, FacetKind::FileChange).unlisted(),
    Tool::new(
        "apply_patch",
        ToolCategory::FileWrite,
        FacetKind::FileChange,
    )
    .unlisted(),
    Tool::new("read", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("glob", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("grep", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("list", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("webfetch", ToolCategory::Network, FacetKind::ToolUse),
    Tool::new("websearch", ToolCategory::Network, FacetKind::ToolUse),
]);
