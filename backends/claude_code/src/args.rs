//! The command line of one run: request options and `backend.claude_code.*` extensions turned
//! into Claude Code's argv (never a shell string), environment and working directory.

use agent_api::capabilities as caps;
use agent_api::kit::hitl::policy_in_mode;
use agent_api::kit::options::OptionMapping;
use agent_api::kit::CommandSpec;
use agent_api::request::{AgentMode, ModeInfo, PermissionRule, ToolCategory, VariantSet};
use agent_api::PortableOptions;
use agent_api::{AgentError, PermissionPolicy, RunRequest, SessionSelector};
use serde::{Deserialize, Serialize};

use crate::ClaudeCodeConfig;

/// Extension: `"control"` (default, the two-way stream-json channel) or `"print"` (one-way `-p`).
pub const EXT_MODE: &str = "backend.claude_code.mode";
/// Extension: more directories the agent may use (array of strings, `--add-dir`).
pub const EXT_EXTRA_DIRS: &str = "backend.claude_code.extra_dirs";
/// Extension: text appended to the system prompt (string, `--append-system-prompt`).
pub const EXT_SYSTEM_PROMPT_APPEND: &str = "backend.claude_code.system_prompt_append";
/// Extension: tool rules allowed without asking (array of strings, `--allowedTools`).
pub const EXT_ALLOWED_TOOLS: &str = "backend.claude_code.allowed_tools";
/// Extension: tool rules removed from the agent (array of strings, `--disallowedTools`).
pub const EXT_DISALLOWED_TOOLS: &str = "backend.claude_code.disallowed_tools";
/// Extension: the native permission mode (`default`, `acceptEdits`, `plan`, `bypassPermissions`,
/// `dontAsk`); overrides `RunRequest::skip_permission_prompts` and print mode's policy mapping.
pub const EXT_PERMISSION_MODE: &str = "backend.claude_code.permission_mode";
/// Extension: the most agentic turns (whole number, `--max-turns`).
pub const EXT_MAX_TURNS: &str = "backend.claude_code.max_turns";

/// How Claude Code takes each portable option (`RunRequest::portable`); its capabilities are these.
pub const OPTION_MAPPINGS: &[OptionMapping] = &[
    OptionMapping::new(caps::SYSTEM_PROMPT, "--system-prompt-file (0600 file; --system-prompt through a far launcher)"),
    OptionMapping::new(
        caps::APPEND_SYSTEM_PROMPT,
        "--append-system-prompt-file (0600 file; --append-system-prompt through a far launcher)",
    ),
    OptionMapping::new(caps::ADD_DIRS, "--add-dir"),
    OptionMapping::new(caps::MCP_SERVERS, "--mcp-config FILE (mcpServers JSON, mode 0600)"),
    OptionMapping::new(caps::ALLOWED_TOOLS, "--allowedTools"),
    OptionMapping::new(caps::DENIED_TOOLS, "--disallowedTools"),
    OptionMapping::new(
        caps::DENIED_TOOL_CATEGORIES,
        "--disallowedTools: Bash; Write, Edit, MultiEdit, NotebookEdit; Read, Glob, Grep; WebFetch, WebSearch",
    ),
    OptionMapping::new(caps::MAX_TURNS, "--max-turns"),
    OptionMapping::new(caps::MAX_BUDGET_USD, "--max-budget-usd"),
    OptionMapping::new(caps::OUTPUT_SCHEMA, "--json-schema"),
    OptionMapping::new(caps::IMAGES, "stream-json user message image blocks (base64; two-way mode)"),
    OptionMapping::new(caps::VARIANTS, "--effort"),
    OptionMapping::new(caps::MODES, "--permission-mode; control request set_permission_mode (warm session)"),
];

