//! The portable options (`RunRequest::portable`) as Codex takes them: `-c` config overrides for
//! both modes, and the app-server's `turn/start` `outputSchema`.

use agent_api::capabilities as caps;
use agent_api::portable::{McpServer, OptionMapping, PortableOptions};

use crate::config::toml_string;

/// How Codex takes each portable option; its `agent_api.options.*` capabilities are these.
pub const OPTION_MAPPINGS: &[OptionMapping] = &[
    OptionMapping::new(caps::SYSTEM_PROMPT, "thread/start baseInstructions (app-server only)"),
    OptionMapping::new(caps::APPEND_SYSTEM_PROMPT, "-c developer_instructions"),
    OptionMapping::new(caps::ADD_DIRS, "-c sandbox_workspace_write.writable_roots"),
    OptionMapping::new(caps::MCP_SERVERS, "-c mcp_servers.NAME.{command,args,env,url,http_headers}"),
    OptionMapping::new(caps::OUTPUT_SCHEMA, "turn/start outputSchema (app-server); SDK schema in the prompt (exec)"),
];

/// The `-c key=value` overrides of the portable options (extra directories are merged with the
/// `extra_dirs` extension by the caller, as Codex keeps one writable-roots list).
pub fn config_overrides(portable: &PortableOptions) -> Vec<String> {
    let mut overrides = Vec::new();
    if let Some(text) = &portable.append_system_prompt {
        overrides.push(format!("developer_instructions={}", toml_string(text)));
    }
    for (name, server) in &portable.mcp_servers {
        let key = format!("mcp_servers.{name}");
        match server {
            McpServer::Stdio { command, args, env } => {
                overrides.push(format!("{key}.command={}", toml_string(command)));
                overrides.push(format!("{key}.args={}", toml_array(args)));
                if !env.is_empty() {
                    overrides.push(format!("{key}.env={}", toml_table(env)));
                }
            }
            McpServer::Http { url, headers } => {
                overrides.push(format!("{key}.url={}", toml_string(url)));
                if !headers.is_empty() {
                    overrides.push(format!("{key}.http_headers={}", toml_table(headers)));
                }
            }
            _ => {}
        }
    }
    overrides
}

fn toml_array(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|s| toml_string(s)).collect::<Vec<_>>().join(","))
}

/// An inline TOML table; keys are quoted, so any variable or header name is safe.
fn toml_table(map: &std::collections::BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = map.iter().map(|(k, v)| format!("{}={}", toml_string(k), toml_string(v))).collect();
    format!("{{{}}}", pairs.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_becomes_a_quoted_config_override() {
        let mut env = std::collections::BTreeMap::new();
        env.insert("TOKEN".to_string(), "s3\"cret".to_string());
        let portable = PortableOptions::default()
            .append_system_prompt("cite files")
            .mcp_server("files", McpServer::Stdio { command: "mcp-files".into(), args: vec!["--root".into(), "/srv".into()], env })
            .mcp_server("web", McpServer::http("http://127.0.0.1:9/mcp"));
        assert_eq!(
            config_overrides(&portable),
            [
                r#"developer_instructions="cite files""#,
                r#"mcp_servers.files.command="mcp-files""#,
                r#"mcp_servers.files.args=["--root","/srv"]"#,
                r#"mcp_servers.files.env={"TOKEN"="s3\"cret"}"#,
                r#"mcp_servers.web.url="http://127.0.0.1:9/mcp""#,
            ]
        );
    }
}
