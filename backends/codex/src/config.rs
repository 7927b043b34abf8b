//! Backend configuration ([`CodexConfig`]) and the per-run options resolved from a request:
//! mode, sandbox, approval policy, extra writable directories and the explicit full bypass.

use std::collections::BTreeMap;
use std::path::PathBuf;

use agent_api::request::Launcher;
use agent_api::request::{AgentMode, ModeInfo, PermissionRule, VariantSet};
use agent_api::{AgentError, PermissionPolicy, RunRequest};
use serde::{Deserialize, Serialize};

/// Extension key: `"app_server"` (default) or `"exec"`.
pub const EXT_MODE: &str = "backend.codex.mode";
/// Extension key: `"read-only"`, `"workspace-write"` or `"danger-full-access"`.
pub const EXT_SANDBOX: &str = "backend.codex.sandbox";
/// Extension key: `"untrusted"`, `"on-request"` or `"never"`.
pub const EXT_APPROVAL_POLICY: &str = "backend.codex.approval_policy";
/// Extension key: array of directories Codex may also write to.
pub const EXT_EXTRA_DIRS: &str = "backend.codex.extra_dirs";
/// Extension key: `true` runs without approvals and without a sandbox.
pub const EXT_DANGEROUSLY_BYPASS: &str = "backend.codex.dangerously_bypass";
/// Extension key: array of extra `key=value` config overrides (each passed as `-c`).
pub const EXT_CONFIG: &str = "backend.codex.config";
/// Extension key: `false` turns Codex's own command sandbox off (`--sandbox danger-full-access`,
/// approvals unchanged), for a run whose launcher is the sandbox: a container with the default
/// seccomp profile (or a Kubernetes pod) lets no process make the user namespaces Codex's
/// bubblewrap needs, so every shell command would fail. Refused for a run on this machine
/// (`Launcher::Local`), where nothing else confines the agent. Unset, it is off through a
/// container launcher for a run whose sandbox would be `workspace-write` (the container is the
/// sandbox), on everywhere else; `true` keeps it on in a container too (one that allows user
/// namespaces, such as `seccomp=unconfined`).
pub const EXT_INNER_SANDBOX: &str = "backend.codex.inner_sandbox";

/// Which Codex interface a run uses (`backend.codex.mode`: `"app_server"` or `"exec"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `codex app-server`: JSON-RPC, streaming deltas, approvals and questions, interrupt.
    #[default]
    AppServer,
    /// `codex exec --json`: one way, whole items only, no approvals.
    Exec,
}

/// Codex's sandbox mode, spelled as Codex spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Sandbox {
    /// `read-only`: commands may read, not write.
    ReadOnly,
    /// `workspace-write`: commands may write in the working directory and the extra directories.
    WorkspaceWrite,
    /// `danger-full-access`: no sandbox.
    DangerFullAccess,
}

impl Sandbox {
    /// Codex's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::DangerFullAccess => "danger-full-access",
        }
    }
}

/// Codex's approval policy, spelled as Codex spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ApprovalPolicy {
    /// `untrusted`: Codex asks before anything it does not trust.
    Untrusted,
    /// `on-request`: the model decides when to ask.
    OnRequest,
    /// `never`: Codex never asks.
    Never,
}

impl ApprovalPolicy {
    /// Codex's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Untrusted => "untrusted",
            Self::OnRequest => "on-request",
            Self::Never => "never",
        }
    }
}

/// The backend's own options (`backend.codex.*`), attached with [`RunRequest::with_options`];
/// each field is the extension key of the same name.
///
/// ```
/// use agent_api::RunRequest;
/// use agent_api_codex::{CodexOptions, Mode, Sandbox};
/// let request = RunRequest::new("hi").with_options(&CodexOptions::default().mode(Mode::Exec).sandbox(Sandbox::ReadOnly));
/// assert_eq!(request.extensions["backend.codex.mode"], "exec");
/// assert_eq!(request.extensions["backend.codex.sandbox"], "read-only");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct CodexOptions {
    /// The interface ([`EXT_MODE`]); the config's `default_mode` when absent.
    pub mode: Option<Mode>,
    /// The sandbox ([`EXT_SANDBOX`]); overrides the one the permission policy maps to.
    pub sandbox: Option<Sandbox>,
    /// The approval policy ([`EXT_APPROVAL_POLICY`]); overrides the one the mode maps to.
    pub approval_policy: Option<ApprovalPolicy>,
    /// Directories Codex may also write to ([`EXT_EXTRA_DIRS`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_dirs: Vec<String>,
    /// Run without approvals and without a sandbox ([`EXT_DANGEROUSLY_BYPASS`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dangerously_bypass: bool,
    /// Extra `key=value` config overrides of this run, each passed as `-c` ([`EXT_CONFIG`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<String>,
    /// `Some(false)`: Codex's own sandbox off where the launcher is the sandbox; `Some(true)`: on,
    /// even in a container; unset: off in a container for a workspace-write run
    /// ([`EXT_INNER_SANDBOX`]).
    pub inner_sandbox: Option<bool>,
}

