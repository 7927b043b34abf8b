//! A policy in the static form a one-way interface needs.
//!
//! A CLI's print interface has no request channel: nothing can be asked or approved one by one,
//! and the CLI denies whatever its own rules do not allow. There the policy becomes the CLI's
//! allow list: the native tool names of each category the policy approves, and the run's MCP
//! servers when it approves MCP tools. Claude Code and Qwen Code both read `mcp__SERVER` as every
//! tool of that server.

use crate::contract::portable::PortableOptions;
use crate::contract::request::{PermissionPolicy, PermissionRule};
use crate::contract::tools_facet::ToolCategory;

/// The native tool names a one-way interface may run without asking under `policy`: the names
/// `tools` lists for each approved category, then `mcp__NAME` for each of the run's MCP servers
/// (the caller tools' server among them) when MCP tools are approved.
///
/// ```
/// use agent_api::kit::hitl::pre_approved::allowed_tools;
/// use agent_api::request::McpServer;
/// use agent_api::PortableOptions;
/// use agent_api::PermissionPolicy;
/// use agent_api::request::ToolCategory;
/// const TOOLS: &[(ToolCategory, &[&str])] = &[(ToolCategory::Shell, &["Bash"]), (ToolCategory::FileRead, &["Read"])];
/// let portable = PortableOptions::default().mcp_server("docs", McpServer::http("http://127.0.0.1:9/mcp"));
/// assert_eq!(allowed_tools(&PermissionPolicy::ApproveAll, TOOLS, &portable), ["Bash", "Read", "mcp__docs"]);
/// assert!(allowed_tools(&PermissionPolicy::Ask, TOOLS, &portable).is_empty());
/// ```
pub fn allowed_tools(policy: &PermissionPolicy, tools: &[(ToolCategory, &[&str])], portable: &PortableOptions) -> Vec<String> {
    let approved = |category| policy.rule(category) == PermissionRule::Approve;
    let native = tools.iter().filter(|(category, _)| approved(*category)).flat_map(|(_, names)| names.iter().map(|n| n.to_string()));
    let mcp = portable.mcp_servers.keys().filter(|_| approved(ToolCategory::Mcp)).map(|name| format!("mcp__{name}"));
    native.chain(mcp).collect()
}