/// Claude Code's modes: its permission modes (`--permission-mode`, and `set_permission_mode` on a
/// warm session), `plan` among them.
pub const MODES: &[ModeInfo] = &[
    ModeInfo::new(
        "plan",
        "--permission-mode plan",
        "Plans and changes nothing; leaving plan mode is a question (ExitPlanMode) the caller answers.",
    ),
    ModeInfo::new("acceptEdits", "--permission-mode acceptEdits", "File edits are approved without asking."),
    ModeInfo::new("auto", "--permission-mode auto", "Claude Code decides itself which tool calls need asking."),
    ModeInfo::new("bypassPermissions", "--permission-mode bypassPermissions", "Nothing is asked (refused as root without IS_SANDBOX=1)."),
    ModeInfo::new("dontAsk", "--permission-mode dontAsk", "Whatever would be asked is denied."),
];

/// Claude Code's effort levels (`--effort`, 2.1.197), the same for every model.
pub const VARIANTS: &[VariantSet] = &[VariantSet::all_models(
    &["low", "medium", "high", "xhigh", "max"],
    "--effort",
)];

/// Which channel a run uses (`backend.claude_code.mode`: `"control"` or `"print"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Two-way: `--input-format stream-json --permission-prompt-tool stdio`.
    #[default]
    Control,
    /// One-way: `-p PROMPT`; no request channel: the policy becomes pre-approved tools
    /// (`--allowedTools`, `acceptEdits`), and the CLI denies every other tool that needs a permission.
    Print,
}

/// Claude Code's native permission mode (`--permission-mode`), spelled as the CLI spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum PermissionMode {
    /// `default`: the CLI asks for each tool that needs a permission.
    Default,
    /// `acceptEdits`: file edits are approved without asking.
    AcceptEdits,
    /// `plan`: the agent plans and changes nothing.
    Plan,
    /// `bypassPermissions`: nothing is asked (refused as root without `IS_SANDBOX=1`).
    BypassPermissions,
    /// `dontAsk`: whatever would be asked is denied.
    DontAsk,
    /// `auto`: Claude Code decides itself which tool calls need asking.
    Auto,
}

impl PermissionMode {
    /// The CLI's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::Plan => "plan",
            Self::BypassPermissions => "bypassPermissions",
            Self::DontAsk => "dontAsk",
            Self::Auto => "auto",
        }
    }

    /// The permission mode an agent mode names (`None`: the default, nothing to pass).
    pub fn of_mode(mode: &AgentMode) -> Option<Self> {
        [
            Self::Plan,
            Self::AcceptEdits,
            Self::Auto,
            Self::BypassPermissions,
            Self::DontAsk,
        ]
        .into_iter()
        .find(|m| m.as_str() == mode.as_str())
    }
}

/// The backend's own options (`backend.claude_code.*`), attached with
/// [`RunRequest::with_options`]; each field is the extension key of the same name.
///
/// ```
/// use agent_api::RunRequest;
/// use agent_api_claude_code::{ClaudeCodeOptions, Mode};
/// let request = RunRequest::new("hi").with_options(&ClaudeCodeOptions::default().mode(Mode::Print).max_turns(3));
/// assert_eq!(request.extensions["backend.claude_code.mode"], "print");
/// assert_eq!(request.extensions["backend.claude_code.max_turns"], 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ClaudeCodeOptions {
    /// The channel ([`EXT_MODE`]); [`Mode::Control`] when absent.
    pub mode: Option<Mode>,
    /// More directories the agent may use ([`EXT_EXTRA_DIRS`], `--add-dir` each).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_dirs: Vec<String>,
    /// Text appended to the system prompt ([`EXT_SYSTEM_PROMPT_APPEND`], `--append-system-prompt`).
    pub system_prompt_append: Option<String>,
    /// Tool rules allowed without asking ([`EXT_ALLOWED_TOOLS`], `--allowedTools`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// Tool rules removed from the agent ([`EXT_DISALLOWED_TOOLS`], `--disallowedTools`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disallowed_tools: Vec<String>,
    /// The native permission mode ([`EXT_PERMISSION_MODE`]); overrides
    /// `RunRequest::skip_permission_prompts` and print mode's policy mapping.
    pub permission_mode: Option<PermissionMode>,
    /// The most agentic turns ([`EXT_MAX_TURNS`], `--max-turns`); above 0.
    pub max_turns: Option<u32>,
}

