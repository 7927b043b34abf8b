//! The portable options (`RunRequest::portable`) as Codex takes them: `-c` config overrides for
//! both modes, and the app-server's `turn/start` `outputSchema`.
//!
//! MCP servers' env values and headers (often tokens, and the caller tools' secret) never go on
//! argv, which `ps` shows: the overrides name environment variables (`env_vars`,
//! `env_http_headers`) whose values [`secret_env`] sets in Codex's own environment.

use agent_api::capabilities as caps;
use agent_api::kit::options::OptionMapping;
use agent_api::request::McpServer;
use agent_api::AgentError;
use agent_api::PortableOptions;

use crate::config::{toml_string, Mode};

/// How Codex takes each portable option; its `agent_api.options.*` capabilities are these.
pub const OPTION_MAPPINGS: &[OptionMapping] = &[
    OptionMapping::new(caps::SYSTEM_PROMPT, "thread/start baseInstructions (app-server only)"),
    OptionMapping::new(caps::APPEND_SYSTEM_PROMPT, "thread/start developerInstructions (app-server); -c developer_instructions (exec)"),
    OptionMapping::new(caps::ADD_DIRS, "-c sandbox_workspace_write.writable_roots"),
    OptionMapping::new(caps::MCP_SERVERS, "-c mcp_servers.NAME.{command,args,env_vars,url,env_http_headers} (values in env)"),
    OptionMapping::new(
        caps::DENIED_TOOLS,
        "-c features.shell_tool=false (exec_command and write_stdin), web_search=\"disabled\", features.view_image=false; no other tool",
    ),
    OptionMapping::new(caps::OUTPUT_SCHEMA, "turn/start outputSchema (app-server); SDK schema in the prompt (exec)"),
    OptionMapping::new(caps::IMAGES, "turn/start input localImage (app-server); -i FILE (exec)"),
    OptionMapping::new(caps::VARIANTS, "turn/start effort (app-server); -c model_reasoning_effort (exec); per model"),
    OptionMapping::new(
        caps::MODES,
        "plan: sandbox read-only + approval never; read-only, auto, full-access: the approval presets (thread/start sandbox, approvalPolicy; a warm session's switch: turn/start sandboxPolicy, approvalPolicy; exec -c)",
    ),
];

/// The tools Codex (0.169) can be made not to offer, by the name the model sees, and the `-c`
/// override that removes each: its shell's two tools go together. Its `apply_patch` and the
/// others have no switch.
const REMOVABLE_TOOLS: &[(&str, &str)] = &[
    ("exec_command", "features.shell_tool=false"),
    ("write_stdin", "features.shell_tool=false"),
    ("web_search", "web_search=\"disabled\""),
    ("view_image", "features.view_image=false"),
];

/// A denied tool Codex cannot remove is refused before spawn, naming those it can.
pub fn check_denied_tools(portable: &PortableOptions) -> Result<(), AgentError> {
    match portable
        .denied_tools
        .iter()
        .find(|name| !REMOVABLE_TOOLS.iter().any(|(tool, _)| tool == name))
    {
        Some(name) => {
            let removable: Vec<&str> = REMOVABLE_TOOLS.iter().map(|(tool, _)| *tool).collect();
            Err(AgentError::InvalidRequest {
                reason: format!(
                    "Codex cannot remove its tool {name:?}; it can remove {}",
                    removable.join(", ")
                ),
            })
        }
        None => Ok(()),
    }
}

/// The `-c key=value` overrides of the portable options (extra directories are merged with the
/// `extra_dirs` extension by the caller, as Codex keeps one writable-roots list).
pub fn config_overrides(portable: &PortableOptions, mode: Mode) -> Vec<String> {
    let mut overrides: Vec<String> = Vec::new();
    for (_, removal) in REMOVABLE_TOOLS
        .iter()
        .filter(|(tool, _)| portable.denied_tools.iter().any(|name| name == tool))
    {
        if !overrides.iter().any(|o| o == removal) {
            overrides.push(removal.to_string());
        }
    }
    // The app-server takes them in `thread/start` (see `argv::StartPlan`), off argv.
    if let (Mode::Exec, Some(text)) = (mode, &portable.append_system_prompt) {
        overrides.push(format!("developer_instructions={}", toml_string(text)));
    }
    for (name, server) in &portable.mcp_servers {
        let key = format!("mcp_servers.{name}");
        match server {
            McpServer::Stdio { command, args, env } => {
                overrides.push(format!("{key}.command={}", toml_string(command)));
                overrides.push(format!("{key}.args={}", toml_array(args)));
                if !env.is_empty() {
                    let names: Vec<String> = env.keys().cloned().collect();
                    overrides.push(format!("{key}.env_vars={}", toml_array(&names)));
                }
            }
            McpServer::Http { url, headers } => {
                overrides.push(format!("{key}.url={}", toml_string(url)));
                if !headers.is_empty() {
                    let vars = headers
                        .keys()
                        .enumerate()
                        .map(|(i, header)| (header.clone(), header_var(name, i)))
                        .collect();
                    overrides.push(format!("{key}.env_http_headers={}", toml_table(&vars)));
                }
            }
            _ => {}
        }
    }
    overrides
}

