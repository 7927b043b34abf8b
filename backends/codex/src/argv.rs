//! Building the command line of a run (argv only, never a shell string) and the JSON-RPC params
//! of the app-server's opening requests.

use std::path::Path;

use agent_api::kit::CommandSpec;
use agent_api::request::{AgentMode, PermissionRule, ToolCategory};
use agent_api::{PermissionPolicy, RunRequest, SessionSelector};
use serde_json::{json, Map, Value};

use crate::config::{toml_string, CodexConfig, Mode, RunOptions, Sandbox};

/// The flags every run gets when `quiet` is on: no plugin sync, no analytics (NOTES.md).
pub const QUIET_FLAGS: &[&str] = &["--disable", "plugins", "-c", "analytics.enabled=false"];

fn common_args(config: &CodexConfig, options: &RunOptions, request: &RunRequest) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    if config.quiet {
        args.extend(QUIET_FLAGS.iter().map(|s| s.to_string()));
    }
    for o in config
        .config_overrides
        .iter()
        .chain(&options.config_overrides)
    {
        args.push("-c".into());
        args.push(o.clone());
    }
    for o in crate::portable::config_overrides(&request.portable, options.mode) {
        args.push("-c".into());
        args.push(o);
    }
    let dirs = writable_roots(options, request);
    if !dirs.is_empty() {
        let roots: Vec<String> = dirs.iter().map(|d| toml_string(d)).collect();
        args.push("-c".into());
        args.push(format!(
            "sandbox_workspace_write.writable_roots=[{}]",
            roots.join(",")
        ));
    }
    args
}

/// The directories beside the working directory that a `workspace-write` sandbox lets commands
/// write: the request's extra directories and the backend's own.
fn writable_roots(options: &RunOptions, request: &RunRequest) -> Vec<String> {
    request
        .portable
        .add_dirs
        .iter()
        .map(|d| absolute(d))
        .chain(options.extra_dirs.iter().cloned())
        .collect()
}

fn base_spec(config: &CodexConfig, request: &RunRequest, args: Vec<String>) -> CommandSpec {
    let mut spec = CommandSpec::new(&config.binary).args(args);
    for (k, v) in &config.env {
        spec = spec.env(k.clone(), v.clone());
    }
    for (k, v) in crate::portable::secret_env(&request.portable) {
        spec = spec.env(k, v);
    }
    if let Some(dir) = &config.working_dir {
        spec = spec.cwd(dir.clone());
    }
    // Codex reads the prompt's images itself, by path (`-i`, `localImage`).
    for image in &request.prompt.images {
        spec = spec.local_file(absolute(image));
    }
    spec.for_request(request)
        .reads_env(READS_ENV)
        .state_vars(["CODEX_HOME"])
        .home_state([".codex"])
}

/// The variables Codex reads for its endpoint, credentials and behaviour: all a launcher other
/// than Local passes on from the caller's environment (`spec/launchers.md`).
const READS_ENV: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CODEX_API_KEY",
    "RUST_LOG",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
];

/// `codex app-server …` with stdin piped; everything per-thread goes in the JSON-RPC params.
pub fn app_server_spec(
    config: &CodexConfig,
    options: &RunOptions,
    request: &RunRequest,
) -> CommandSpec {
    let mut args = vec!["app-server".to_string()];
    args.extend(common_args(config, options, request));
    if config.request_user_input {
        args.extend([
            "--enable".to_string(),
            "default_mode_request_user_input".to_string(),
        ]);
    }
    base_spec(config, request, args).with_stdin()
}

/// `codex exec [resume|fork] --json …` with stdin at /dev/null (it blocks on an open stdin).
pub fn exec_spec(config: &CodexConfig, options: &RunOptions, request: &RunRequest) -> CommandSpec {
    let mut args = vec!["exec".to_string()];
    let mut positional = Vec::new();
    match &request.session {
        SessionSelector::New => {}
        SessionSelector::Resume(id) => {
            args.push("resume".into());
            positional.push(id.id.clone());
        }
        SessionSelector::ResumeLast => {
            args.push("resume".into());
            args.push("--last".into());
        }
        SessionSelector::Fork(id) => {
            args.push("fork".into());
            positional.push(id.id.clone());
        }
        _ => {}
    }
    args.extend(["--json", "--skip-git-repo-check"].map(String::from));
    args.extend(common_args(config, options, request));
    if let Some(model) = &request.model {
        args.extend(["-m".to_string(), model.clone()]);
    }
    if options.bypass {
        args.push("--dangerously-bypass-approvals-and-sandbox".into());
    } else {
        // `-c` rather than `-s`: `exec resume` and `exec fork` take no `-s`.
        args.extend([
            "-c".to_string(),
            format!("sandbox_mode={}", toml_string(options.sandbox.as_str())),
        ]);
        args.extend([
            "-c".to_string(),
            format!(
                "approval_policy={}",
                toml_string(options.approval_policy.as_str())
            ),
        ]);
    }
    // Exec mode cannot be asked (Codex declines what it would ask about), so a policy that
    // approves MCP tools becomes Codex's own pre-approval of the run's MCP servers, as the
    // approve-all policy becomes the sandbox.
    if request.permissions.rule(ToolCategory::Mcp) == PermissionRule::Approve {
        for name in request.portable.mcp_servers.keys() {
            args.extend([
                "-c".to_string(),
                format!("mcp_servers.{name}.default_tools_approval_mode=\"approve\""),
            ]);
        }
    }
    if let Some(effort) = &request.variant {
        args.extend([
            "-c".to_string(),
            format!("model_reasoning_effort={}", toml_string(effort)),
        ]);
    }
    if let Some(summary) = &config.reasoning_summary {
        args.extend([
            "-c".to_string(),
            format!("model_reasoning_summary={}", toml_string(summary)),
        ]);
    }
    for image in &request.prompt.images {
        args.extend(["-i".to_string(), absolute(image)]);
    }
    // `--` so a session id starting with `-` is not read as a flag; `-`: the prompt comes on
    // stdin (the protocol writes it), never in argv, where `ps` shows it and the OS limits it.
    args.push("--".into());
    args.extend(positional);
    args.push("-".into());
    base_spec(config, request, args).with_stdin()
}