impl ClaudeCodeOptions {
    /// Sets the channel.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Adds directories the agent may use.
    pub fn extra_dirs<I: IntoIterator<Item = S>, S: Into<String>>(mut self, dirs: I) -> Self {
        self.extra_dirs.extend(dirs.into_iter().map(Into::into));
        self
    }

    /// Sets the text appended to the system prompt.
    pub fn system_prompt_append(mut self, text: impl Into<String>) -> Self {
        self.system_prompt_append = Some(text.into());
        self
    }

    /// Adds tool rules allowed without asking (`Bash(git:*)`, `Read`).
    pub fn allowed_tools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, rules: I) -> Self {
        self.allowed_tools.extend(rules.into_iter().map(Into::into));
        self
    }

    /// Adds tool rules removed from the agent.
    pub fn disallowed_tools<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        rules: I,
    ) -> Self {
        self.disallowed_tools
            .extend(rules.into_iter().map(Into::into));
        self
    }

    /// Sets the native permission mode.
    pub fn permission_mode(mut self, mode: PermissionMode) -> Self {
        self.permission_mode = Some(mode);
        self
    }

    /// Sets the most agentic turns (0 is refused when the run starts).
    pub fn max_turns(mut self, turns: u32) -> Self {
        self.max_turns = Some(turns);
        self
    }
}

impl agent_api::request::BackendOptions for ClaudeCodeOptions {
    const KIND: &'static str = "claude_code";
}

/// The command of a run, and what the protocol needs to know about it.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// What to spawn.
    pub spec: CommandSpec,
    /// The channel.
    pub mode: Mode,
    /// Whether the bypass permission mode was asked for (root refuses it without `IS_SANDBOX=1`).
    pub bypass: bool,
    /// The 0600 files the command names (`--mcp-config`, the system prompt files), removed when
    /// dropped: the run holds them.
    pub files: Vec<std::sync::Arc<agent_api::request::PrivateFile>>,
}

/// Print mode's static form of a policy (it has no request channel, so nothing can be asked or
/// approved one by one): the native permission mode and the tools pre-approved with
/// `--allowedTools`, the run's MCP servers among them. Whatever is not pre-approved is denied by
/// the CLI itself. The two-way mode passes nothing: every request comes to
/// `agent_api::kit::hitl`, which applies the policy.
fn print_policy(
    policy: &PermissionPolicy,
    portable: &PortableOptions,
) -> (Option<PermissionMode>, Vec<String>) {
    let mode = (policy.rule(ToolCategory::FileWrite) == PermissionRule::Approve)
        .then_some(PermissionMode::AcceptEdits);
    (
        mode,
        agent_api::kit::hitl::pre_approved::allowed_tools(policy, &crate::TOOLS, portable),
    )
}

/// `flag TEXT`, or `flag-file PATH` with the text in a private file where the agent can read this
/// machine's files (Claude Code takes both forms for its system prompts).
fn text_flag(
    spec: CommandSpec,
    request: &RunRequest,
    files: &mut Vec<std::sync::Arc<agent_api::request::PrivateFile>>,
    flag: &str,
    text: &str,
) -> Result<CommandSpec, AgentError> {
    Ok(
        match agent_api::request::TextOrFile::for_launcher(request.launcher.as_ref(), text)? {
            agent_api::request::TextOrFile::File(path) => {
                let spec = spec
                    .arg(format!("{flag}-file"))
                    .arg(path.as_os_str())
                    .local_file(path.to_path_buf());
                files.push(std::sync::Arc::new(path));
                spec
            }
            agent_api::request::TextOrFile::Text(text) => spec.arg(flag).arg(text),
        },
    )
}

