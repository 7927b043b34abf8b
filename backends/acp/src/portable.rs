//! The portable options (`RunRequest::portable`) as Gemini CLI, Qwen Code and any ACP agent take
//! them: CLI flags of the `gemini` and `qwen` binaries (on every interface), ACP `session/new`
//! `mcpServers`, and where no schema flag exists the SDK's schema in the prompt.

use agent_api::capabilities as caps;
use agent_api::kit::options::OptionMapping;
use agent_api::kit::CommandSpec;
use agent_api::request::ToolCategory;
use agent_api::request::{McpServer, PrivateFile, TextOrFile};
use agent_api::PortableOptions;
use agent_api::{AgentError, RunRequest};
use serde_json::{json, Value};

use crate::Flavor;

/// Only the ACP interface carries images and attachments; the others refuse them before spawn.
const ACP_IMAGES: &str = "ACP session/prompt image blocks (base64; acp interface)";
const ACP_ATTACHMENTS: &str = "ACP session/prompt resource_link blocks (acp interface)";

/// Gemini CLI takes tool rules only from policy files: the SDK writes one for the run.
const GEMINI_POLICY: &str = "--policy FILE (a 0600 TOML policy the SDK writes: allow / deny rules; local and bwrap only)";

/// Gemini CLI's own tools by category: what a denied category removes.
const GEMINI_TOOLS: &[(ToolCategory, &[&str])] = &[
    (ToolCategory::Shell, &["run_shell_command"]),
    (ToolCategory::FileWrite, &["write_file", "replace"]),
    (ToolCategory::FileRead, &["read_file", "read_many_files", "glob", "grep_search", "list_directory"]),
    (ToolCategory::Network, &["web_fetch", "google_web_search"]),
];

const GEMINI: &[OptionMapping] = &[
    OptionMapping::new(caps::SYSTEM_PROMPT, "GEMINI_SYSTEM_MD (a 0600 file the SDK writes for the run)"),
    OptionMapping::new(caps::ADD_DIRS, "--include-directories"),
    OptionMapping::new(caps::MCP_SERVERS, "ACP session/new mcpServers (acp interface)"),
    OptionMapping::new(caps::ALLOWED_TOOLS, GEMINI_POLICY),
    OptionMapping::new(caps::DENIED_TOOLS, GEMINI_POLICY),
    OptionMapping::new(
        caps::DENIED_TOOL_CATEGORIES,
        "--policy FILE deny rule: run_shell_command; write_file, replace; read_file, read_many_files, glob, grep_search, list_directory; web_fetch, google_web_search",
    ),
    OptionMapping::new(caps::OUTPUT_SCHEMA, agent_api::kit::options::SDK_SCHEMA),
    OptionMapping::new(caps::IMAGES, ACP_IMAGES),
    OptionMapping::new(caps::FILE_ATTACHMENTS, ACP_ATTACHMENTS),
];

const QWEN: &[OptionMapping] = &[
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
];

const GENERIC: &[OptionMapping] = &[
    OptionMapping::new(caps::MCP_SERVERS, "ACP session/new mcpServers"),
    OptionMapping::new(caps::OUTPUT_SCHEMA, agent_api::kit::options::SDK_SCHEMA),
    OptionMapping::new(caps::IMAGES, "ACP session/prompt image blocks (base64)"),
    OptionMapping::new(caps::FILE_ATTACHMENTS, "ACP session/prompt resource_link blocks"),
];

/// How a flavor takes each portable option; its `agent_api.options.*` capabilities are these.
pub fn mappings(flavor: Flavor) -> &'static [OptionMapping] {
    match flavor {
        Flavor::Gemini => GEMINI,
        Flavor::Qwen => QWEN,
        Flavor::Generic => GENERIC,
    }
}

