//! One vocabulary per agent: each native tool name with its permission category, its
//! tools-facet kind and the file action it performs, in one table the backend declares once.
//!
//! Every place that decides by a tool's name reads the same table: the permission category of a
//! request ([`ToolTable::category`]), the tools facet's kind ([`ToolTable::facet`]), what a
//! one-way interface pre-approves ([`crate::kit::hitl::pre_approved::allowed_tools`]) and what a
//! denied category removes ([`crate::PortableOptions::denied_tool_names`]): those two
//! only name the tools the table lists ([`Tool::unlisted`]).
//!
//! ```
//! use agent_api::kit::tool_table::{Tool, ToolTable};
//! use agent_api::run::FacetKind;
//! use agent_api::request::ToolCategory;
//! const TABLE: ToolTable = ToolTable::new(&[
//!     Tool::new("Bash", ToolCategory::Shell, FacetKind::CommandExecution),
//!     Tool::new("WebFetch", ToolCategory::Network, FacetKind::ToolUse),
//! ])
//! .mcp_prefix("mcp__");
//! assert_eq!(TABLE.category("WebFetch"), ToolCategory::Network);
//! assert_eq!(TABLE.category("mcp__docs__search"), ToolCategory::Mcp);
//! assert_eq!(TABLE.facet("mcp__docs__search"), FacetKind::McpToolCall);
//! assert_eq!(TABLE.category("Task"), ToolCategory::Other);
//! assert_eq!(TABLE.facet("Task"), FacetKind::ToolUse);
//! ```

use crate::vocabulary::tools_facet::{FacetKind, ToolCategory};
use crate::vocabulary::universal::FileAction;

/// One native tool: its name as the agent calls it, and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tool {
    /// The name as the agent calls the tool.
    pub name: &'static str,
    /// The category a permission policy decides a call of it by.
    pub category: ToolCategory,
    /// Its kind in the tools facet.
    pub facet: FacetKind,
    /// What it does to the file it names, for tools that act on one file.
    pub file: Option<FileAction>,
    /// Whether the agent's allow and deny lists name it: a one-way interface pre-approves it
    /// with its category, a denied category removes it (false for a tool that only ever comes
    /// with another, or that the agent's lists do not take).
    pub listed: bool,
}

impl Tool {
    /// A tool acting on no file in particular, listed when its category is pre-approved.
    pub const fn new(name: &'static str, category: ToolCategory, facet: FacetKind) -> Self {
        Self {
            name,
            category,
            facet,
            file: None,
            listed: true,
        }
    }

    /// The same tool, acting on the file its input names with `action`.
    pub const fn file(mut self, action: FileAction) -> Self {
        self.file = Some(action);
        self
    }

    /// The same tool, left out of the agent's allow and deny lists (still decided by its category
    /// when the agent asks about it).
    pub const fn unlisted(mut self) -> Self {
        self.listed = false;
        self
    }
}

/// An agent's tools ([`Tool`]), and the prefix that names an MCP server's tools, if it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolTable {
    tools: &'static [Tool],
    mcp_prefix: Option<&'static str>,
}

impl ToolTable {
    /// A table of `tools`; MCP tools are not told apart by name.
    pub const fn new(tools: &'static [Tool]) -> Self {
        Self {
            tools,
            mcp_prefix: None,
        }
    }

    /// The same table, where a name starting with `prefix` is an MCP server's tool.
    pub const fn mcp_prefix(mut self, prefix: &'static str) -> Self {
        self.mcp_prefix = Some(prefix);
        self
    }

    /// Every tool of the table.
    pub fn tools(&self) -> &'static [Tool] {
        self.tools
    }

    /// The tool named `name`, when the table has it.
    pub fn get(&self, name: &str) -> Option<&'static Tool> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    fn is_mcp(&self, name: &str) -> bool {
        self.mcp_prefix
            .is_some_and(|prefix| name.starts_with(prefix))
    }

    /// The permission category of a call of `name`: the table's, else [`ToolCategory::Mcp`] for
    /// an MCP tool, else [`ToolCategory::Other`].
    pub fn category(&self, name: &str) -> ToolCategory {
        match self.get(name) {
            Some(tool) => tool.category,
            None if self.is_mcp(name) => ToolCategory::Mcp,
            None => ToolCategory::Other,
        }
    }

    /// The tools-facet kind of a call of `name`: the table's, else [`FacetKind::McpToolCall`]
    /// for an MCP tool, else [`FacetKind::ToolUse`].
    pub fn facet(&self, name: &str) -> FacetKind {
        match self.get(name) {
            Some(tool) => tool.facet,
            None if self.is_mcp(name) => FacetKind::McpToolCall,
            None => FacetKind::ToolUse,
        }
    }

    /// The file action of a call of `name`, for a tool that acts on one file.
    pub fn file_action(&self, name: &str) -> Option<FileAction> {
        self.get(name).and_then(|tool| tool.file)
    }

    /// The names of the tools of `category`, in table order.
    pub fn names_in(&self, category: ToolCategory) -> impl Iterator<Item = &'static str> {
        self.tools
            .iter()
            .filter(move |tool| tool.category == category)
            .map(|tool| tool.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: ToolTable = ToolTable::new(&[
        Tool::new("run", ToolCategory::Shell, FacetKind::CommandExecution),
        Tool::new("write", ToolCategory::FileWrite, FacetKind::FileChange).file(FileAction::Write),
        Tool::new("peek", ToolCategory::FileRead, FacetKind::ToolUse).unlisted(),
    ]);

    #[test]
    fn a_name_outside_the_table_is_other_and_mcp_only_with_a_prefix() {
        assert_eq!(
            TABLE.category("mcp__x"),
            ToolCategory::Other,
            "no prefix: an MCP-looking name is nothing special"
        );
        assert_eq!(
            TABLE.mcp_prefix("mcp__").category("mcp__x"),
            ToolCategory::Mcp
        );
        assert_eq!(TABLE.file_action("write"), Some(FileAction::Write));
        assert_eq!(
            TABLE.names_in(ToolCategory::FileRead).collect::<Vec<_>>(),
            ["peek"]
        );
        assert!(!TABLE.get("peek").unwrap().listed);
    }
}
