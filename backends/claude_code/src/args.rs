//! The command line of one run: request options and `backend.claude_code.*` extensions turned
//! into Claude Code's argv (never a shell string), environment and working directory.

use agent_api::kit::CommandSpec;
use agent_api::{AgentError, PermissionPolicy, PermissionRule, RunRequest, SessionSelector, ToolCategory};
use serde_json::Value;

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

/// Every extension key the backend understands.
pub const EXTENSION_KEYS: &[&str] =
    &[EXT_MODE, EXT_EXTRA_DIRS, EXT_SYSTEM_PROMPT_APPEND, EXT_ALLOWED_TOOLS, EXT_DISALLOWED_TOOLS, EXT_PERMISSION_MODE, EXT_MAX_TURNS];

/// Which channel a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Two-way: `--input-format stream-json --permission-prompt-tool stdio`.
    Control,
    /// One-way: `-p PROMPT`; no request channel: the policy becomes pre-approved tools
    /// (`--allowedTools`, `acceptEdits`), and the CLI denies every other tool that needs a permission.
    Print,
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
}

fn invalid(key: &str, reason: &str) -> AgentError {
    AgentError::InvalidExtension { key: key.to_string(), reason: reason.to_string() }
}

fn string_ext<'a>(request: &'a RunRequest, key: &str) -> Result<Option<&'a str>, AgentError> {
    match request.extensions.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(key, "must be a string")),
    }
}

fn list_ext(request: &RunRequest, key: &str) -> Result<Vec<String>, AgentError> {
    match request.extensions.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            items.iter().map(|v| v.as_str().map(str::to_string).ok_or_else(|| invalid(key, "must be an array of strings"))).collect()
        }
        Some(_) => Err(invalid(key, "must be an array of strings")),
    }
}

/// Print mode's static form of a policy (it has no request channel, so nothing can be asked or
/// approved one by one): the native permission mode and the tools pre-approved with
/// `--allowedTools`. Whatever is not pre-approved is denied by the CLI itself. The two-way mode
/// passes nothing: every request comes to `agent_api::kit::hitl`, which applies the policy.
fn print_policy(policy: &PermissionPolicy) -> (Option<&'static str>, Vec<&'static str>) {
    const TOOLS: [(ToolCategory, &[&str]); 4] = [
        (ToolCategory::Shell, &["Bash"]),
        (ToolCategory::FileWrite, &["Write", "Edit", "MultiEdit", "NotebookEdit"]),
        (ToolCategory::Network, &["WebFetch", "WebSearch"]),
        (ToolCategory::FileRead, &["Read", "Glob", "Grep"]),
    ];
    let approved = |category| policy.rule(category) == PermissionRule::Approve;
    let mode = approved(ToolCategory::FileWrite).then_some("acceptEdits");
    let tools = TOOLS.iter().filter(|(category, _)| approved(*category)).flat_map(|(_, names)| names.iter().copied()).collect();
    (mode, tools)
}