/// The CLI flags of the portable options for the `gemini` or `qwen` binary, but those [`RunFiles`]
/// gives (`schema_flag`: Qwen's print interface, the one whose `--json-schema` works: the two-way one
/// exits at once with it).
pub fn cli_args(flavor: Flavor, portable: &PortableOptions, schema_flag: bool) -> Vec<String> {
    let mut args = Vec::new();
    for dir in &portable.add_dirs {
        args.extend(["--include-directories".to_string(), dir.display().to_string()]);
    }
    if flavor != Flavor::Qwen {
        return args;
    }
    // The replacement system prompt and the MCP document are `RunFiles`' (off argv where they can be).
    if let Some(text) = &portable.append_system_prompt {
        args.extend(["--append-system-prompt".to_string(), text.clone()]);
    }
    let denied = portable.denied_tool_names(crate::qwen::TOOLS);
    for (flag, tools) in [("--allowed-tools", &portable.allowed_tools), ("--exclude-tools", &denied)] {
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

/// What a run gives its agent as files where it can (a replacement system prompt; Qwen's
/// stream-json MCP document, whose headers carry the caller tools' secret): 0600 files the SDK writes
/// for the run when the agent reads this machine's files, else the text on argv where the CLI takes
/// it. Off argv wherever possible, so a long prompt meets no OS limit and `ps` shows no secret. Hold
/// it until the run ends ([`agent_api::kit::RunSettings::hold`]): the files go with it.
#[derive(Debug, Default)]
pub struct RunFiles {
    args: Vec<String>,
    env: Vec<(String, String)>,
    files: Vec<PrivateFile>,
}

impl RunFiles {
    /// The files of `request` for `flavor`'s CLI (`stream_json`: one of Qwen's stream-json
    /// interfaces, which take MCP servers as a flag, not over ACP).
    pub fn for_request(flavor: Flavor, request: &RunRequest, stream_json: bool) -> Result<Self, AgentError> {
        let mut files = Self::default();
        let portable = &request.portable;
        let launcher = request.launcher.as_ref();
        match (flavor, &portable.system_prompt) {
            // Gemini CLI reads a replacement prompt only from the file `GEMINI_SYSTEM_MD` names.
            (Flavor::Gemini, Some(text)) => {
                match TextOrFile::for_launcher(launcher, text)? {
                    TextOrFile::File(path) => files.env_file("GEMINI_SYSTEM_MD", path),
                    TextOrFile::Text(_) => return Err(AgentError::InvalidRequest {
                        reason:
                            "Gemini CLI reads a system prompt only from a file on the machine it runs on, which this launcher cannot carry"
                                .into(),
                    }),
                }
            }
            (Flavor::Qwen, Some(text)) => match TextOrFile::for_launcher(launcher, text)? {
                TextOrFile::File(path) => files.env_file("QWEN_SYSTEM_MD", path),
                TextOrFile::Text(text) => files.args.extend(["--system-prompt".to_string(), text]),
            },
            _ => {}
        }
        if let (Flavor::Gemini, Some(policy)) = (flavor, gemini_policy(portable)) {
            if !launcher.is_none_or(agent_api::request::Launcher::is_local_filesystem) {
                return Err(AgentError::InvalidRequest {
                    reason:
                        "Gemini CLI reads tool rules only from a policy file on the machine it runs on, which this launcher cannot carry"
                            .into(),
                });
            }
            let path = agent_api::kit::options::write_private_file("agent-api-policy-", ".toml", policy.as_bytes())?;
            files.args.extend(["--policy".to_string(), path.display().to_string()]);
            files.files.push(path);
        }
        if flavor == Flavor::Qwen && stream_json && !portable.mcp_servers.is_empty() {
            // Qwen's `--mcp-config` takes a path or the JSON itself.
            match TextOrFile::for_launcher(launcher, &qwen_mcp_config(portable).to_string())? {
                TextOrFile::File(path) => {
                    files.args.extend(["--mcp-config".to_string(), path.display().to_string()]);
                    files.files.push(path);
                }
                TextOrFile::Text(json) => files.args.extend(["--mcp-config".to_string(), json]),
            }
        }
        Ok(files)
    }

    fn env_file(&mut self, name: &str, path: PrivateFile) {
        self.env.push((name.to_string(), path.display().to_string()));
        self.files.push(path);
    }

    /// `spec` with these arguments, variables and files (a sandbox binds the files in).
    pub fn apply(&self, spec: CommandSpec) -> CommandSpec {
        let mut spec = spec.args(self.args.iter().cloned());
        for (name, value) in &self.env {
            spec = spec.env(name, value);
        }
        for path in &self.files {
            spec = spec.local_file(path.to_path_buf());
        }
        spec
    }
}

/// The run's tool rules as a Gemini CLI policy file (TOML; a JSON string is a TOML basic string):
/// every denied name (by name or category) excluded from the model, every allowed name approved
/// without asking. `None` when the run has no tool rules.
fn gemini_policy(portable: &PortableOptions) -> Option<String> {
    let rule = |names: &[String], decision: &str| {
        let names = serde_json::to_string(names).expect("strings serialize");
        format!("[[rule]]\ntoolName = {names}\ndecision = \"{decision}\"\npriority = 999\n\n")
    };
    let denied = portable.denied_tool_names(GEMINI_TOOLS);
    let mut policy = String::new();
    if !denied.is_empty() {
        policy.push_str(&rule(&denied, "deny"));
    }
    if !portable.allowed_tools.is_empty() {
        policy.push_str(&rule(&portable.allowed_tools, "allow"));
    }
    (!policy.is_empty()).then_some(policy)
}

/// The `mcpServers` document of Qwen's `--mcp-config`: Qwen reads a server's `url` as SSE and
/// `httpUrl` as streamable HTTP (what every HTTP server here speaks), so HTTP servers name theirs
/// `httpUrl`.
fn qwen_mcp_config(portable: &PortableOptions) -> Value {
    let mut document = portable.mcp_config_json();
    for server in document["mcpServers"].as_object_mut().into_iter().flat_map(|servers| servers.values_mut()) {
        if let Some(server) = server.as_object_mut().filter(|s| s.get("type").and_then(Value::as_str) == Some("http")) {
            server.remove("type");
            if let Some(url) = server.remove("url") {
                server.insert("httpUrl".into(), url);
            }
        }
    }
    document
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
        agent_api::kit::structured::ask_in_prompt(request)
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
        let qwen = cli_args(Flavor::Qwen, &portable, true).join(" ");
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
        assert!(!cli_args(Flavor::Qwen, &portable, false).join(" ").contains("--json-schema"));
        assert_eq!(cli_args(Flavor::Gemini, &portable, false), ["--include-directories", "/d"]);
        assert_eq!(acp_servers(&portable), [json!({"type": "http", "name": "m", "url": "http://127.0.0.1:1/mcp", "headers": []})]);
    }

    fn run_files(flavor: Flavor, request: &RunRequest, stream_json: bool) -> (String, CommandSpec, RunFiles) {
        let files = RunFiles::for_request(flavor, request, stream_json).unwrap();
        let spec = files.apply(CommandSpec::new("agent"));
        (spec.args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" "), spec, files)
    }

    #[test]
    fn gemini_takes_tool_rules_as_a_policy_file_and_a_denied_category_as_its_tools() {
        let portable = PortableOptions::default().allow_tool("read_file").deny_tool("web_fetch").deny_category(ToolCategory::Shell);
        let request = RunRequest::new("hi").with_portable(portable);
        let (args, _spec, _files) = run_files(Flavor::Gemini, &request, false);
        let path = args.strip_prefix("--policy ").expect("--policy FILE");
        assert!(path.ends_with(".toml"), "Gemini loads only .toml policy files: {path}");
        let policy = std::fs::read_to_string(path).unwrap();
        assert_eq!(
            policy,
            "[[rule]]\ntoolName = [\"web_fetch\",\"run_shell_command\"]\ndecision = \"deny\"\npriority = 999\n\n\
             [[rule]]\ntoolName = [\"read_file\"]\ndecision = \"allow\"\npriority = 999\n\n"
        );
        let far = request.with_launcher(agent_api::request::Launcher::Prefix(vec!["env".into()]));
        assert!(matches!(RunFiles::for_request(Flavor::Gemini, &far, false), Err(AgentError::InvalidRequest { .. })));
        assert!(run_files(Flavor::Gemini, &RunRequest::new("hi"), false).0.is_empty(), "no rules, no policy");
    }

    #[test]
    fn the_system_prompt_and_the_mcp_document_go_in_private_files_here_and_inline_far_away() {
        let portable = PortableOptions::default().system_prompt("sys").mcp_server("m", McpServer::http("http://127.0.0.1:1/mcp"));
        let here = RunRequest::new("hi").with_portable(portable.clone());
        let (args, spec, _files) = run_files(Flavor::Qwen, &here, true);
        let prompt = spec.env.get("QWEN_SYSTEM_MD").expect("QWEN_SYSTEM_MD");
        assert_eq!(std::fs::read_to_string(prompt).unwrap(), "sys");
        let mcp = args.strip_prefix("--mcp-config ").expect("--mcp-config FILE");
        let document: Value = serde_json::from_str(&std::fs::read_to_string(mcp).unwrap()).unwrap();
        // Qwen reads `url` as SSE: a streamable HTTP server is its `httpUrl`.
        assert_eq!(document["mcpServers"]["m"], json!({"httpUrl": "http://127.0.0.1:1/mcp", "headers": {}}));
        assert_eq!(spec.local_files.len(), 2, "a sandbox binds both");
        assert!(!args.contains("sys") && !args.contains("127.0.0.1"), "{args}");
        let (args, _, _) = run_files(Flavor::Qwen, &here, false);
        assert_eq!(args, "", "over ACP the servers go in session/new");
        let (_, spec, _) = run_files(Flavor::Gemini, &here, false);
        assert!(spec.env.contains_key("GEMINI_SYSTEM_MD"));

        let far = here.with_launcher(agent_api::request::Launcher::Ssh(agent_api::request::Ssh::new("host")));
        let (args, spec, _) = run_files(Flavor::Qwen, &far, true);
        assert!(args.starts_with("--system-prompt sys --mcp-config {"), "{args}");
        assert!(spec.local_files.is_empty());
        let gemini = RunFiles::for_request(Flavor::Gemini, &far, false).expect_err("Gemini reads its prompt only from a file");
        assert!(matches!(gemini, AgentError::InvalidRequest { .. }));
    }
}