impl CodexOptions {
    /// Sets the interface.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Sets the sandbox.
    pub fn sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// Sets the approval policy.
    pub fn approval_policy(mut self, policy: ApprovalPolicy) -> Self {
        self.approval_policy = Some(policy);
        self
    }

    /// Adds directories Codex may also write to.
    pub fn extra_dirs<I: IntoIterator<Item = S>, S: Into<String>>(mut self, dirs: I) -> Self {
        self.extra_dirs.extend(dirs.into_iter().map(Into::into));
        self
    }

    /// Runs without approvals and without a sandbox (only when asked for explicitly).
    pub fn dangerously_bypass(mut self, bypass: bool) -> Self {
        self.dangerously_bypass = bypass;
        self
    }

    /// Turns Codex's own command sandbox off (`false`) where the run's launcher is the sandbox
    /// (see [`EXT_INNER_SANDBOX`]).
    pub fn inner_sandbox(mut self, on: bool) -> Self {
        self.inner_sandbox = Some(on);
        self
    }

    /// Adds `key=value` config overrides (anything else is refused when the run starts).
    pub fn config<I: IntoIterator<Item = S>, S: Into<String>>(mut self, overrides: I) -> Self {
        self.config.extend(overrides.into_iter().map(Into::into));
        self
    }
}

impl agent_api::request::BackendOptions for CodexOptions {
    const KIND: &'static str = "codex";
}

/// How the backend starts Codex. Its `Debug` shows the names of `env`, never the values.
#[derive(Clone)]
#[non_exhaustive]
pub struct CodexConfig {
    /// The `codex` executable (a path, or a name looked up on `PATH`).
    pub binary: PathBuf,
    /// Environment added to every run (for example `CODEX_HOME`, `OPENAI_API_KEY`).
    pub env: BTreeMap<String, String>,
    /// Extra `key=value` config overrides, each passed as `-c key=value`.
    pub config_overrides: Vec<String>,
    /// Pass `--disable plugins -c analytics.enabled=false` (no outside lookups). Default on.
    pub quiet: bool,
    /// The mode when the request does not choose one.
    pub default_mode: Mode,
    /// Reasoning summary asked for (`auto`, `concise`, `detailed`, `none`); `None` leaves Codex's default.
    pub reasoning_summary: Option<String>,
    /// Working directory when the request has none.
    pub working_dir: Option<PathBuf>,
    /// App-server mode: enable Codex's `default_mode_request_user_input` feature, without which
    /// 0.169.0 offers the model no `request_user_input` tool outside plan mode. Default on.
    pub request_user_input: bool,
}

impl Default for CodexConfig {
    fn default() -> Self {
        Self {
            binary: PathBuf::from("codex"),
            env: BTreeMap::new(),
            config_overrides: Vec::new(),
            quiet: true,
            default_mode: Mode::AppServer,
            reasoning_summary: Some("auto".into()),
            working_dir: None,
            request_user_input: true,
        }
    }
}

impl std::fmt::Debug for CodexConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodexConfig")
            .field("binary", &self.binary)
            .field("env", &agent_api::kit::secrets::EnvNames(&self.env))
            .field(
                "config_overrides",
                &agent_api::kit::secrets::ArgsShown(&self.config_overrides),
            )
            .field("quiet", &self.quiet)
            .field("default_mode", &self.default_mode)
            .field("reasoning_summary", &self.reasoning_summary)
            .field("working_dir", &self.working_dir)
            .field("request_user_input", &self.request_user_input)
            .finish()
    }
}