/// Builds the command line of `request` for `config`.
pub fn invocation(config: &ClaudeCodeConfig, request: &RunRequest) -> Result<Invocation, AgentError> {
    let mode = match string_ext(request, EXT_MODE)? {
        None | Some("control") => Mode::Control,
        Some("print") => Mode::Print,
        Some(_) => return Err(invalid(EXT_MODE, "must be \"control\" or \"print\"")),
    };
    let mut spec =
        CommandSpec::new(&config.binary).args(["-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages"]);
    if mode == Mode::Control {
        spec = spec.args(["--input-format", "stream-json", "--permission-prompt-tool", "stdio"]).with_stdin();
    }
    if let Some(model) = &request.model {
        spec = spec.arg("--model").arg(model);
    }
    match &request.session {
        SessionSelector::New => {}
        SessionSelector::Resume(id) => spec = spec.arg("--resume").arg(id),
        SessionSelector::ResumeLast => spec = spec.arg("--continue"),
        SessionSelector::Fork(id) => spec = spec.arg("--resume").arg(id).arg("--fork-session"),
        other => return Err(AgentError::InvalidRequest { reason: format!("unsupported session selector {other:?}") }),
    }
    let (policy_mode, allowed) = if mode == Mode::Print { print_policy(&request.permissions) } else { (None, Vec::new()) };
    let mut allowed_tools: Vec<String> = allowed.into_iter().map(str::to_string).collect();
    let skip_prompts = request.skip_permission_prompts.then_some("bypassPermissions");
    let permission_mode = match string_ext(request, EXT_PERMISSION_MODE)? {
        Some(m @ ("default" | "acceptEdits" | "plan" | "bypassPermissions" | "dontAsk")) => Some(m.to_string()),
        Some(_) => return Err(invalid(EXT_PERMISSION_MODE, "must be one of default, acceptEdits, plan, bypassPermissions, dontAsk")),
        None => skip_prompts.or(policy_mode).map(str::to_string),
    };
    let bypass = permission_mode.as_deref() == Some("bypassPermissions");
    if let Some(m) = &permission_mode {
        spec = spec.arg("--permission-mode").arg(m);
    }
    allowed_tools.extend(list_ext(request, EXT_ALLOWED_TOOLS)?);
    if !allowed_tools.is_empty() {
        spec = spec.arg("--allowedTools").arg(allowed_tools.join(","));
    }
    let disallowed = list_ext(request, EXT_DISALLOWED_TOOLS)?;
    if !disallowed.is_empty() {
        spec = spec.arg("--disallowedTools").arg(disallowed.join(","));
    }
    for dir in list_ext(request, EXT_EXTRA_DIRS)? {
        spec = spec.arg("--add-dir").arg(dir);
    }
    if let Some(text) = string_ext(request, EXT_SYSTEM_PROMPT_APPEND)? {
        spec = spec.arg("--append-system-prompt").arg(text);
    }
    match request.extensions.get(EXT_MAX_TURNS) {
        None => {}
        Some(v) => {
            let turns = v.as_u64().filter(|n| *n > 0).ok_or_else(|| invalid(EXT_MAX_TURNS, "must be a whole number above 0"))?;
            spec = spec.arg("--max-turns").arg(turns.to_string());
        }
    }
    spec = spec.args(config.extra_args.iter().cloned());
    if mode == Mode::Print {
        // `--` ends the options, so a prompt that starts with `-` stays the prompt.
        spec = spec.arg("--").arg(&request.prompt.text);
    }
    for (key, value) in config.env.iter().chain(request.env.iter()) {
        spec = spec.env(key, value);
    }
    spec.clear_env = !config.inherit_env;
    if let Some(dir) = request.working_dir.clone().or_else(|| config.working_dir.clone()) {
        spec = spec.cwd(dir);
    }
    Ok(Invocation { spec, mode, bypass })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn argv(request: &RunRequest) -> Vec<String> {
        let inv = invocation(&ClaudeCodeConfig::default(), request).unwrap();
        inv.spec.args.iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn control_mode_uses_the_two_way_channel_and_keeps_the_prompt_off_the_command_line() {
        let args = argv(&RunRequest::new("-rf secret prompt"));
        assert!(args.windows(2).any(|w| w == ["--input-format", "stream-json"]));
        assert!(args.windows(2).any(|w| w == ["--permission-prompt-tool", "stdio"]));
        assert!(!args.iter().any(|a| a.contains("secret prompt")));
    }

    #[test]
    fn print_mode_puts_the_prompt_after_the_end_of_options() {
        let args = argv(&RunRequest::new("-x hello").with_extension(EXT_MODE, json!("print")));
        assert_eq!(&args[args.len() - 2..], ["--", "-x hello"]);
        assert!(!args.iter().any(|a| a == "--input-format"));
    }

    #[test]
    fn sessions_models_and_extensions_map_to_their_flags() {
        let req = RunRequest::new("hi")
            .with_model("claude-sonnet-4-5")
            .with_session(SessionSelector::Fork("abc".into()))
            .with_extension(EXT_EXTRA_DIRS, json!(["/a", "/b"]))
            .with_extension(EXT_ALLOWED_TOOLS, json!(["Bash(git:*)", "Read"]))
            .with_extension(EXT_DISALLOWED_TOOLS, json!(["WebFetch"]))
            .with_extension(EXT_SYSTEM_PROMPT_APPEND, json!("be brief"))
            .with_extension(EXT_MAX_TURNS, json!(3));
        let args = argv(&req).join(" ");
        for want in [
            "--model claude-sonnet-4-5",
            "--resume abc --fork-session",
            "--add-dir /a --add-dir /b",
            "--allowedTools Bash(git:*),Read",
            "--disallowedTools WebFetch",
            "--append-system-prompt be brief",
            "--max-turns 3",
        ] {
            assert!(args.contains(want), "{want} missing from {args}");
        }
        assert!(argv(&RunRequest::new("hi").with_session(SessionSelector::ResumeLast)).contains(&"--continue".to_string()));
    }

    #[test]
    fn the_two_way_mode_passes_no_policy_flags_so_every_request_reaches_the_kit() {
        let rules = [(ToolCategory::FileWrite, PermissionRule::Approve), (ToolCategory::Shell, PermissionRule::Approve)];
        for policy in [PermissionPolicy::ApproveAll, PermissionPolicy::DenyAll, PermissionPolicy::ByCategory(rules.into_iter().collect())] {
            let inv = invocation(&ClaudeCodeConfig::default(), &RunRequest::new("hi").with_permissions(policy.clone())).unwrap();
            assert!(!inv.bypass, "{policy:?}");
            let args = argv(&RunRequest::new("hi").with_permissions(policy.clone())).join(" ");
            assert!(!args.contains("--permission-mode") && !args.contains("--allowedTools"), "{policy:?}: {args}");
        }
    }

    #[test]
    fn skipping_permission_prompts_is_its_own_option_mapped_to_bypass() {
        let req = RunRequest::new("hi").with_skip_permission_prompts(true);
        assert!(req.required_capabilities().contains(agent_api::capabilities::SKIP_PERMISSION_PROMPTS));
        let inv = invocation(&ClaudeCodeConfig::default(), &req).unwrap();
        assert!(inv.bypass);
        assert!(argv(&req).join(" ").contains("--permission-mode bypassPermissions"));
    }

    #[test]
    fn print_mode_turns_the_policy_into_pre_approved_tools() {
        let print = |policy| RunRequest::new("hi").with_extension(EXT_MODE, json!("print")).with_permissions(policy);
        let all = argv(&print(PermissionPolicy::ApproveAll)).join(" ");
        assert!(all.contains("--permission-mode acceptEdits"), "{all}");
        assert!(all.contains("--allowedTools Bash,Write,Edit,MultiEdit,NotebookEdit,WebFetch,WebSearch,Read,Glob,Grep"), "{all}");
        assert!(!all.contains("bypassPermissions"), "{all}");
        for policy in [PermissionPolicy::Ask, PermissionPolicy::DenyAll] {
            let args = argv(&print(policy.clone())).join(" ");
            assert!(!args.contains("--permission-mode") && !args.contains("--allowedTools"), "{policy:?}: {args}");
        }
        let shell_only = PermissionPolicy::ByCategory([(ToolCategory::Shell, PermissionRule::Approve)].into_iter().collect());
        let args = argv(&print(shell_only)).join(" ");
        assert!(args.contains("--allowedTools Bash") && !args.contains("--permission-mode"), "{args}");
    }

    #[test]
    fn malformed_extensions_fail_before_spawning() {
        for (key, value) in
            [(EXT_MODE, json!("tui")), (EXT_EXTRA_DIRS, json!("/a")), (EXT_MAX_TURNS, json!(0)), (EXT_PERMISSION_MODE, json!("yolo"))]
        {
            let err = invocation(&ClaudeCodeConfig::default(), &RunRequest::new("hi").with_extension(key, value)).unwrap_err();
            assert!(matches!(err, AgentError::InvalidExtension { .. }), "{key}: {err:?}");
        }
    }
}
