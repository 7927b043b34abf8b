//! The portable options (`RunRequest::portable`) as OpenCode takes them: keys of its JSON config,
//! given per run through `OPENCODE_CONFIG_CONTENT` (merged over whatever content the caller set
//! there), which every interface reads (`run`, `serve`, `acp`). The environment, not argv: MCP
//! headers (the caller tools' bearer secret) never show in the process list.

use agent_api::capabilities as caps;
use agent_api::kit::options::OptionMapping;
use agent_api::kit::CommandSpec;
use agent_api::request::{McpServer, PrivateFile, TextOrFile};
use agent_api::PortableOptions;
use agent_api::{AgentError, RunRequest};
use serde_json::{json, Map, Value};

/// The variable OpenCode reads extra config from (JSON, merged over its config files).
const CONFIG_CONTENT: &str = "OPENCODE_CONFIG_CONTENT";

/// How OpenCode takes each portable option; its `agent_api.options.*` capabilities are these.
pub const MAPPINGS: &[OptionMapping] = &[
    OptionMapping::new(caps::SYSTEM_PROMPT, "config agent.build.prompt (OPENCODE_CONFIG_CONTENT)"),
    OptionMapping::new(caps::APPEND_SYSTEM_PROMPT, "config instructions: a 0600 file the SDK writes (local and bwrap only)"),
    OptionMapping::new(caps::MCP_SERVERS, "config mcp.NAME {type: local|remote} (OPENCODE_CONFIG_CONTENT)"),
    OptionMapping::new(caps::DENIED_TOOLS, "config tools.NAME = false (not offered to the model)"),
    OptionMapping::new(
        caps::DENIED_TOOL_CATEGORIES,
        "config tools.NAME = false: bash; edit, write, patch; read, glob, grep, list; webfetch, websearch",
    ),
    OptionMapping::new(caps::OUTPUT_SCHEMA, agent_api::kit::options::SDK_SCHEMA),
    OptionMapping::new(caps::IMAGES, "-f FILE (run); file part with a data: URL (serve); ACP image block (acp)"),
    OptionMapping::new(caps::VARIANTS, "--variant (run); prompt body variant (serve); not on acp"),
    OptionMapping::new(caps::MODES, "plan: --agent plan (run); prompt body agent (serve, each turn of a warm session); not on acp"),
];

/// OpenCode's modes: its primary agents but the default (`build`).
pub const MODES: &[agent_api::request::ModeInfo] = &[agent_api::request::ModeInfo::new(
    "plan",
    "--agent plan (run); prompt body agent: plan (serve)",
    "OpenCode's plan agent: reads and plans; edits are denied.",
)];

/// OpenCode's model variants (reasoning efforts) for an OpenAI-compatible model.
pub const VARIANTS: &[agent_api::request::VariantSet] =
    &[agent_api::request::VariantSet::all_models(
        &["low", "medium", "high"],
        "--variant (run); prompt body variant (serve)",
    )];

/// The acp interface sets neither a mode nor a variant: refused before spawn there.
pub fn check_acp_choices(request: &RunRequest) -> Result<(), AgentError> {
    let mode = request
        .mode
        .as_ref()
        .filter(|m| **m != agent_api::request::AgentMode::Default);
    if mode.is_some() || request.variant.is_some() {
        return Err(AgentError::InvalidRequest {
            reason: "OpenCode's acp interface takes no mode or variant here; use the run or serve interface".into(),
        });
    }
    Ok(())
}

/// The config keys of `portable`, or `None` when it sets none of them, and the files they name.
fn config_of(request: &RunRequest) -> Result<(Option<Value>, Vec<PrivateFile>), AgentError> {
    let portable: &PortableOptions = &request.portable;
    let mut config = Map::new();
    let mut files = Vec::new();
    // `build` is the agent every interface runs unless told otherwise.
    let mut build = Map::new();
    if let Some(prompt) = &portable.system_prompt {
        build.insert("prompt".into(), json!(prompt));
    }
    if let Some(text) = &portable.append_system_prompt {
        // `instructions` takes files only; appended to the agent's system prompt.
        match TextOrFile::for_launcher(request.launcher.as_ref(), text)? {
            TextOrFile::File(path) => {
                config.insert("instructions".into(), json!([path.display().to_string()]));
                files.push(path);
            }
            TextOrFile::Text(_) => {
                return Err(AgentError::InvalidRequest {
                    reason:
                        "OpenCode takes appended instructions only as a file on the machine it runs on, which this launcher cannot carry"
                            .into(),
                })
            }
        }
    }
    if !portable.mcp_servers.is_empty() {
        let servers: Map<String, Value> = portable
            .mcp_servers
            .iter()
            .filter_map(|(name, s)| Some((name.clone(), mcp_server(s)?)))
            .collect();
        config.insert("mcp".into(), Value::Object(servers));
    }
    let denied = portable.denied_tool_names(&crate::tools::TOOLS);
    if !denied.is_empty() {
        let tools: Map<String, Value> = denied
            .into_iter()
            .map(|name| (name, Value::Bool(false)))
            .collect();
        // The agent's own list too: the acp interface applies the agent's, not the global one.
        build.insert("tools".into(), Value::Object(tools.clone()));
        config.insert("tools".into(), Value::Object(tools));
    }
    if !build.is_empty() {
        config.insert("agent".into(), json!({ "build": build }));
    }
    Ok(((!config.is_empty()).then_some(Value::Object(config)), files))
}