impl CodexConfig {
    /// The defaults with this binary.
    pub fn with_binary(binary: impl Into<PathBuf>) -> Self {
        Self {
            binary: binary.into(),
            ..Self::default()
        }
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Adds `-c` overrides.
    pub fn config_overrides<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        overrides: I,
    ) -> Self {
        self.config_overrides
            .extend(overrides.into_iter().map(Into::into));
        self
    }

    /// Sets the default mode.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.default_mode = mode;
        self
    }

    /// Sets the default working directory.
    pub fn working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }
}

/// What one run asks of Codex, resolved from the request and its extensions.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    /// Interface.
    pub mode: Mode,
    /// Sandbox mode.
    pub sandbox: Sandbox,
    /// Approval policy.
    pub approval_policy: ApprovalPolicy,
    /// Run without approvals and sandbox (only when asked for explicitly).
    pub bypass: bool,
    /// Extra writable directories.
    pub extra_dirs: Vec<String>,
    /// Extra `-c` overrides of this run.
    pub config_overrides: Vec<String>,
    /// How the backend answers approval requests itself (the rest go to the caller).
    pub policy: PermissionPolicy,
    /// The sandbox and approval policy of each mode a warm session can switch to (the default
    /// first), resolved as the run's own were: the extensions still override the presets.
    pub by_mode: Vec<(AgentMode, Sandbox, ApprovalPolicy)>,
}

impl RunOptions {
    /// Resolves the options of `request`.
    ///
    /// App-server mode always runs approval policy `untrusted`, so every approval Codex asks for
    /// reaches `agent_api::kit::hitl`, which applies the run's permission policy (approve-all
    /// approves each request, deny-all denies each, with both events in the transcript); the
    /// sandbox is `workspace-write`, or `read-only` under deny-all.
    ///
    /// Exec mode has no approval channel, so nothing can be approved one by one: it runs `never`
    /// (Codex does not ask) with the policy as a sandbox: `workspace-write` when every category
    /// is approved (approve-all, or rules that all approve), else `read-only`.
    ///
    /// `RunRequest::skip_permission_prompts` sets `never` in either mode (the sandbox stays). The
    /// `sandbox` and `approval_policy` extensions override the mapping.
    pub fn resolve(request: &RunRequest, config: &CodexConfig) -> Result<Self, AgentError> {
        let options: CodexOptions = request.options()?;
        if let Some(bad) = options.config.iter().find(|o| !o.contains('=')) {
            return Err(AgentError::InvalidExtension {
                key: EXT_CONFIG.into(),
                reason: format!(
                    "{:?} is not key=value",
                    agent_api::kit::bounds::utf8_prefix(bad, 64)
                ),
            });
        }
        let mode = options.mode.unwrap_or(config.default_mode);
        let policy_in =
            |agent_mode: Option<&AgentMode>| policy_for(request, &options, mode, agent_mode);
        let (sandbox, approval) = policy_in(request.mode.as_ref())?;
        // What a warm session switches to: each mode resolved as the session's own was.
        let by_mode = std::iter::once(AgentMode::Default)
            .chain(MODES.iter().map(|m| AgentMode::parse(m.id)))
            .map(|agent_mode| {
                policy_in(Some(&agent_mode))
                    .map(|(sandbox, approval)| (agent_mode, sandbox, approval))
            })
            .collect::<Result<_, _>>()?;
        let bypass = options.dangerously_bypass;
        Ok(Self {
            mode,
            sandbox,
            approval_policy: approval,
            bypass,
            extra_dirs: options.extra_dirs,
            config_overrides: options.config,
            policy: request.permissions.clone(),
            by_mode,
        })
    }
}

