//! The portable option flags of `run` (`--system-prompt`, `--add-dir`, `--mcp-config`, …): the
//! same meaning for every agent, refused before spawn by an agent that cannot honour one.

use std::path::{Path, PathBuf};

use agent_api::request::McpServer;
use agent_api::request::ToolCategory;
use agent_api::PortableOptions;
use clap::Args;
use serde_json::Value;

/// The flags, as given.
#[derive(Args, Default)]
pub(crate) struct PortableFlags {
    /// Replace the agent's system prompt.
    #[arg(long, value_name = "TEXT")]
    system_prompt: Option<String>,
    /// Append to the agent's system prompt.
    #[arg(long, value_name = "TEXT")]
    append_system_prompt: Option<String>,
    /// Another directory the agent may use (repeatable).
    #[arg(long, value_name = "DIR")]
    add_dir: Vec<PathBuf>,
    /// MCP servers from a JSON file: {"mcpServers": {"name": {"command", "args", "env"} or {"url", "headers"}}}.
    #[arg(long, value_name = "FILE")]
    mcp_config: Option<PathBuf>,
    /// A native tool name the agent may use without asking (repeatable).
    #[arg(long, value_name = "TOOL")]
    allow_tool: Vec<String>,
    /// A native tool name removed from the agent (repeatable).
    #[arg(long, value_name = "TOOL")]
    deny_tool: Vec<String>,
    /// A tool category whose every native tool is removed from the agent (repeatable):
    /// shell, file_write, file_read or network.
    #[arg(long, value_name = "CATEGORY", value_parser = category)]
    deny_category: Vec<ToolCategory>,
    /// A JSON Schema file the answer must fit; the parsed answer is printed at the end.
    #[arg(long, value_name = "FILE")]
    json_schema: Option<PathBuf>,
}

impl PortableFlags {
    /// The request's portable options; a file that cannot be read or parsed is an error naming it.
    pub(crate) fn into_options(self) -> Result<PortableOptions, String> {
        let mut options = PortableOptions::default();
        options.system_prompt = self.system_prompt;
        options.append_system_prompt = self.append_system_prompt;
        options.add_dirs = self.add_dir;
        options.allowed_tools = self.allow_tool;
        options.denied_tools = self.deny_tool;
        options.denied_categories = self.deny_category.into_iter().collect();
        if let Some(path) = &self.mcp_config {
            options.mcp_servers =
                mcp_servers(&read_json(path)?).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        if let Some(path) = &self.json_schema {
            options.output_schema = Some(read_json(path)?);
        }
        Ok(options)
    }
}

/// A category by its snake_case name, as permission events carry it.
fn category(name: &str) -> Result<ToolCategory, String> {
    let names = || {
        agent_api::kit::options::DENIABLE_CATEGORIES
            .map(|c| c.as_str())
            .join(", ")
    };
    serde_json::from_value(Value::String(name.to_string()))
        .map_err(|_| format!("unknown tool category {name:?} (one of {})", names()))
}

/// The largest JSON file (`--json-schema`, `--mcp-config`) read.
const JSON_FILE_CAP: u64 = 16 << 20;

fn read_json(path: &Path) -> Result<Value, String> {
    // A caller's file, but bounded and never waited on: a FIFO or /dev/zero is refused at once.
    let text = agent_api::kit::files::read_regular(path, JSON_FILE_CAP)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_slice(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))
}

/// The servers of an `{"mcpServers": {…}}` document, the shape CLIs taking `--mcp-config` read:
/// an entry with a `url` is streamable HTTP, one with a `command` is stdio.
fn mcp_servers(document: &Value) -> Result<std::collections::BTreeMap<String, McpServer>, String> {
    let servers = document
        .get("mcpServers")
        .and_then(Value::as_object)
        .ok_or("no `mcpServers` object")?;
    servers
        .iter()
        .map(|(name, entry)| {
            let mut entry = entry.clone();
            if let Some(object) = entry.as_object_mut() {
                let kind = if object.contains_key("url") {
                    "http"
                } else {
                    "stdio"
                };
                object.insert("type".into(), kind.into());
            }
            serde_json::from_value(entry)
                .map(|server| (name.clone(), server))
                .map_err(|e| format!("server `{name}`: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_mcp_config_file_gives_stdio_and_http_servers() {
        let doc = json!({"mcpServers": {
            "files": {"command": "mcp-files", "args": ["--root", "/srv"], "env": {"TOKEN": "t"}},
            "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer x"}}
        }});
        let servers = mcp_servers(&doc).unwrap();
        assert!(
            matches!(&servers["files"], McpServer::Stdio { command, args, env } if command == "mcp-files" && args.len() == 2 && env["TOKEN"] == "t")
        );
        assert!(
            matches!(&servers["web"], McpServer::Http { url, headers } if url.ends_with("/mcp") && headers.len() == 1)
        );
        assert!(mcp_servers(&json!({"servers": {}})).is_err());
        assert!(mcp_servers(&json!({"mcpServers": {"x": {"args": []}}})).is_err());
    }
}