/// The environment variable that carries header `index` of server `name` to Codex.
fn header_var(name: &str, index: usize) -> String {
    format!(
        "AGENT_API_MCP_{}_H{index}",
        name.to_ascii_uppercase().replace('-', "_")
    )
}

/// The variables Codex's environment needs for [`config_overrides`]: each stdio server's env
/// (Codex passes the named ones on) and each header value.
pub fn secret_env(portable: &PortableOptions) -> Vec<(String, String)> {
    let mut vars = Vec::new();
    for (name, server) in &portable.mcp_servers {
        match server {
            McpServer::Stdio { env, .. } => {
                vars.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())))
            }
            McpServer::Http { headers, .. } => vars.extend(
                headers
                    .values()
                    .enumerate()
                    .map(|(i, v)| (header_var(name, i), v.clone())),
            ),
            _ => {}
        }
    }
    vars
}

fn toml_array(items: &[String]) -> String {
    format!(
        "[{}]",
        items
            .iter()
            .map(|s| toml_string(s))
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// An inline TOML table; keys are quoted, so any variable or header name is safe.
fn toml_table(map: &std::collections::BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{}={}", toml_string(k), toml_string(v)))
        .collect();
    format!("{{{}}}", pairs.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_tools_become_their_switches_and_a_tool_without_one_is_refused() {
        let portable = PortableOptions::default()
            .deny_tool("write_stdin")
            .deny_tool("exec_command")
            .deny_tool("web_search");
        assert!(check_denied_tools(&portable).is_ok());
        assert_eq!(
            config_overrides(&portable, Mode::Exec),
            ["features.shell_tool=false", r#"web_search="disabled""#]
        );
        let patch = PortableOptions::default().deny_tool("apply_patch");
        let err = check_denied_tools(&patch).unwrap_err();
        assert!(
            matches!(&err, AgentError::InvalidRequest { reason } if reason.contains("apply_patch") && reason.contains("view_image")),
            "{err:?}"
        );
    }

    #[test]
    fn every_option_becomes_a_quoted_config_override() {
        let mut env = std::collections::BTreeMap::new();
        env.insert("TOKEN".to_string(), "s3\"cret".to_string());
        let portable = PortableOptions::default()
            .append_system_prompt("cite files")
            .mcp_server(
                "files",
                McpServer::Stdio {
                    command: "mcp-files".into(),
                    args: vec!["--root".into(), "/srv".into()],
                    env,
                },
            )
            .mcp_server(
                "web",
                McpServer::Http {
                    url: "http://127.0.0.1:9/mcp".into(),
                    headers: [("Authorization".into(), "Bearer s3cret".into())].into(),
                },
            );
        let overrides = config_overrides(&portable, Mode::Exec);
        assert!(
            !overrides.iter().any(|o| o.contains("s3")),
            "a secret is on argv: {overrides:?}"
        );
        let app_server = config_overrides(&portable, Mode::AppServer);
        assert!(
            !app_server.iter().any(|o| o.contains("cite files")),
            "the app-server takes them in thread/start: {app_server:?}"
        );
        assert_eq!(
            secret_env(&portable),
            [
                ("TOKEN".to_string(), "s3\"cret".to_string()),
                (
                    "AGENT_API_MCP_WEB_H0".to_string(),
                    "Bearer s3cret".to_string()
                )
            ]
        );
        assert_eq!(
            config_overrides(&portable, Mode::Exec),
            [
                r#"developer_instructions="cite files""#,
                r#"mcp_servers.files.command="mcp-files""#,
                r#"mcp_servers.files.args=["--root","/srv"]"#,
                r#"mcp_servers.files.env_vars=["TOKEN"]"#,
                r#"mcp_servers.web.url="http://127.0.0.1:9/mcp""#,
                r#"mcp_servers.web.env_http_headers={"Authorization"="AGENT_API_MCP_WEB_H0"}"#,
            ]
        );
    }
}