/// Builds the command line of `request` for `config`.
pub fn invocation(
    config: &ClaudeCodeConfig,
    request: &RunRequest,
) -> Result<Invocation, AgentError> {
    let options: ClaudeCodeOptions = request.options()?;
    if options.max_turns == Some(0) {
        return Err(AgentError::InvalidExtension {
            key: EXT_MAX_TURNS.to_string(),
            reason: "must be above 0".to_string(),
        });
    }
    let mode = options.mode.unwrap_or_default();
    let mut spec = CommandSpec::new(&config.binary).args([
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
    ]);
    if mode == Mode::Control {
        spec = spec
            .args([
                "--input-format",
                "stream-json",
                "--permission-prompt-tool",
                "stdio",
                // Each user message comes back once the CLI takes it: a steering message's
                // acknowledgement (`agent_api.control.steer`).
                "--replay-user-messages",
            ])
            .with_stdin();
    }
    if let Some(model) = &request.model {
        spec = spec.arg("--model").arg(model);
    }
    if let Some(effort) = &request.variant {
        spec = spec.arg("--effort").arg(effort);
    }
    match &request.session {
        SessionSelector::New => {
            if let Some(id) = request.uuid_session_id()? {
                spec = spec.arg("--session-id").arg(id);
            }
        }
        SessionSelector::Resume(id) => spec = spec.arg("--resume").arg(&id.id),
        SessionSelector::ResumeLast => spec = spec.arg("--continue"),
        SessionSelector::Fork(id) => spec = spec.arg("--resume").arg(&id.id).arg("--fork-session"),
        _ => {
            return Err(AgentError::InvalidRequest {
                reason: "Claude Code cannot take this session selector".into(),
            })
        }
    }
    let (policy_mode, mut allowed_tools) = if mode == Mode::Print {
        print_policy(
            &policy_in_mode(request.mode.as_ref(), &request.permissions),
            &request.portable,
        )
    } else {
        (None, Vec::new())
    };
    let skip_prompts = request
        .skip_permission_prompts
        .then_some(PermissionMode::BypassPermissions);
    // The request's mode is a choice of how to work, so it wins over the skip flag and print
    // mode's policy mapping (plan mode stays read-only whatever the policy approves).
    let chosen = request.mode.as_ref().and_then(PermissionMode::of_mode);
    let permission_mode = options
        .permission_mode
        .or(chosen)
        .or(skip_prompts)
        .or(policy_mode);
    let bypass = permission_mode == Some(PermissionMode::BypassPermissions);
    if let Some(m) = permission_mode {
        spec = spec.arg("--permission-mode").arg(m.as_str());
    }
    let portable = &request.portable;
    allowed_tools.extend(
        portable
            .allowed_tools
            .iter()
            .cloned()
            .chain(options.allowed_tools),
    );
    if !allowed_tools.is_empty() {
        spec = spec.arg("--allowedTools").arg(allowed_tools.join(","));
    }
    let mut denied = portable.denied_tool_names(&crate::TOOLS);
    denied.extend(options.disallowed_tools);
    if !denied.is_empty() {
        spec = spec.arg("--disallowedTools").arg(denied.join(","));
    }
    for dir in portable
        .add_dirs
        .iter()
        .map(|d| d.as_os_str())
        .chain(options.extra_dirs.iter().map(std::ffi::OsStr::new))
    {
        spec = spec.arg("--add-dir").arg(dir);
    }
    let mut files = Vec::new();
    if let Some(text) = &portable.system_prompt {
        spec = text_flag(spec, request, &mut files, "--system-prompt", text)?;
    }
    let appended: Vec<&str> = portable
        .append_system_prompt
        .iter()
        .chain(&options.system_prompt_append)
        .map(String::as_str)
        .collect();
    if !appended.is_empty() {
        spec = text_flag(
            spec,
            request,
            &mut files,
            "--append-system-prompt",
            &appended.join("\n\n"),
        )?;
    }
    // The smallest of the native option and the SDK's limit: each must hold.
    let turns = portable
        .native_limits
        .max_turns
        .or(options.max_turns)
        .into_iter()
        .chain(request.limits.max_turns)
        .min();
    if let Some(turns) = turns {
        spec = spec.arg("--max-turns").arg(turns.to_string());
    }
    let budget = portable
        .native_limits
        .max_budget_usd
        .into_iter()
        .chain(request.limits.max_cost_usd)
        .reduce(f64::min);
    if let Some(usd) = budget {
        spec = spec.arg("--max-budget-usd").arg(usd.to_string());
    }
    // A file, not inline JSON: the servers' env and headers (the caller tools' secret) stay off argv.
    if !portable.mcp_servers.is_empty() {
        let path = portable.write_mcp_config()?;
        spec = spec
            .arg("--mcp-config")
            .arg(path.as_os_str())
            .local_file(path.to_path_buf());
        files.push(std::sync::Arc::new(path));
    }
    if let Some(schema) = &portable.output_schema {
        spec = spec.arg("--json-schema").arg(schema.to_string());
    }
    spec = spec.args(config.extra_args.iter().cloned());
    if mode == Mode::Print {
        // The prompt goes to stdin (the protocol writes it): never in argv, where `ps` shows it
        // and the OS limits its length.
        spec = spec.with_stdin();
    }
    for (key, value) in &config.env {
        spec = spec.env(key, value);
    }
    // `~/.claude` and `~/.claude.json`: its state where `CLAUDE_CONFIG_DIR` does not move it.
    spec = spec
        .for_request(request)
        .reads_env(READS_ENV)
        .state_vars(["CLAUDE_CONFIG_DIR"])
        .home_state([".claude", ".claude.json"]);
    spec.clear_env = !config.inherit_env;
    let mut spec = crate::HOME_LAYOUT.apply(spec, &request.home)?;
    if let Some(dir) = request
        .working_dir
        .clone()
        .or_else(|| config.working_dir.clone())
    {
        spec = spec.cwd(dir);
    }
    Ok(Invocation {
        spec,
        mode,
        bypass,
        files,
    })
}