/// One MCP server in OpenCode's config shape (`command` is one array; `environment`, `headers`).
fn mcp_server(server: &McpServer) -> Option<Value> {
    match server {
        McpServer::Stdio { command, args, env } => {
            let argv: Vec<&String> = std::iter::once(command).chain(args).collect();
            Some(json!({ "type": "local", "command": argv, "environment": env, "enabled": true }))
        }
        McpServer::Http { url, headers } => {
            Some(json!({ "type": "remote", "url": url, "headers": headers, "enabled": true }))
        }
        _ => None,
    }
}

/// `spec` with the request's portable options in its `OPENCODE_CONFIG_CONTENT` (merged over the
/// content already set for it, or this process's, key by key); the private files that config names
/// are the spec's to keep while the agent lives.
pub fn apply(spec: CommandSpec, request: &RunRequest) -> Result<CommandSpec, AgentError> {
    let (Some(ours), files) = config_of(request)? else {
        return Ok(spec);
    };
    let inherited = if spec.clear_env {
        None
    } else {
        std::env::var(CONFIG_CONTENT).ok()
    };
    let base = spec.env.get(CONFIG_CONTENT).cloned().or(inherited);
    let mut merged: Value = match base.as_deref().map(serde_json::from_str::<Value>) {
        None => json!({}),
        Some(Ok(value)) if value.is_object() => value,
        Some(_) => {
            return Err(AgentError::InvalidRequest {
                reason: format!("{CONFIG_CONTENT} is not a JSON object"),
            })
        }
    };
    merge(&mut merged, ours);
    let mut spec = spec.env(CONFIG_CONTENT, merged.to_string());
    for path in files {
        spec = spec.local_file(path.to_path_buf());
        spec.keep_alive.push(std::sync::Arc::new(path));
    }
    Ok(spec)
}

/// Merges `over` into `base`: objects key by key, anything else replaced.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                merge(base.entry(key).or_insert(Value::Null), value);
            }
        }
        (base, over) => *base = over,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_merge_into_the_config_content_already_set() {
        let portable = PortableOptions::default()
            .system_prompt("be terse")
            .append_system_prompt("cite files")
            .mcp_server("caller", McpServer::http("http://127.0.0.1:9/mcp"))
            .mcp_server("files", McpServer::stdio("mcp-files", ["--root", "/srv"]))
            .deny_tool("bash");
        let request = RunRequest::new("hi").with_portable(portable);
        let spec = CommandSpec::new("opencode").env(
            CONFIG_CONTENT,
            r#"{"model":"mock/m","agent":{"build":{"temperature":0}}}"#,
        );
        let spec = apply(spec, &request).unwrap();
        let config: Value = serde_json::from_str(&spec.env[CONFIG_CONTENT]).unwrap();
        assert_eq!(config["model"], "mock/m", "the caller's content stays");
        assert_eq!(
            config["agent"]["build"],
            json!({"temperature": 0, "prompt": "be terse", "tools": {"bash": false}})
        );
        assert_eq!(
            config["mcp"]["caller"],
            json!({"type": "remote", "url": "http://127.0.0.1:9/mcp", "headers": {}, "enabled": true})
        );
        assert_eq!(
            config["mcp"]["files"]["command"],
            json!(["mcp-files", "--root", "/srv"])
        );
        assert_eq!(config["tools"], json!({"bash": false}));
        let instructions = config["instructions"][0].as_str().unwrap();
        assert_eq!(std::fs::read_to_string(instructions).unwrap(), "cite files");
        assert_eq!(
            (spec.keep_alive.len(), spec.local_files.len()),
            (1, 1),
            "the instructions file lives with the agent"
        );
        let far = RunRequest::new("hi")
            .with_portable(PortableOptions::default().append_system_prompt("x"))
            .with_launcher(agent_api::request::Launcher::Ssh(
                agent_api::request::Ssh::new("host"),
            ));
        assert!(matches!(
            apply(CommandSpec::new("opencode"), &far),
            Err(AgentError::InvalidRequest { .. })
        ));
        let untouched = apply(CommandSpec::new("opencode"), &RunRequest::new("hi")).unwrap();
        assert!(
            !untouched.env.contains_key(CONFIG_CONTENT),
            "no option, no config"
        );
    }
}