/// The sandbox and approval policy of a run of `mode` (the interface) in `agent_mode`: the
/// permission policy's mapping, the mode's preset, then the extensions, which override both.
fn policy_for(
    request: &RunRequest,
    options: &CodexOptions,
    mode: Mode,
    agent_mode: Option<&AgentMode>,
) -> Result<(Sandbox, ApprovalPolicy), AgentError> {
    let (mut approval, mut sandbox) = match (&request.permissions, mode) {
        (PermissionPolicy::DenyAll, Mode::AppServer) => {
            (ApprovalPolicy::Untrusted, Sandbox::ReadOnly)
        }
        (_, Mode::AppServer) => (ApprovalPolicy::Untrusted, Sandbox::WorkspaceWrite),
        (PermissionPolicy::ApproveAll, Mode::Exec) => {
            (ApprovalPolicy::Never, Sandbox::WorkspaceWrite)
        }
        (_, Mode::Exec) => (ApprovalPolicy::Never, Sandbox::ReadOnly),
    };
    if let PermissionPolicy::ByCategory(rules) = &request.permissions {
        if mode == Mode::Exec
            && !rules.is_empty()
            && rules.values().all(|r| *r == PermissionRule::Approve)
        {
            sandbox = Sandbox::WorkspaceWrite;
        }
    }
    if request.skip_permission_prompts {
        approval = ApprovalPolicy::Never;
    }
    if let Some((preset_sandbox, preset_approval)) = agent_mode.and_then(mode_preset) {
        sandbox = preset_sandbox;
        approval = preset_approval;
    }
    sandbox = options.sandbox.unwrap_or(sandbox);
    let launcher = request.launcher.as_ref().unwrap_or(&Launcher::Local);
    match options.inner_sandbox {
        Some(false) if matches!(launcher, Launcher::Local) => {
            return Err(AgentError::InvalidRequest {
                    reason: format!("{EXT_INNER_SANDBOX}=false needs a launcher that is the sandbox (a container, bwrap, ssh or a prefix); on this machine Codex's own sandbox stays on"),
                });
        }
        Some(false) => sandbox = Sandbox::DangerFullAccess,
        // In a container the container is the sandbox, and Codex's own cannot run under the
        // engine's default seccomp profile (no user namespaces): every command would fail at once.
        // A workspace-write run writes through the container instead; a read-only one (plan mode,
        // a deny-all policy) keeps Codex's sandbox, whose refusal there is the safe failure.
        None if matches!(launcher, Launcher::Container(_))
            && sandbox == Sandbox::WorkspaceWrite =>
        {
            sandbox = Sandbox::DangerFullAccess
        }
        _ => {}
    }
    approval = options.approval_policy.unwrap_or(approval);
    if options.dangerously_bypass {
        approval = ApprovalPolicy::Never;
        sandbox = Sandbox::DangerFullAccess;
    }
    Ok((sandbox, approval))
}

/// The sandbox and approval policy an agent mode sets (`None`: the default, the policy's mapping).
///
/// Plan mode is Codex's read-only preset with nothing asked: the sandbox refuses every write,
/// and no approval can let one through. The named modes are Codex's own approval presets
/// (`/approvals`): `read-only`, `auto`, `full-access`.
fn mode_preset(mode: &AgentMode) -> Option<(Sandbox, ApprovalPolicy)> {
    match mode.as_str() {
        "plan" => Some((Sandbox::ReadOnly, ApprovalPolicy::Never)),
        "read-only" => Some((Sandbox::ReadOnly, ApprovalPolicy::OnRequest)),
        "auto" => Some((Sandbox::WorkspaceWrite, ApprovalPolicy::OnRequest)),
        "full-access" => Some((Sandbox::DangerFullAccess, ApprovalPolicy::Never)),
        _ => None,
    }
}

/// Codex's modes: plan, and its approval presets.
pub const MODES: &[ModeInfo] = &[
    ModeInfo::new(
        "plan",
        "sandbox read-only, approval policy never",
        "Plans and changes nothing: every write is refused, nothing is asked.",
    ),
    ModeInfo::new(
        "read-only",
        "sandbox read-only, approval policy on-request",
        "Codex's Read Only preset: reads; asks before writing or using the network.",
    ),
    ModeInfo::new(
        "auto",
        "sandbox workspace-write, approval policy on-request",
        "Codex's Auto preset: works in the workspace; asks before leaving it.",
    ),
    ModeInfo::new(
        "full-access",
        "sandbox danger-full-access, approval policy never",
        "Codex's Full Access preset: no sandbox, nothing asked.",
    ),
];

