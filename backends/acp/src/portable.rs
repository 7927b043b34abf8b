//! The portable options (`RunRequest::portable`) as Gemini CLI, Qwen Code and any ACP agent take
//! them: CLI flags of the `gemini` and `qwen` binaries (on every interface), ACP `session/new`
//! `mcpServers`, and where no schema flag exists the SDK's schema in the prompt.

use agent_api::capabilities as caps;
use agent_api::kit::CommandSpec;
use agent_api::portable::{McpServer, OptionMapping, PortableOptions, PrivateFile};
use agent_api::{AgentError, RunRequest};
use serde_json::{json, Value};

use crate::Flavor;

const GEMINI: &[OptionMapping] = &[
    OptionMapping::new(caps::SYSTEM_PROMPT, "GEMINI_SYSTEM_MD (a 0600 file the SDK writes for the run)"),
    OptionMapping::new(caps::ADD_DIRS, "--include-directories"),
    OptionMapping::new(caps::MCP_SERVERS, "ACP session/new mcpServers (acp interface)"),
    OptionMapping::new(caps::OUTPUT_SCHEMA, agent_api::portable::SDK_SCHEMA),
];

const QWEN: &[OptionMapping] = &[
    OptionMapping::new(caps::SYSTEM_PROMPT, "--system-prompt"),
    OptionMapping::new(caps::APPEND_SYSTEM_PROMPT, "--append-system-prompt"),
    OptionMapping::new(caps::ADD_DIRS, "--include-directories"),
    OptionMapping::new(caps::MCP_SERVERS, "ACP session/new mcpServers; --mcp-config (stream-json)"),
    OptionMapping::new(caps::ALLOWED_TOOLS, "--allowed-tools"),
    OptionMapping::new(caps::DENIED_TOOLS, "--exclude-tools"),
    OptionMapping::new(caps::MAX_TURNS, "--max-session-turns"),
    OptionMapping::new(caps::OUTPUT_SCHEMA, "--json-schema (print); SDK schema in the prompt (acp, two-way stream-json)"),
];

const GENERIC: &[OptionMapping] = &[
    OptionMapping::new(caps::MCP_SERVERS, "ACP session/new mcpServers"),
    OptionMapping::new(caps::OUTPUT_SCHEMA, agent_api::portable::SDK_SCHEMA),
];

/// How a flavor takes each portable option; its `agent_api.options.*` capabilities are these.
pub fn mappings(flavor: Flavor) -> &'static [OptionMapping] {
    match flavor {
        Flavor::Gemini => GEMINI,
        Flavor::Qwen => QWEN,
        Flavor::Generic => GENERIC,
    }
}

/// The CLI flags of the portable options for the `gemini` or `qwen` binary (`stream_json`: Qwen's
/// stream-json interfaces, which take the MCP servers as a flag, not over ACP; `schema_flag`: Qwen's
/// print interface, the one whose `--json-schema` works: the two-way one exits at once with it).
pub fn cli_args(flavor: Flavor, portable: &PortableOptions, stream_json: bool, schema_flag: bool) -> Vec<String> {
    let mut args = Vec::new();
    for dir in &portable.add_dirs {
        args.extend(["--include-directories".to_string(), dir.display().to_string()]);
    }
    if flavor != Flavor::Qwen {
        return args;
    }
    let flags = [("--system-prompt", &portable.system_prompt), ("--append-system-prompt", &portable.append_system_prompt)];
    for (flag, value) in flags {
        if let Some(text) = value {
            args.extend([flag.to_string(), text.clone()]);
        }
    }
    for (flag, tools) in [("--allowed-tools", &portable.allowed_tools), ("--exclude-tools", &portable.denied_tools)] {
        for tool in tools {
            args.extend([flag.to_string(), tool.clone()]);
        }
    }
    if let Some(turns) = portable.native_limits.max_turns {
        args.extend(["--max-session-turns".to_string(), turns.to_string()]);
    }
    if stream_json && !portable.mcp_servers.is_empty() {
        args.extend(["--mcp-config".to_string(), portable.mcp_config_json().to_string()]);
    }
    if let (true, Some(schema)) = (schema_flag, &portable.output_schema) {
        args.extend(["--json-schema".to_string(), schema.to_string()]);
    }
    args
}

