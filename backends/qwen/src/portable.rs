//! The portable options (`RunRequest::portable`) as Qwen Code takes them: CLI flags on every
//! interface, a replacement system prompt as the file `QWEN_SYSTEM_MD` names (the flag through a
//! far launcher), MCP servers in ACP `session/new` or, on stream-json, `--mcp-config`, and where
//! no schema flag works the SDK's schema in the prompt.

use agent_api::capabilities as caps;
use agent_api::kit::options::OptionMapping;
use agent_api::request::TextOrFile;
use agent_api::PortableOptions;
use agent_api::{AgentError, RunRequest};
use agent_api_acp::{RunFiles, ACP_ATTACHMENTS, ACP_IMAGES};
use serde_json::{json, Value};

/// How Qwen Code takes each portable option; its `agent_api.options.*` capabilities are these.
pub(crate) const MAPPINGS: &[OptionMapping] = &[
    OptionMapping::new(caps::SYSTEM_PROMPT, "QWEN_SYSTEM_MD (0600 file; --system-prompt through a far launcher)"),
    OptionMapping::new(caps::APPEND_SYSTEM_PROMPT, "--append-system-prompt"),
    OptionMapping::new(caps::ADD_DIRS, "--include-directories"),
    OptionMapping::new(caps::MCP_SERVERS, "ACP session/new mcpServers; --mcp-config FILE (stream-json; the JSON through a far launcher)"),
    OptionMapping::new(caps::ALLOWED_TOOLS, "--allowed-tools"),
    OptionMapping::new(caps::DENIED_TOOLS, "--exclude-tools"),
    OptionMapping::new(
        caps::DENIED_TOOL_CATEGORIES,
        "--exclude-tools: run_shell_command; edit, write_file; read_file, grep_search, glob, list_directory; web_fetch",
    ),
    OptionMapping::new(caps::MAX_TURNS, "--max-session-turns"),
    OptionMapping::new(caps::OUTPUT_SCHEMA, "--json-schema (print); SDK schema in the prompt (acp, two-way stream-json)"),
    OptionMapping::new(caps::IMAGES, ACP_IMAGES),
    OptionMapping::new(caps::FILE_ATTACHMENTS, ACP_ATTACHMENTS),
    OptionMapping::new(
        caps::MODES,
        "--approval-mode plan|auto-edit|yolo (every interface); ACP session/set_mode, control request set_permission_mode (warm session)",
    ),
    OptionMapping::new(
        caps::VARIANTS,
        "model.generationConfig.reasoning.effort low|medium|high: a 0600 QWEN_CODE_SYSTEM_DEFAULTS_PATH settings file (every interface; local and bwrap only; the user's own setting wins)",
    ),
];

/// Qwen Code's variants: the reasoning effort of its `model.generationConfig.reasoning` setting
/// (0.15.10 has no flag for it), which it sends as the request's `reasoning.effort` (the
/// OpenAI-compatible providers) or turns into the provider's own thinking settings.
pub(crate) const VARIANTS: &[agent_api::request::VariantSet] = &[agent_api::request::VariantSet::all_models(
    &["low", "medium", "high"],
    "QWEN_CODE_SYSTEM_DEFAULTS_PATH (a 0600 settings file): model.generationConfig.reasoning.effort",
)];

/// Qwen Code's modes: its `--approval-mode` values (0.15.10) but the default.
pub(crate) const MODES: &[agent_api::request::ModeInfo] = &[
    agent_api::request::ModeInfo::new(
        "plan",
        "--approval-mode plan",
        "Plans only: changes nothing.",
    ),
    agent_api::request::ModeInfo::new(
        "auto-edit",
        "--approval-mode auto-edit",
        "Edit tools are approved without asking.",
    ),
    agent_api::request::ModeInfo::new(
        "yolo",
        "--approval-mode yolo",
        "Every tool is approved without asking.",
    ),
];

/// The CLI flags of the portable options but those [`run_files`] gives (`schema_flag`: the print
/// interface, the one whose `--json-schema` works: the two-way one exits at once with it).
pub(crate) fn cli_args(portable: &PortableOptions, schema_flag: bool) -> Vec<String> {
    let mut args = Vec::new();
    for dir in &portable.add_dirs {
        args.extend([
            "--include-directories".to_string(),
            dir.display().to_string(),
        ]);
    }
    // The replacement system prompt and the MCP document are `run_files`' (off argv where they can be).
    if let Some(text) = &portable.append_system_prompt {
        args.extend(["--append-system-prompt".to_string(), text.clone()]);
    }
    let denied = portable.denied_tool_names(&crate::tools::TOOLS);
    for (flag, tools) in [
        ("--allowed-tools", &portable.allowed_tools),
        ("--exclude-tools", &denied),
    ] {
        for tool in tools {
            args.extend([flag.to_string(), tool.clone()]);
        }
    }
    if let Some(turns) = portable.native_limits.max_turns {
        args.extend(["--max-session-turns".to_string(), turns.to_string()]);
    }
    if let (true, Some(schema)) = (schema_flag, &portable.output_schema) {
        args.extend(["--json-schema".to_string(), schema.to_string()]);
    }
    args
}