/// The reasoning efforts each model offers, as `codex debug models` lists them (0.169);
/// `model_reasoning_effort` (exec `-c`) or `turn/start` `effort` (app-server).
pub const VARIANTS: &[VariantSet] = &[
    VariantSet::for_models(&["gpt-5.5"], &["low", "medium", "high", "xhigh"], EFFORT),
    VariantSet::for_models(
        &["gpt-6-luna", "gpt-5.6-luna", "codex-auto-review"],
        &["low", "medium", "high", "xhigh", "max"],
        EFFORT,
    ),
    VariantSet::for_models(
        &[
            "gpt-6-astra",
            "gpt-6.1-sol",
            "gpt-6.1-terra",
            "gpt-6-sol",
            "gpt-5.6-sol",
            "gpt-5.6-terra",
            "gpt-daybreak-blue-latest",
            "gpt-daybreak-red-latest",
        ],
        &["low", "medium", "high", "xhigh", "max", "ultra"],
        EFFORT,
    ),
    // Any other model (or Codex's default): the efforts every listed model offers.
    VariantSet::all_models(&["low", "medium", "high", "xhigh"], EFFORT),
];

const EFFORT: &str = "turn/start effort (app-server); -c model_reasoning_effort (exec)";

/// A TOML string literal (JSON string escaping is valid TOML basic-string escaping).
pub fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn modes_set_the_sandbox_and_approval_presets() {
        let config = CodexConfig::default();
        let resolve = |mode: &str, policy: PermissionPolicy| {
            let request = RunRequest::new("x")
                .with_mode(agent_api::request::AgentMode::parse(mode))
                .with_permissions(policy);
            let o = RunOptions::resolve(&request, &config).unwrap();
            (o.sandbox.as_str(), o.approval_policy.as_str())
        };
        // Plan mode writes nothing even when the policy would approve every write.
        assert_eq!(
            resolve("plan", PermissionPolicy::ApproveAll),
            ("read-only", "never")
        );
        assert_eq!(
            resolve("read-only", PermissionPolicy::Ask),
            ("read-only", "on-request")
        );
        assert_eq!(
            resolve("auto", PermissionPolicy::Ask),
            ("workspace-write", "on-request")
        );
        assert_eq!(
            resolve("full-access", PermissionPolicy::Ask),
            ("danger-full-access", "never")
        );
        assert_eq!(
            resolve("default", PermissionPolicy::Ask),
            ("workspace-write", "untrusted")
        );
        for mode in MODES {
            assert!(
                mode_preset(&mode.mode()).is_some(),
                "{} is listed but maps to nothing",
                mode.id
            );
        }
    }

    #[test]
    fn unknown_modes_and_variants_are_refused_before_spawn() {
        use agent_api::AgentBackend;
        let backend = crate::CodexBackend::new(CodexConfig::default());
        let err = backend
            .validate(&RunRequest::new("x").with_mode(agent_api::request::AgentMode::parse("yolo")))
            .unwrap_err();
        assert!(
            matches!(&err, AgentError::UnknownMode { valid, .. } if valid.iter().any(|v| v == "plan")),
            "{err}"
        );
        // gpt-5.5 has no `max`; a model that does takes it.
        let err = backend
            .validate(
                &RunRequest::new("x")
                    .with_model("gpt-5.5")
                    .with_variant("max"),
            )
            .unwrap_err();
        assert!(
            matches!(&err, AgentError::UnknownVariant { valid, .. } if valid == &["low", "medium", "high", "xhigh"]),
            "{err}"
        );
        backend
            .validate(
                &RunRequest::new("x")
                    .with_model("gpt-6-sol")
                    .with_variant("max"),
            )
            .unwrap();
        backend
            .validate(&RunRequest::new("x").with_variant("high"))
            .unwrap();
    }

    #[test]
    fn policies_map_to_codex_approval_and_sandbox() {
        let config = CodexConfig::default();
        let ask = RunOptions::resolve(&RunRequest::new("x"), &config).unwrap();
        assert_eq!(
            (ask.mode, ask.approval_policy.as_str(), ask.sandbox.as_str()),
            (Mode::AppServer, "untrusted", "workspace-write")
        );
        // The kit approves or denies each request: Codex must ask, whatever the policy.
        let all = RunOptions::resolve(
            &RunRequest::new("x").with_permissions(PermissionPolicy::ApproveAll),
            &config,
        )
        .unwrap();
        assert_eq!(
            (all.approval_policy.as_str(), all.sandbox.as_str()),
            ("untrusted", "workspace-write")
        );
        let none = RunOptions::resolve(
            &RunRequest::new("x").with_permissions(PermissionPolicy::DenyAll),
            &config,
        )
        .unwrap();
        assert_eq!(
            (none.approval_policy.as_str(), none.sandbox.as_str()),
            ("untrusted", "read-only")
        );
        let skip = RunOptions::resolve(
            &RunRequest::new("x").with_skip_permission_prompts(true),
            &config,
        )
        .unwrap();
        assert_eq!(
            (skip.approval_policy.as_str(), skip.sandbox.as_str()),
            ("never", "workspace-write")
        );
        let exec_all = RunRequest::new("x")
            .with_options(&CodexOptions::default().mode(Mode::Exec))
            .with_permissions(PermissionPolicy::ApproveAll);
        let exec_all = RunOptions::resolve(&exec_all, &config).unwrap();
        assert_eq!(
            (exec_all.approval_policy.as_str(), exec_all.sandbox.as_str()),
            ("never", "workspace-write")
        );
        let exec = RunOptions::resolve(
            &RunRequest::new("x").with_options(&CodexOptions::default().mode(Mode::Exec)),
            &config,
        )
        .unwrap();
        assert_eq!(
            (
                exec.mode,
                exec.approval_policy.as_str(),
                exec.sandbox.as_str()
            ),
            (Mode::Exec, "never", "read-only")
        );
        let bypass = CodexOptions::default().dangerously_bypass(true);
        let bypass =
            RunOptions::resolve(&RunRequest::new("x").with_options(&bypass), &config).unwrap();
        assert!(bypass.bypass);
        assert_eq!(bypass.sandbox, Sandbox::DangerFullAccess);
    }

    #[test]
    fn malformed_extensions_are_refused() {
        let config = CodexConfig::default();
        for (key, value) in [
            (EXT_MODE, json!("tui")),
            (EXT_SANDBOX, json!(1)),
            (EXT_EXTRA_DIRS, json!("a")),
            (EXT_DANGEROUSLY_BYPASS, json!("yes")),
            (EXT_CONFIG, json!(["nokey"])),
        ] {
            let err =
                RunOptions::resolve(&RunRequest::new("x").with_extension(key, value), &config)
                    .unwrap_err();
            assert!(
                matches!(&err, AgentError::InvalidExtension { key: named, .. } if named == key),
                "{key}: {err}"
            );
        }
        let unknown =
            RunRequest::new("x").with_extension("backend.codex.sandbox_mode", json!("read-only"));
        let err = RunOptions::resolve(&unknown, &config).unwrap_err();
        assert!(matches!(err, AgentError::UnknownExtension { .. }), "{err}");
    }

    #[test]
    fn the_typed_options_round_trip_through_the_request_under_the_public_keys() {
        let options = CodexOptions::default()
            .mode(Mode::Exec)
            .sandbox(Sandbox::WorkspaceWrite)
            .approval_policy(ApprovalPolicy::OnRequest)
            .extra_dirs(["/a"])
            .dangerously_bypass(true)
            .config(["k=v"]);
        let request = RunRequest::new("x").with_options(&options);
        assert_eq!(request.options::<CodexOptions>().unwrap(), options);
        assert_eq!(request.extensions[EXT_APPROVAL_POLICY], json!("on-request"));
        assert_eq!(
            agent_api::kit::options::extension_keys::<CodexOptions>(),
            [
                EXT_MODE,
                EXT_SANDBOX,
                EXT_APPROVAL_POLICY,
                EXT_EXTRA_DIRS,
                EXT_DANGEROUSLY_BYPASS,
                EXT_CONFIG,
                EXT_INNER_SANDBOX
            ]
        );
        let wrong = RunRequest::new("x").with_extension(EXT_APPROVAL_POLICY, json!("always"));
        let err = wrong.options::<CodexOptions>().unwrap_err();
        assert!(
            matches!(&err, AgentError::InvalidExtension { key, .. } if key == EXT_APPROVAL_POLICY),
            "{err}"
        );
        let config = CodexConfig::default();
        let applied = RunOptions::resolve(
            &RunRequest::new("x").with_options(&CodexOptions::default().sandbox(Sandbox::ReadOnly)),
            &config,
        );
        assert_eq!(applied.unwrap().sandbox, Sandbox::ReadOnly);
    }

    /// Codex's own sandbox goes off only where the launcher is the sandbox; approvals stay.
    #[test]
    fn the_inner_sandbox_goes_off_only_behind_a_launcher() {
        let config = CodexConfig::default();
        let off = RunRequest::new("x").with_options(&CodexOptions::default().inner_sandbox(false));
        let err = RunOptions::resolve(&off, &config).unwrap_err();
        assert!(
            matches!(&err, AgentError::InvalidRequest { reason } if reason.contains(EXT_INNER_SANDBOX)),
            "{err}"
        );
        let container =
            agent_api::request::Container::exec(agent_api::request::Engine::Docker, "box");
        let resolved =
            RunOptions::resolve(&off.with_launcher(Launcher::Container(container)), &config)
                .unwrap();
        assert_eq!(
            (resolved.sandbox, resolved.approval_policy),
            (Sandbox::DangerFullAccess, ApprovalPolicy::Untrusted)
        );
        assert!(!resolved.bypass);
    }

    /// Through a container the container is the sandbox: unset, Codex's own goes off for a
    /// workspace-write run (it cannot run under the default seccomp profile), stays for a
    /// read-only one, and `true` keeps it; on this machine and elsewhere nothing changes.
    #[test]
    fn in_a_container_codex_runs_without_its_own_sandbox_unless_asked_to_keep_it() {
        let config = CodexConfig::default();
        let container = Launcher::Container(agent_api::request::Container::exec(
            agent_api::request::Engine::Docker,
            "box",
        ));
        let resolve = |request: RunRequest| RunOptions::resolve(&request, &config).unwrap();
        let write = RunRequest::new("x").with_permissions(PermissionPolicy::Ask);
        assert_eq!(
            resolve(write.clone().with_launcher(container.clone())).sandbox,
            Sandbox::DangerFullAccess
        );
        let kept = write
            .clone()
            .with_launcher(container.clone())
            .with_options(&CodexOptions::default().inner_sandbox(true));
        assert_eq!(resolve(kept).sandbox, Sandbox::WorkspaceWrite);
        let read_only = RunRequest::new("x")
            .with_permissions(PermissionPolicy::DenyAll)
            .with_launcher(container.clone());
        assert_eq!(resolve(read_only).sandbox, Sandbox::ReadOnly);
        let plan = write
            .clone()
            .with_launcher(container)
            .with_mode(AgentMode::parse("plan"));
        assert_eq!(resolve(plan).sandbox, Sandbox::ReadOnly);
        assert_eq!(resolve(write.clone()).sandbox, Sandbox::WorkspaceWrite);
        let bwrap = write.with_launcher(Launcher::Sandbox(Default::default()));
        assert_eq!(resolve(bwrap).sandbox, Sandbox::WorkspaceWrite);
    }

    /// `--option KEY=VALUE` text becomes the value each field takes: the interface and sandbox
    /// by their names, a boolean and a list as JSON.
    #[test]
    fn option_text_is_typed_by_the_options_struct() {
        use agent_api::AgentBackend;
        let backend = crate::CodexBackend::new(CodexConfig::default());
        assert_eq!(
            backend.info().option_value(EXT_MODE, "exec").unwrap(),
            json!("exec")
        );
        assert_eq!(
            backend
                .info()
                .option_value(EXT_SANDBOX, "workspace-write")
                .unwrap(),
            json!("workspace-write")
        );
        assert_eq!(
            backend
                .info()
                .option_value(EXT_DANGEROUSLY_BYPASS, "true")
                .unwrap(),
            json!(true)
        );
        assert_eq!(
            backend
                .info()
                .option_value(EXT_EXTRA_DIRS, r#"["/a","/b"]"#)
                .unwrap(),
            json!(["/a", "/b"])
        );
        let err = backend.info().option_value(EXT_MODE, "tui").unwrap_err();
        assert!(
            matches!(&err, AgentError::InvalidExtension { key, .. } if key == EXT_MODE),
            "{err}"
        );
        let err = backend
            .info()
            .option_value("backend.codex.interface", "exec")
            .unwrap_err();
        assert!(
            matches!(&err, AgentError::UnknownExtension { known, .. } if known.len() == 7),
            "{err}"
        );
        assert!(err.to_string().contains(EXT_SANDBOX), "{err}");
    }
}