/// Gemini CLI takes a replacement system prompt only from a file, the one `GEMINI_SYSTEM_MD` names
/// (it has no flag, and no way to append): the SDK writes the text to a private file for the run
/// (hold it until the run ends), and [`with_system_prompt_file`] points the agent at it. Off argv
/// either way, so a long prompt meets no OS limit and `ps` does not show it.
pub fn system_prompt_file(flavor: Flavor, portable: &PortableOptions) -> Result<Option<PrivateFile>, AgentError> {
    match (&portable.system_prompt, flavor) {
        (Some(text), Flavor::Gemini) => Ok(Some(agent_api::portable::write_private_file("agent-api-system-", ".md", text.as_bytes())?)),
        _ => Ok(None),
    }
}

/// `spec` reading its system prompt from `file` ([`system_prompt_file`]), if there is one.
pub fn with_system_prompt_file(spec: CommandSpec, file: Option<&PrivateFile>) -> CommandSpec {
    match file {
        Some(path) => spec.env("GEMINI_SYSTEM_MD", path.display().to_string()).local_file(path.to_path_buf()),
        None => spec,
    }
}

/// The run's MCP servers as ACP `McpServer` values (stdio, or streamable HTTP).
pub fn acp_servers(portable: &PortableOptions) -> Vec<Value> {
    let pairs = |map: &std::collections::BTreeMap<String, String>| -> Vec<Value> {
        map.iter().map(|(name, value)| json!({ "name": name, "value": value })).collect()
    };
    portable
        .mcp_servers
        .iter()
        .filter_map(|(name, server)| match server {
            McpServer::Stdio { command, args, env } => Some(json!({ "name": name, "command": command, "args": args, "env": pairs(env) })),
            McpServer::Http { url, headers } => Some(json!({ "type": "http", "name": name, "url": url, "headers": pairs(headers) })),
            _ => None,
        })
        .collect()
}

/// The request as the agent gets it: where its interface has no schema flag (`native_schema`
/// false), the SDK puts the output schema in the prompt.
pub fn prepare(request: RunRequest, native_schema: bool) -> RunRequest {
    if native_schema {
        request
    } else {
        agent_api::structured::ask_in_prompt(request)
    }
}

/// Gemini's headless interface has no way to take MCP servers per run: refused before spawn.
pub fn check_headless(portable: &PortableOptions) -> Result<(), AgentError> {
    if portable.mcp_servers.is_empty() {
        return Ok(());
    }
    Err(AgentError::InvalidRequest { reason: "Gemini's headless interface takes no MCP servers per run; use the ACP interface".into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen_takes_every_option_as_a_flag_and_gemini_only_its_directories() {
        let portable = PortableOptions::default()
            .system_prompt("sys")
            .append_system_prompt("more")
            .add_dir("/d")
            .allow_tool("read_file")
            .deny_tool("run_shell_command")
            .max_turns(2)
            .mcp_server("m", McpServer::http("http://127.0.0.1:1/mcp"))
            .output_schema(json!({"type": "object"}));
        let qwen = cli_args(Flavor::Qwen, &portable, true, true).join(" ");
        for want in [
            "--include-directories /d",
            "--system-prompt sys",
            "--append-system-prompt more",
            "--allowed-tools read_file",
            "--exclude-tools run_shell_command",
            "--max-session-turns 2",
            r#"--json-schema {"type":"object"}"#,
            "--mcp-config",
        ] {
            assert!(qwen.contains(want), "{want} missing from {qwen}");
        }
        let over_acp = cli_args(Flavor::Qwen, &portable, false, false).join(" ");
        assert!(!over_acp.contains("--json-schema") && !over_acp.contains("--mcp-config"), "{over_acp}");
        let two_way = cli_args(Flavor::Qwen, &portable, true, false).join(" ");
        assert!(!two_way.contains("--json-schema") && two_way.contains("--mcp-config"), "{two_way}");
        assert_eq!(cli_args(Flavor::Gemini, &portable, false, false), ["--include-directories", "/d"]);
        assert_eq!(acp_servers(&portable), [json!({"type": "http", "name": "m", "url": "http://127.0.0.1:1/mcp", "headers": []})]);
    }
}