/// The spec for the run's mode.
pub fn command_spec(
    config: &CodexConfig,
    options: &RunOptions,
    request: &RunRequest,
) -> CommandSpec {
    match options.mode {
        Mode::AppServer => app_server_spec(config, options, request),
        Mode::Exec => exec_spec(config, options, request),
    }
}

/// The `input` of a `turn/start` for `prompt`: its text and its images.
pub fn turn_input(prompt: &agent_api::Prompt) -> Value {
    let mut input = vec![json!({"type": "text", "text": prompt.text, "text_elements": []})];
    for image in &prompt.images {
        input.push(json!({"type": "localImage", "path": absolute(image)}));
    }
    Value::Array(input)
}

/// What the app-server converter sends after `initialize`: the thread request and the turn.
#[derive(Debug, Clone, PartialEq)]
pub struct StartPlan {
    /// Which thread to start, resume or fork.
    pub session: SessionSelector,
    /// Params shared by `thread/start`, `thread/resume` and `thread/fork` (cwd, model, policy).
    pub thread_params: Map<String, Value>,
    /// The working directory, for `thread/list` when resuming the last thread.
    pub cwd: Option<String>,
    /// `turn/start` params other than `threadId`.
    pub turn_params: Map<String, Value>,
    /// What a warm session's switch to each mode adds to its next `turn/start` (Codex keeps it
    /// for the turns after): the mode's `approvalPolicy` and `sandboxPolicy`.
    pub modes: Vec<(AgentMode, Map<String, Value>)>,
    /// The run's permission policy, which the SDK applies in the mode switched to.
    pub policy: PermissionPolicy,
}

impl StartPlan {
    /// The plan for a request.
    pub fn new(config: &CodexConfig, options: &RunOptions, request: &RunRequest) -> Self {
        let cwd = request
            .working_dir
            .as_ref()
            .or(config.working_dir.as_ref())
            .map(|p| absolute(p));
        let mut thread = Map::new();
        if let Some(cwd) = &cwd {
            thread.insert("cwd".into(), json!(cwd));
        }
        if let Some(model) = &request.model {
            thread.insert("model".into(), json!(model));
        }
        if let Some(text) = &request.portable.system_prompt {
            thread.insert("baseInstructions".into(), json!(text));
        }
        // Over the protocol, not `-c` on argv: no OS limit, and `ps` does not show it.
        if let Some(text) = &request.portable.append_system_prompt {
            thread.insert("developerInstructions".into(), json!(text));
        }
        thread.insert("approvalPolicy".into(), json!(options.approval_policy));
        thread.insert("sandbox".into(), json!(options.sandbox));
        let mut turn = Map::new();
        turn.insert("input".into(), turn_input(&request.prompt));
        if let Some(effort) = &request.variant {
            turn.insert("effort".into(), json!(effort));
        }
        if let Some(summary) = &config.reasoning_summary {
            turn.insert("summary".into(), json!(summary));
        }
        if let Some(schema) = &request.portable.output_schema {
            turn.insert("outputSchema".into(), schema.clone());
        }
        let roots = writable_roots(options, request);
        let modes = options
            .by_mode
            .iter()
            .map(|(mode, sandbox, approval)| {
                let sandbox = match sandbox {
                    Sandbox::ReadOnly => json!({"type": "readOnly"}),
                    Sandbox::WorkspaceWrite => {
                        json!({"type": "workspaceWrite", "writableRoots": roots})
                    }
                    _ => json!({"type": "dangerFullAccess"}),
                };
                let params = Map::from_iter([
                    ("approvalPolicy".to_string(), json!(approval)),
                    ("sandboxPolicy".to_string(), sandbox),
                ]);
                (mode.clone(), params)
            })
            .collect();
        Self {
            session: request.session.clone(),
            thread_params: thread,
            cwd,
            turn_params: turn,
            modes,
            policy: options.policy.clone(),
        }
    }
}

fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CodexOptions;

    fn args(spec: &CommandSpec) -> Vec<String> {
        spec.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn exec_resume_puts_the_subcommand_first_and_the_prompt_after_a_separator() {
        let config = CodexConfig::default();
        let request = RunRequest::new("-second turn")
            .with_session(SessionSelector::Resume("t1".into()))
            .with_model("gpt-5.5")
            .with_options(&CodexOptions::default().mode(Mode::Exec));
        let options = RunOptions::resolve(&request, &config).unwrap();
        let a = args(&exec_spec(&config, &options, &request));
        assert_eq!(
            &a[..4],
            ["exec", "resume", "--json", "--skip-git-repo-check"]
        );
        assert_eq!(&a[a.len() - 3..], ["--", "t1", "-"]);
        assert!(
            !a.iter().any(|x| x.contains("second turn")),
            "the prompt is not in argv"
        );
        assert!(a.windows(2).any(|w| w == ["--disable", "plugins"]));
        assert!(a.windows(2).any(|w| w == ["-c", "analytics.enabled=false"]));
        assert!(a.windows(2).any(|w| w == ["-m", "gpt-5.5"]));
        assert!(a
            .windows(2)
            .any(|w| w == ["-c", "sandbox_mode=\"read-only\""]));
        assert!(
            exec_spec(&config, &options, &request).stdin,
            "exec reads its prompt from stdin"
        );
    }

    #[test]
    fn app_server_gets_stdin_and_extra_dirs_as_writable_roots() {
        let config = CodexConfig::default().config_overrides(["model=\"gpt-5.5\""]);
        let request =
            RunRequest::new("x").with_options(&CodexOptions::default().extra_dirs(["/a b"]));
        let options = RunOptions::resolve(&request, &config).unwrap();
        let spec = app_server_spec(&config, &options, &request);
        let a = args(&spec);
        assert_eq!(a[0], "app-server");
        assert!(spec.stdin);
        assert!(a.windows(2).any(|w| w == ["-c", "model=\"gpt-5.5\""]));
        assert!(a
            .iter()
            .any(|x| x == "sandbox_workspace_write.writable_roots=[\"/a b\"]"));
    }

    #[test]
    fn app_server_instructions_travel_in_the_thread_params_not_on_argv() {
        let config = CodexConfig::default();
        let portable = agent_api::PortableOptions::default()
            .system_prompt("BASE-7")
            .append_system_prompt("DEV-9");
        let request = RunRequest::new("x").with_portable(portable);
        let options = RunOptions::resolve(&request, &config).unwrap();
        let argv = args(&app_server_spec(&config, &options, &request)).join(" ");
        assert!(
            !argv.contains("BASE-7") && !argv.contains("DEV-9"),
            "{argv}"
        );
        let plan = StartPlan::new(&config, &options, &request);
        assert_eq!(
            (
                plan.thread_params["baseInstructions"].as_str(),
                plan.thread_params["developerInstructions"].as_str()
            ),
            (Some("BASE-7"), Some("DEV-9"))
        );
        let exec = request.with_options(&CodexOptions::default().mode(Mode::Exec));
        let options = RunOptions::resolve(&exec, &config).unwrap();
        assert!(
            args(&exec_spec(&config, &options, &exec))
                .iter()
                .any(|a| a == "developer_instructions=\"DEV-9\""),
            "exec has only -c"
        );
    }

    #[test]
    fn the_start_plan_carries_policy_model_variant_and_summary() {
        let config = CodexConfig::default();
        let request = RunRequest::new("hi").with_model("m").with_variant("high");
        let options = RunOptions::resolve(&request, &config).unwrap();
        let plan = StartPlan::new(&config, &options, &request);
        assert_eq!(plan.thread_params["approvalPolicy"], "untrusted");
        assert_eq!(plan.thread_params["model"], "m");
        assert_eq!(plan.turn_params["effort"], "high");
        assert_eq!(plan.turn_params["summary"], "auto");
        assert_eq!(plan.turn_params["input"][0]["text"], "hi");
    }

    #[test]
    fn each_mode_a_session_switches_to_carries_its_approval_and_sandbox_policies() {
        let config = CodexConfig::default();
        let request = RunRequest::new("x")
            .with_options(&crate::CodexOptions::default().extra_dirs(["/extra"]));
        let plan = StartPlan::new(
            &config,
            &RunOptions::resolve(&request, &config).unwrap(),
            &request,
        );
        let of = |mode: &str| {
            plan.modes
                .iter()
                .find(|(m, _)| m.as_str() == mode)
                .map(|(_, p)| Value::Object(p.clone()))
                .unwrap()
        };
        assert_eq!(
            of("plan"),
            json!({"approvalPolicy": "never", "sandboxPolicy": {"type": "readOnly"}})
        );
        assert_eq!(
            of("default"),
            json!({"approvalPolicy": "untrusted", "sandboxPolicy": {"type": "workspaceWrite", "writableRoots": ["/extra"]}})
        );
        assert_eq!(
            of("full-access"),
            json!({"approvalPolicy": "never", "sandboxPolicy": {"type": "dangerFullAccess"}})
        );
        assert_eq!(
            plan.modes.len(),
            1 + crate::config::MODES.len(),
            "the default and every mode"
        );
    }
}
