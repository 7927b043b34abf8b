//! Amp's stream-json dialect ([`DIALECT`]): the stream-json family's protocol
//! (`agent_api_stream_json`) with Amp's tools, read by the delegated permission checks and the
//! tools facet, and its one quirk the dialect declares: with `--stream-json-input` amp reads user
//! messages on stdin and nothing else (no `initialize`, no control `interrupt`: a cancel
//! terminates the process group; each message's content is a list of text blocks).
//!
//! What else Amp does its own way the family's converter reads as it would of any dialect: some
//! lines carry no message id (each is then a message of its own), a shell call's result has no
//! structured part (the output text is all there is), its one error is `error` (a string) where
//! the protocol lists `errors`, and `edit_file` takes `old_str`/`new_str`.

use agent_api::kit::tool_table::{Tool, ToolTable};
use agent_api::request::ToolCategory;
use agent_api::run::FacetKind;
use agent_api::universal::FileAction;
use agent_api_stream_json::Dialect;

/// Amp's own tools (a tool not listed is asked about as `other`).
pub const TOOLS: ToolTable = ToolTable::new(&[
    Tool::new("Bash", ToolCategory::Shell, FacetKind::CommandExecution),
    Tool::new(
        "create_file",
        ToolCategory::FileWrite,
        FacetKind::FileChange,
    )
    .file(FileAction::Write),
    Tool::new("edit_file", ToolCategory::FileWrite, FacetKind::FileChange).file(FileAction::Patch),
    Tool::new("undo_edit", ToolCategory::FileWrite, FacetKind::ToolUse),
    Tool::new("Read", ToolCategory::FileRead, FacetKind::ToolUse).file(FileAction::Read),
    Tool::new("Grep", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("glob", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("read_web_page", ToolCategory::Network, FacetKind::ToolUse),
    Tool::new("web_search", ToolCategory::Network, FacetKind::WebSearch),
])
.mcp_prefix("mcp__");

/// Amp's dialect on the two-way interface: user messages only.
pub const DIALECT: Dialect = Dialect::new("amp.stream_json", TOOLS).user_messages_only();