/// The files of `request` for Qwen Code (`stream_json`: one of its stream-json interfaces, which
/// take MCP servers as a flag, not over ACP): the replacement system prompt, the variant's
/// settings, the MCP document (whose headers carry the caller tools' secret).
pub(crate) fn run_files(request: &RunRequest, stream_json: bool) -> Result<RunFiles, AgentError> {
    let mut files = RunFiles::default();
    let portable = &request.portable;
    if let Some(text) = &portable.system_prompt {
        match TextOrFile::for_launcher(request.launcher.as_ref(), text)? {
            TextOrFile::File(path) => files.env_file("QWEN_SYSTEM_MD", path),
            TextOrFile::Text(text) => files.args(["--system-prompt".to_string(), text]),
        }
    }
    if let Some(effort) = &request.variant {
        let settings =
            json!({ "model": { "generationConfig": { "reasoning": { "effort": effort } } } });
        files.settings_file(
            request,
            "QWEN_CODE_SYSTEM_DEFAULTS_PATH",
            &settings,
            "Qwen Code",
        )?;
    }
    if stream_json && !portable.mcp_servers.is_empty() {
        // Qwen's `--mcp-config` takes a path or the JSON itself.
        files.flag_text_or_file(
            request,
            "--mcp-config",
            &qwen_mcp_config(portable).to_string(),
        )?;
    }
    Ok(files)
}

/// The `mcpServers` document of Qwen's `--mcp-config`: Qwen reads a server's `url` as SSE and
/// `httpUrl` as streamable HTTP (what every HTTP server here speaks), so HTTP servers name theirs
/// `httpUrl`.
fn qwen_mcp_config(portable: &PortableOptions) -> Value {
    let mut document = portable.mcp_config_json();
    for server in document["mcpServers"]
        .as_object_mut()
        .into_iter()
        .flat_map(|servers| servers.values_mut())
    {
        if let Some(server) = server
            .as_object_mut()
            .filter(|s| s.get("type").and_then(Value::as_str) == Some("http"))
        {
            server.remove("type");
            if let Some(url) = server.remove("url") {
                server.insert("httpUrl".into(), url);
            }
        }
    }
    document
}

#[cfg(test)]
mod tests {
    use agent_api::kit::CommandSpec;
    use agent_api::request::McpServer;
    use serde_json::json;

    use super::*;

    #[test]
    fn qwen_takes_every_option_as_a_flag() {
        let portable = PortableOptions::default()
            .system_prompt("sys")
            .append_system_prompt("more")
            .add_dir("/d")
            .allow_tool("read_file")
            .deny_tool("run_shell_command")
            .max_turns(2)
            .mcp_server("m", McpServer::http("http://127.0.0.1:1/mcp"))
            .output_schema(json!({"type": "object"}));
        let qwen = cli_args(&portable, true).join(" ");
        for want in [
            "--include-directories /d",
            "--append-system-prompt more",
            "--allowed-tools read_file",
            "--exclude-tools run_shell_command",
            "--max-session-turns 2",
            r#"--json-schema {"type":"object"}"#,
        ] {
            assert!(qwen.contains(want), "{want} missing from {qwen}");
        }
        assert!(!cli_args(&portable, false)
            .join(" ")
            .contains("--json-schema"));
    }

    fn args_of(request: &RunRequest, stream_json: bool) -> (String, CommandSpec, RunFiles) {
        let files = run_files(request, stream_json).unwrap();
        let spec = files.apply(CommandSpec::new("qwen"));
        (
            spec.args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
            spec,
            files,
        )
    }

    #[test]
    fn the_system_prompt_and_the_mcp_document_go_in_private_files_here_and_inline_far_away() {
        let portable = PortableOptions::default()
            .system_prompt("sys")
            .mcp_server("m", McpServer::http("http://127.0.0.1:1/mcp"));
        let here = RunRequest::new("hi").with_portable(portable.clone());
        let (args, spec, _files) = args_of(&here, true);
        let prompt = spec.env.get("QWEN_SYSTEM_MD").expect("QWEN_SYSTEM_MD");
        assert_eq!(std::fs::read_to_string(prompt).unwrap(), "sys");
        let mcp = args
            .strip_prefix("--mcp-config ")
            .expect("--mcp-config FILE");
        let document: Value = serde_json::from_str(&std::fs::read_to_string(mcp).unwrap()).unwrap();
        // Qwen reads `url` as SSE: a streamable HTTP server is its `httpUrl`.
        assert_eq!(
            document["mcpServers"]["m"],
            json!({"httpUrl": "http://127.0.0.1:1/mcp", "headers": {}})
        );
        assert_eq!(spec.local_files.len(), 2, "a sandbox binds both");
        assert!(
            !args.contains("sys") && !args.contains("127.0.0.1"),
            "{args}"
        );
        let (args, _, _) = args_of(&here, false);
        assert_eq!(args, "", "over ACP the servers go in session/new");

        let far = here.with_launcher(agent_api::request::Launcher::Ssh(
            agent_api::request::Ssh::new("host"),
        ));
        let (args, spec, _) = args_of(&far, true);
        assert!(
            args.starts_with("--system-prompt sys --mcp-config {"),
            "{args}"
        );
        assert!(spec.local_files.is_empty());
    }

    #[test]
    fn a_variant_is_the_reasoning_effort_of_a_private_settings_file_here_and_refused_far_away() {
        let here = RunRequest::new("hi").with_variant("high");
        let (args, spec, _files) = args_of(&here, false);
        assert_eq!(args, "", "no flag: a settings file");
        let settings = spec
            .env
            .get("QWEN_CODE_SYSTEM_DEFAULTS_PATH")
            .expect("QWEN_CODE_SYSTEM_DEFAULTS_PATH");
        let settings: Value =
            serde_json::from_str(&std::fs::read_to_string(settings).unwrap()).unwrap();
        assert_eq!(
            settings,
            json!({"model": {"generationConfig": {"reasoning": {"effort": "high"}}}})
        );
        let far = here.with_launcher(agent_api::request::Launcher::Ssh(
            agent_api::request::Ssh::new("host"),
        ));
        assert!(matches!(
            run_files(&far, false),
            Err(AgentError::InvalidRequest { .. })
        ));
    }
}