/// The variables Claude Code reads for its endpoint, credentials and behaviour: all a launcher
/// other than Local passes on from the caller's environment (`spec/launchers.md`).
const READS_ENV: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "DISABLE_AUTOUPDATER",
    "DISABLE_TELEMETRY",
    "IS_SANDBOX",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn argv(request: &RunRequest) -> Vec<String> {
        let inv = invocation(&ClaudeCodeConfig::default(), request).unwrap();
        inv.spec
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn control_mode_uses_the_two_way_channel_and_keeps_the_prompt_off_the_command_line() {
        let args = argv(&RunRequest::new("-rf secret prompt"));
        assert!(args
            .windows(2)
            .any(|w| w == ["--input-format", "stream-json"]));
        assert!(args
            .windows(2)
            .any(|w| w == ["--permission-prompt-tool", "stdio"]));
        assert!(args.iter().any(|a| a == "--replay-user-messages"));
        assert!(!args.iter().any(|a| a.contains("secret prompt")));
    }

    #[test]
    fn print_mode_keeps_the_prompt_off_the_command_line_and_reads_stdin() {
        let req = RunRequest::new("-x secret prompt")
            .with_options(&ClaudeCodeOptions::default().mode(Mode::Print));
        let args = argv(&req);
        assert!(
            !args.iter().any(|a| a.contains("secret prompt")),
            "{args:?}"
        );
        assert!(!args.iter().any(|a| a == "--input-format"));
        assert!(
            invocation(&ClaudeCodeConfig::default(), &req)
                .unwrap()
                .spec
                .stdin,
            "the prompt goes to stdin"
        );
    }

    #[test]
    fn sessions_models_and_extensions_map_to_their_flags() {
        let req = RunRequest::new("hi")
            .with_model("claude-sonnet-4-5")
            .with_session(SessionSelector::Fork("abc".into()))
            .with_options(
                &ClaudeCodeOptions::default()
                    .extra_dirs(["/a", "/b"])
                    .allowed_tools(["Bash(git:*)", "Read"])
                    .disallowed_tools(["WebFetch"])
                    .system_prompt_append("be brief")
                    .max_turns(3),
            );
        let args = argv(&req).join(" ");
        for want in [
            "--model claude-sonnet-4-5",
            "--resume abc --fork-session",
            "--add-dir /a --add-dir /b",
            "--allowedTools Bash(git:*),Read",
            "--disallowedTools WebFetch",
            "--append-system-prompt-file /",
            "--max-turns 3",
        ] {
            assert!(args.contains(want), "{want} missing from {args}");
        }
        assert!(
            argv(&RunRequest::new("hi").with_session(SessionSelector::ResumeLast))
                .contains(&"--continue".to_string())
        );
    }

    #[test]
    fn portable_options_map_to_their_native_flags_and_merge_with_the_extensions() {
        use agent_api::request::McpServer;
        use agent_api::PortableOptions;
        let portable = PortableOptions::default()
            .system_prompt("you are terse")
            .append_system_prompt("cite files")
            .add_dir("/p")
            .allow_tool("Read")
            .deny_tool("WebFetch")
            .deny_category(ToolCategory::Shell)
            .deny_category(ToolCategory::Network)
            .max_turns(4)
            .max_budget_usd(0.5)
            .mcp_server("files", McpServer::stdio("mcp-files", ["--root", "/srv"]))
            .output_schema(json!({"type": "object"}));
        let req = RunRequest::new("hi").with_portable(portable).with_options(
            &ClaudeCodeOptions::default()
                .extra_dirs(["/e"])
                .system_prompt_append("be brief")
                .disallowed_tools(["Bash"]),
        );
        let inv = invocation(&ClaudeCodeConfig::default(), &req).unwrap();
        let args: Vec<String> = inv
            .spec
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let joined = args.join(" ");
        // The system prompts go in 0600 files, off argv.
        for (flag, text) in [
            ("--system-prompt-file", "you are terse"),
            ("--append-system-prompt-file", "cite files\n\nbe brief"),
        ] {
            let path = args
                .iter()
                .position(|a| a == flag)
                .map(|i| &args[i + 1])
                .unwrap_or_else(|| panic!("{flag} in {joined}"));
            assert_eq!(std::fs::read_to_string(path).unwrap(), text);
            assert!(
                inv.spec
                    .local_files
                    .iter()
                    .any(|f| f.as_os_str() == path.as_str()),
                "a sandbox binds {path}"
            );
        }
        assert!(
            !joined.contains("you are terse"),
            "the system prompt is on argv: {joined}"
        );
        for want in [
            "--add-dir /p --add-dir /e",
            "--allowedTools Read",
            // A category's tools join the names once (WebFetch is both named and in network).
            "--disallowedTools WebFetch,Bash,WebSearch",
            "--max-turns 4",
            "--max-budget-usd 0.5",
            r#"--json-schema {"type":"object"}"#,
        ] {
            assert!(joined.contains(want), "{want} missing from {joined}");
        }
        let mcp = args
            .iter()
            .position(|a| a == "--mcp-config")
            .map(|i| &args[i + 1])
            .expect("--mcp-config");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(mcp).unwrap().permissions().mode() & 0o777,
            0o600,
            "only the owner reads the MCP config"
        );
        let mcp: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(mcp).unwrap()).unwrap();
        assert_eq!(
            mcp["mcpServers"]["files"],
            json!({"command": "mcp-files", "args": ["--root", "/srv"], "env": {}})
        );
        // Images travel in the user message, not on argv (the protocol's tests); the mode and
        // variant have their own test.
        let elsewhere = [caps::IMAGES, caps::VARIANTS, caps::MODES];
        for mapping in OPTION_MAPPINGS
            .iter()
            .filter(|m| !elsewhere.contains(&m.capability))
        {
            assert!(
                req.required_capabilities().contains(mapping.capability),
                "{} not exercised",
                mapping.capability
            );
        }
    }

    /// A far launcher's agent cannot read this machine's files: the prompt goes inline there.
    #[test]
    fn through_a_far_launcher_the_system_prompt_goes_inline() {
        let launcher = agent_api::request::Launcher::Ssh(agent_api::request::Ssh::new("host"));
        let portable = agent_api::PortableOptions::default().system_prompt("you are terse");
        let req = RunRequest::new("hi")
            .with_portable(portable)
            .with_launcher(launcher);
        let inv = invocation(&ClaudeCodeConfig::default(), &req).unwrap();
        let joined = inv
            .spec
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(joined.contains("--system-prompt you are terse"), "{joined}");
        assert!(inv.spec.local_files.is_empty() && inv.files.is_empty());
    }

    #[test]
    fn the_two_way_mode_passes_no_policy_flags_so_every_request_reaches_the_kit() {
        let rules = [
            (ToolCategory::FileWrite, PermissionRule::Approve),
            (ToolCategory::Shell, PermissionRule::Approve),
        ];
        for policy in [
            PermissionPolicy::ApproveAll,
            PermissionPolicy::DenyAll,
            PermissionPolicy::ByCategory(rules.into_iter().collect()),
        ] {
            let inv = invocation(
                &ClaudeCodeConfig::default(),
                &RunRequest::new("hi").with_permissions(policy.clone()),
            )
            .unwrap();
            assert!(!inv.bypass, "{policy:?}");
            let args = argv(&RunRequest::new("hi").with_permissions(policy.clone())).join(" ");
            assert!(
                !args.contains("--permission-mode") && !args.contains("--allowedTools"),
                "{policy:?}: {args}"
            );
        }
    }

    #[test]
    fn modes_become_permission_modes_and_variants_the_effort() {
        let plan = RunRequest::new("hi")
            .with_mode(agent_api::request::AgentMode::Plan)
            .with_variant("high");
        let args = argv(&plan).join(" ");
        assert!(
            args.contains("--permission-mode plan") && args.contains("--effort high"),
            "{args}"
        );
        // Plan mode wins over the skip flag: it stays read-only.
        let args = argv(&plan.clone().with_skip_permission_prompts(true)).join(" ");
        assert!(
            args.contains("--permission-mode plan") && !args.contains("bypassPermissions"),
            "{args}"
        );
        for mode in MODES {
            let args = argv(&RunRequest::new("hi").with_mode(mode.mode())).join(" ");
            assert!(
                args.contains(&format!("--permission-mode {}", mode.id)),
                "{}: {args}",
                mode.id
            );
        }
        let args = argv(&RunRequest::new("hi").with_mode(agent_api::request::AgentMode::Default))
            .join(" ");
        assert!(
            !args.contains("--permission-mode") && !args.contains("--effort"),
            "{args}"
        );
    }

    #[test]
    fn unknown_modes_and_variants_are_refused_before_spawn() {
        use agent_api::AgentBackend;
        let backend = crate::ClaudeCodeBackend::new(ClaudeCodeConfig::default());
        let err = backend
            .validate(&RunRequest::new("hi").with_variant("extreme"))
            .unwrap_err();
        assert!(
            matches!(&err, AgentError::UnknownVariant { valid, .. } if valid.len() == 5),
            "{err}"
        );
        assert!(
            err.to_string().contains("low, medium, high, xhigh, max"),
            "{err}"
        );
        let err = backend
            .validate(
                &RunRequest::new("hi").with_mode(agent_api::request::AgentMode::parse("build")),
            )
            .unwrap_err();
        assert!(
            err.to_string().contains("plan") && err.to_string().contains("acceptEdits"),
            "{err}"
        );
    }

    #[test]
    fn skipping_permission_prompts_is_its_own_option_mapped_to_bypass() {
        let req = RunRequest::new("hi").with_skip_permission_prompts(true);
        assert!(req
            .required_capabilities()
            .contains(agent_api::capabilities::SKIP_PERMISSION_PROMPTS));
        let inv = invocation(&ClaudeCodeConfig::default(), &req).unwrap();
        assert!(inv.bypass);
        assert!(argv(&req)
            .join(" ")
            .contains("--permission-mode bypassPermissions"));
    }

    #[test]
    fn print_mode_turns_the_policy_into_pre_approved_tools() {
        let print = |policy| {
            RunRequest::new("hi")
                .with_options(&ClaudeCodeOptions::default().mode(Mode::Print))
                .with_permissions(policy)
        };
        let all = argv(&print(PermissionPolicy::ApproveAll)).join(" ");
        assert!(all.contains("--permission-mode acceptEdits"), "{all}");
        assert!(all.contains("--allowedTools Bash,Write,Edit,MultiEdit,NotebookEdit,WebFetch,WebSearch,Read,Glob,Grep"), "{all}");
        assert!(!all.contains("bypassPermissions"), "{all}");
        for policy in [PermissionPolicy::Ask, PermissionPolicy::DenyAll] {
            let args = argv(&print(policy.clone())).join(" ");
            assert!(
                !args.contains("--permission-mode") && !args.contains("--allowedTools"),
                "{policy:?}: {args}"
            );
        }
        let shell_only = PermissionPolicy::ByCategory(
            [(ToolCategory::Shell, PermissionRule::Approve)]
                .into_iter()
                .collect(),
        );
        let args = argv(&print(shell_only)).join(" ");
        assert!(
            args.contains("--allowedTools Bash") && !args.contains("--permission-mode"),
            "{args}"
        );
        // The caller tools' server (any MCP server of the run) is pre-approved with MCP tools.
        let portable = agent_api::PortableOptions::default().mcp_server(
            "caller_tools",
            agent_api::request::McpServer::http("http://127.0.0.1:9/mcp"),
        );
        let mcp_only = PermissionPolicy::ByCategory(
            [(ToolCategory::Mcp, PermissionRule::Approve)]
                .into_iter()
                .collect(),
        );
        let args = argv(&print(mcp_only).with_portable(portable.clone())).join(" ");
        assert!(args.contains("--allowedTools mcp__caller_tools"), "{args}");
        let args = argv(&print(PermissionPolicy::Ask).with_portable(portable)).join(" ");
        assert!(!args.contains("--allowedTools"), "{args}");
    }

    #[test]
    fn malformed_extensions_fail_before_spawning() {
        for (key, value) in [
            (EXT_MODE, json!("tui")),
            (EXT_EXTRA_DIRS, json!("/a")),
            (EXT_MAX_TURNS, json!(0)),
            (EXT_PERMISSION_MODE, json!("yolo")),
        ] {
            let err = invocation(
                &ClaudeCodeConfig::default(),
                &RunRequest::new("hi").with_extension(key, value),
            )
            .unwrap_err();
            assert!(
                matches!(&err, AgentError::InvalidExtension { key: named, .. } if named == key),
                "{key}: {err:?}"
            );
        }
        let unknown =
            RunRequest::new("hi").with_extension("backend.claude_code.max_turn", json!(3));
        let err = invocation(&ClaudeCodeConfig::default(), &unknown).unwrap_err();
        assert!(
            matches!(err, AgentError::UnknownExtension { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn the_typed_options_round_trip_through_the_request_under_the_public_keys() {
        let options = ClaudeCodeOptions::default()
            .mode(Mode::Print)
            .extra_dirs(["/a"])
            .system_prompt_append("be brief")
            .allowed_tools(["Read"])
            .disallowed_tools(["WebFetch"])
            .permission_mode(PermissionMode::AcceptEdits)
            .max_turns(2);
        let request = RunRequest::new("hi").with_options(&options);
        assert_eq!(request.options::<ClaudeCodeOptions>().unwrap(), options);
        assert_eq!(
            request.extensions[EXT_PERMISSION_MODE],
            json!("acceptEdits")
        );
        assert_eq!(
            agent_api::kit::options::extension_keys::<ClaudeCodeOptions>(),
            [
                EXT_MODE,
                EXT_EXTRA_DIRS,
                EXT_SYSTEM_PROMPT_APPEND,
                EXT_ALLOWED_TOOLS,
                EXT_DISALLOWED_TOOLS,
                EXT_PERMISSION_MODE,
                EXT_MAX_TURNS
            ]
        );
        let wrong = RunRequest::new("hi").with_extension(EXT_ALLOWED_TOOLS, json!([1]));
        let err = wrong.options::<ClaudeCodeOptions>().unwrap_err();
        assert!(
            matches!(&err, AgentError::InvalidExtension { key, .. } if key == EXT_ALLOWED_TOOLS),
            "{err:?}"
        );
    }
}
