//! Backend configuration ([`CodexConfig`]) and the per-run options resolved from a request:
//! mode, sandbox, approval policy, extra writable directories and the explicit full bypass.

use std::collections::BTreeMap;
use std::path::PathBuf;

use agent_api::{AgentError, PermissionPolicy, PermissionRule, RunRequest};
use serde_json::Value;

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

/// Every extension key the backend understands.
pub const EXTENSION_KEYS: &[&str] = &[EXT_MODE, EXT_SANDBOX, EXT_APPROVAL_POLICY, EXT_EXTRA_DIRS, EXT_DANGEROUSLY_BYPASS, EXT_CONFIG];

/// Which Codex interface a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// `codex app-server`: JSON-RPC, streaming deltas, approvals and questions, interrupt.
    #[default]
    AppServer,
    /// `codex exec --json`: one way, whole items only, no approvals.
    Exec,
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
            .field("env", &agent_api::secrets::EnvNames(&self.env))
            .field("config_overrides", &self.config_overrides)
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
        Self { binary: binary.into(), ..Self::default() }
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Adds `-c` overrides.
    pub fn config_overrides<I: IntoIterator<Item = S>, S: Into<String>>(mut self, overrides: I) -> Self {
        self.config_overrides.extend(overrides.into_iter().map(Into::into));
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
    /// Sandbox mode (`read-only`, `workspace-write`, `danger-full-access`).
    pub sandbox: String,
    /// Approval policy (`untrusted`, `on-request`, `never`).
    pub approval_policy: String,
    /// Run without approvals and sandbox (only when asked for explicitly).
    pub bypass: bool,
    /// Extra writable directories.
    pub extra_dirs: Vec<String>,
    /// Extra `-c` overrides of this run.
    pub config_overrides: Vec<String>,
    /// How the backend answers approval requests itself (the rest go to the caller).
    pub policy: PermissionPolicy,
}

fn string_ext(request: &RunRequest, key: &str, allowed: &[&str]) -> Result<Option<String>, AgentError> {
    match request.extensions.get(key) {
        None => Ok(None),
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(Some(s.clone())),
        Some(_) => Err(AgentError::InvalidExtension { key: key.into(), reason: format!("must be one of {}", allowed.join(", ")) }),
    }
}

fn strings_ext(request: &RunRequest, key: &str) -> Result<Vec<String>, AgentError> {
    match request.extensions.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| AgentError::InvalidExtension { key: key.into(), reason: "must be an array of strings".into() })
            })
            .collect(),
        Some(_) => Err(AgentError::InvalidExtension { key: key.into(), reason: "must be an array of strings".into() }),
    }
}

impl RunOptions {
    /// Resolves the options of `request`. The permission policy maps to Codex as: ask (and
    /// per-category rules) → `untrusted` + `workspace-write`, approvals come to the backend;
    /// approve-all → `never` + `workspace-write`; deny-all → `never` + `read-only`. Exec mode has
    /// no approval channel, so anything but approve-all runs `never` + `read-only`. The
    /// `sandbox` and `approval_policy` extensions override the mapping.
    pub fn resolve(request: &RunRequest, config: &CodexConfig) -> Result<Self, AgentError> {
        let mode = match string_ext(request, EXT_MODE, &["app_server", "exec"])?.as_deref() {
            Some("exec") => Mode::Exec,
            Some(_) => Mode::AppServer,
            None => config.default_mode,
        };
        let (mut approval, mut sandbox) = match (&request.permissions, mode) {
            (PermissionPolicy::ApproveAll, _) => ("never", "workspace-write"),
            (PermissionPolicy::DenyAll, _) | (_, Mode::Exec) => ("never", "read-only"),
            _ => ("untrusted", "workspace-write"),
        };
        if let PermissionPolicy::ByCategory(rules) = &request.permissions {
            if mode == Mode::Exec && !rules.is_empty() && rules.values().all(|r| *r == PermissionRule::Approve) {
                sandbox = "workspace-write";
            }
        }
        let sandbox_ext = string_ext(request, EXT_SANDBOX, &["read-only", "workspace-write", "danger-full-access"])?;
        let approval_ext = string_ext(request, EXT_APPROVAL_POLICY, &["untrusted", "on-request", "never"])?;
        if let Some(s) = &sandbox_ext {
            sandbox = s;
        }
        if let Some(a) = &approval_ext {
            approval = a;
        }
        let bypass = match request.extensions.get(EXT_DANGEROUSLY_BYPASS) {
            None | Some(Value::Bool(false)) => false,
            Some(Value::Bool(true)) => true,
            Some(_) => return Err(AgentError::InvalidExtension { key: EXT_DANGEROUSLY_BYPASS.into(), reason: "must be a boolean".into() }),
        };
        if bypass {
            approval = "never";
            sandbox = "danger-full-access";
        }
        let config_overrides = strings_ext(request, EXT_CONFIG)?;
        if let Some(bad) = config_overrides.iter().find(|o| !o.contains('=')) {
            return Err(AgentError::InvalidExtension {
                key: EXT_CONFIG.into(),
                reason: format!("{:?} is not key=value", agent_api::bounds::utf8_prefix(bad, 64)),
            });
        }
        Ok(Self {
            mode,
            sandbox: sandbox.to_string(),
            approval_policy: approval.to_string(),
            bypass,
            extra_dirs: strings_ext(request, EXT_EXTRA_DIRS)?,
            config_overrides,
            policy: request.permissions.clone(),
        })
    }
}

/// A TOML string literal (JSON string escaping is valid TOML basic-string escaping).
pub fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn policies_map_to_codex_approval_and_sandbox() {
        let config = CodexConfig::default();
        let ask = RunOptions::resolve(&RunRequest::new("x"), &config).unwrap();
        assert_eq!((ask.mode, ask.approval_policy.as_str(), ask.sandbox.as_str()), (Mode::AppServer, "untrusted", "workspace-write"));
        let all = RunOptions::resolve(&RunRequest::new("x").with_permissions(PermissionPolicy::ApproveAll), &config).unwrap();
        assert_eq!((all.approval_policy.as_str(), all.sandbox.as_str()), ("never", "workspace-write"));
        let exec = RunOptions::resolve(&RunRequest::new("x").with_extension(EXT_MODE, json!("exec")), &config).unwrap();
        assert_eq!((exec.mode, exec.approval_policy.as_str(), exec.sandbox.as_str()), (Mode::Exec, "never", "read-only"));
        let bypass = RunOptions::resolve(&RunRequest::new("x").with_extension(EXT_DANGEROUSLY_BYPASS, json!(true)), &config).unwrap();
        assert!(bypass.bypass);
        assert_eq!(bypass.sandbox, "danger-full-access");
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
            let err = RunOptions::resolve(&RunRequest::new("x").with_extension(key, value), &config).unwrap_err();
            assert!(matches!(err, AgentError::InvalidExtension { .. }), "{key}: {err}");
        }
    }
}
