//! The portable options (`RunRequest::portable`) as Gemini CLI takes them: `--include-directories`,
//! its tool rules as a policy file, a replacement system prompt as the file `GEMINI_SYSTEM_MD`
//! names, ACP `session/new` `mcpServers` (ACP interface), and the SDK's schema in the prompt.
//! Its tools are one table ([`TOOLS`]), read by the policy file's deny rule and the headless
//! interface's tools facet.

use agent_api::capabilities as caps;
use agent_api::kit::options::OptionMapping;
use agent_api::kit::tool_table::{Tool, ToolTable};
use agent_api::request::TextOrFile;
use agent_api::request::ToolCategory;
use agent_api::run::FacetKind;
use agent_api::PortableOptions;
use agent_api::{AgentError, RunRequest};
use agent_api_acp::{RunFiles, ACP_ATTACHMENTS, ACP_IMAGES};

/// Gemini CLI takes tool rules only from policy files: the SDK writes one for the run.
const GEMINI_POLICY: &str =
    "--policy FILE (a 0600 TOML policy the SDK writes: allow / deny rules; local and bwrap only)";

/// Gemini CLI's own tools: what a denied category removes (its policy file's deny rule) and the
/// headless interface's tools facet kinds.
pub const TOOLS: ToolTable = ToolTable::new(&[
    Tool::new(
        "run_shell_command",
        ToolCategory::Shell,
        FacetKind::CommandExecution,
    ),
    Tool::new("write_file", ToolCategory::FileWrite, FacetKind::FileChange),
    Tool::new("replace", ToolCategory::FileWrite, FacetKind::FileChange),
    Tool::new("read_file", ToolCategory::FileRead, FacetKind::FileRead),
    Tool::new(
        "read_many_files",
        ToolCategory::FileRead,
        FacetKind::FileRead,
    ),
    Tool::new("glob", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("grep_search", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("list_directory", ToolCategory::FileRead, FacetKind::ToolUse),
    Tool::new("web_fetch", ToolCategory::Network, FacetKind::ToolUse),
    Tool::new(
        "google_web_search",
        ToolCategory::Network,
        FacetKind::ToolUse,
    ),
]);

/// How Gemini CLI takes each portable option; its `agent_api.options.*` capabilities are these.
pub(crate) const MAPPINGS: &[OptionMapping] = &[
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
    OptionMapping::new(caps::MODES, "--approval-mode plan|auto_edit|yolo (every interface); ACP session/set_mode (warm session)"),
];

// No variants: Gemini CLI 0.61.0 sets a thinking budget or level only in its settings' model
// configs, read from the user's and workspace's files and from system files it trusts only when
// root owns them and their folders (a file the SDK writes is skipped); see `spec/options.md`.

/// Gemini CLI's modes: its `--approval-mode` values (0.61.0) but the default.
pub(crate) const MODES: &[agent_api::request::ModeInfo] = &[
    agent_api::request::ModeInfo::new(
        "plan",
        "--approval-mode plan",
        "Read-only: plans and changes nothing.",
    ),
    agent_api::request::ModeInfo::new(
        "auto_edit",
        "--approval-mode auto_edit",
        "Edit tools are approved without asking.",
    ),
    agent_api::request::ModeInfo::new(
        "yolo",
        "--approval-mode yolo",
        "Every tool is approved without asking.",
    ),
];

/// The CLI flags of the portable options but those [`run_files`] gives.
pub(crate) fn cli_args(portable: &PortableOptions) -> Vec<String> {
    portable
        .add_dirs
        .iter()
        .flat_map(|dir| {
            [
                "--include-directories".to_string(),
                dir.display().to_string(),
            ]
        })
        .collect()
}

/// The files of `request` for Gemini CLI: the replacement system prompt (`GEMINI_SYSTEM_MD`), the
/// tool rules (`--policy`). Both only as files on the machine the agent runs on.
pub(crate) fn run_files(request: &RunRequest) -> Result<RunFiles, AgentError> {
    let mut files = RunFiles::default();
    let portable = &request.portable;
    let launcher = request.launcher.as_ref();
    // Gemini CLI reads a replacement prompt only from the file `GEMINI_SYSTEM_MD` names.
    if let Some(text) = &portable.system_prompt {
        match TextOrFile::for_launcher(launcher, text)? {
            TextOrFile::File(path) => files.env_file("GEMINI_SYSTEM_MD", path),
            TextOrFile::Text(_) => {
                return Err(AgentError::InvalidRequest {
                    reason: "Gemini CLI reads a system prompt only from a file on the machine it runs on, which this launcher cannot carry"
                        .into(),
                })
            }
        }
    }
    if let Some(policy) = gemini_policy(portable) {
        if !launcher.is_none_or(agent_api::request::Launcher::is_local_filesystem) {
            return Err(AgentError::InvalidRequest {
                reason: "Gemini CLI reads tool rules only from a policy file on the machine it runs on, which this launcher cannot carry"
                    .into(),
            });
        }
        let path = agent_api::kit::options::write_private_file(
            "agent-api-policy-",
            ".toml",
            policy.as_bytes(),
        )?;
        files.flag_file("--policy", path);
    }
    Ok(files)
}

/// The run's tool rules as a Gemini CLI policy file (TOML; a JSON string is a TOML basic string):
/// every denied name (by name or category) excluded from the model, every allowed name approved
/// without asking. `None` when the run has no tool rules.
fn gemini_policy(portable: &PortableOptions) -> Option<String> {
    let rule = |names: &[String], decision: &str| {
        let names = serde_json::to_string(names).expect("strings serialize");
        format!("[[rule]]\ntoolName = {names}\ndecision = \"{decision}\"\npriority = 999\n\n")
    };
    let denied = portable.denied_tool_names(&TOOLS);
    let mut policy = String::new();
    if !denied.is_empty() {
        policy.push_str(&rule(&denied, "deny"));
    }
    if !portable.allowed_tools.is_empty() {
        policy.push_str(&rule(&portable.allowed_tools, "allow"));
    }
    (!policy.is_empty()).then_some(policy)
}

/// Gemini's headless interface has no way to take MCP servers per run: refused before spawn.
pub(crate) fn check_headless(portable: &PortableOptions) -> Result<(), AgentError> {
    if portable.mcp_servers.is_empty() {
        return Ok(());
    }
    Err(AgentError::InvalidRequest {
        reason: "Gemini's headless interface takes no MCP servers per run; use the ACP interface"
            .into(),
    })
}

#[cfg(test)]
mod tests {
    use agent_api::kit::CommandSpec;
    use agent_api::request::McpServer;

    use super::*;

    fn args_of(request: &RunRequest) -> (String, CommandSpec, RunFiles) {
        let files = run_files(request).unwrap();
        let spec = files.apply(CommandSpec::new("gemini"));
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
    fn gemini_takes_only_its_directories_as_flags() {
        let portable = PortableOptions::default()
            .system_prompt("sys")
            .add_dir("/d")
            .allow_tool("read_file")
            .max_turns(2);
        assert_eq!(cli_args(&portable), ["--include-directories", "/d"]);
    }

    #[test]
    fn gemini_takes_tool_rules_as_a_policy_file_and_a_denied_category_as_its_tools() {
        let portable = PortableOptions::default()
            .allow_tool("read_file")
            .deny_tool("web_fetch")
            .deny_category(ToolCategory::Shell);
        let request = RunRequest::new("hi").with_portable(portable);
        let (args, _spec, _files) = args_of(&request);
        let path = args.strip_prefix("--policy ").expect("--policy FILE");
        assert!(
            path.ends_with(".toml"),
            "Gemini loads only .toml policy files: {path}"
        );
        let policy = std::fs::read_to_string(path).unwrap();
        assert_eq!(
            policy,
            "[[rule]]\ntoolName = [\"web_fetch\",\"run_shell_command\"]\ndecision = \"deny\"\npriority = 999\n\n\
             [[rule]]\ntoolName = [\"read_file\"]\ndecision = \"allow\"\npriority = 999\n\n"
        );
        let far = request.with_launcher(agent_api::request::Launcher::Prefix(vec!["env".into()]));
        assert!(matches!(
            run_files(&far),
            Err(AgentError::InvalidRequest { .. })
        ));
        assert!(
            args_of(&RunRequest::new("hi")).0.is_empty(),
            "no rules, no policy"
        );
    }

    #[test]
    fn the_system_prompt_goes_in_a_private_file_and_cannot_go_far_away() {
        let portable = PortableOptions::default()
            .system_prompt("sys")
            .mcp_server("m", McpServer::http("http://127.0.0.1:1/mcp"));
        let here = RunRequest::new("hi").with_portable(portable);
        let (args, spec, _files) = args_of(&here);
        assert_eq!(args, "", "the MCP servers go in session/new");
        let prompt = spec.env.get("GEMINI_SYSTEM_MD").expect("GEMINI_SYSTEM_MD");
        assert_eq!(std::fs::read_to_string(prompt).unwrap(), "sys");
        let far = here.with_launcher(agent_api::request::Launcher::Ssh(
            agent_api::request::Ssh::new("host"),
        ));
        let refused = run_files(&far).expect_err("Gemini reads its prompt only from a file");
        assert!(matches!(refused, AgentError::InvalidRequest { .. }));
    }
}
