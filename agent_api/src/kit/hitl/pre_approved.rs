//! A policy in the static form a one-way interface needs.
//!
//! A CLI's print interface has no request channel: nothing can be asked or approved one by one,
//! and the CLI denies whatever its own rules do not allow. There the policy becomes the CLI's
//! allow list: the native tool names of each category the policy approves, and the run's MCP
//! servers when it approves MCP tools. The CLIs that take such a list read `mcp__SERVER` as every
//! tool of that server.

use crate::vocabulary::portable::PortableOptions;
use crate::vocabulary::request::{PermissionPolicy, PermissionRule};
use crate::vocabulary::tool_table::ToolTable;
use crate::vocabulary::tools_facet::ToolCategory;

/// The native tool names a one-way interface may run without asking under `policy`: the listed
/// tools of `tools` (see [`crate::kit::tool_table::Tool::unlisted`]) of each approved category,
/// then `mcp__NAME` for each of the run's MCP servers (the caller tools' server among them) when
/// MCP tools are approved.
///
/// ```
/// use agent_api::kit::hitl::pre_approved::allowed_tools;
/// use agent_api::kit::tool_table::{Tool, ToolTable};
/// use agent_api::request::McpServer;
/// use agent_api::PortableOptions;
/// use agent_api::run::FacetKind;
/// use agent_api::request::ToolCategory;
/// use agent_api::PermissionPolicy;
/// const TOOLS: ToolTable = ToolTable::new(&[
///     Tool::new("Bash", ToolCategory::Shell, FacetKind::CommandExecution),
///     Tool::new("Read", ToolCategory::FileRead, FacetKind::ToolUse),
/// ]);
/// let portable = PortableOptions::default().mcp_server("docs", McpServer::http("http://127.0.0.1:9/mcp"));
/// assert_eq!(allowed_tools(&PermissionPolicy::ApproveAll, &TOOLS, &portable), ["Bash", "Read", "mcp__docs"]);
/// assert!(allowed_tools(&PermissionPolicy::Ask, &TOOLS, &portable).is_empty());
/// ```
pub fn allowed_tools(
    policy: &PermissionPolicy,
    tools: &ToolTable,
    portable: &PortableOptions,
) -> Vec<String> {
    let approved = |category| policy.rule(category) == PermissionRule::Approve;
    let native = tools
        .tools()
        .iter()
        .filter(|tool| tool.listed && approved(tool.category))
        .map(|tool| tool.name.to_string());
    let mcp = portable
        .mcp_servers
        .keys()
        .filter(|_| approved(ToolCategory::Mcp))
        .map(|name| format!("mcp__{name}"));
    native.chain(mcp).collect()
}
