//! The backend's configuration and its typed per-run options (`backend.gemini.*`, `backend.qwen.*`, `backend.acp.*`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agent_api::request::BackendOptions;
use serde::{Deserialize, Serialize};

/// How the backend starts its agent; per-run choices are in [`GeminiOptions`] / [`QwenOptions`] /
/// [`AcpOptions`].
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct AcpConfig {
    /// The agent program (`gemini`, `qwen`: found on `PATH` when unset; `acp`: used when the run gives no
    /// [`AcpOptions::command`]).
    pub binary: Option<PathBuf>,
    /// Arguments put before the backend's own.
    pub args: Vec<String>,
    /// Environment variables for the agent.
    pub env: BTreeMap<String, String>,
    /// Working directory when the request sets none.
    pub working_dir: Option<PathBuf>,
}

/// Shows variable names and masked arguments, never the values of keys.
impl std::fmt::Debug for AcpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpConfig")
            .field("binary", &self.binary)
            .field("args", &agent_api::kit::secrets::ArgsShown(&self.args))
            .field("env", &agent_api::kit::secrets::EnvNames(&self.env))
            .field("working_dir", &self.working_dir)
            .finish()
    }
}

impl AcpConfig {
    /// A configuration running `binary`.
    pub fn with_binary(binary: impl Into<PathBuf>) -> Self {
        Self { binary: Some(binary.into()), ..Self::default() }
    }

    /// Adds arguments before the backend's own.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets the default working directory.
    pub fn working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dir = Some(dir.into());
        self
    }
}

/// Which of Gemini CLI's machine interfaces a run uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GeminiInterface {
    /// `gemini --acp`: two-way, permissions, file system, cancel (the default).
    #[default]
    Acp,
    /// `gemini -p PROMPT --output-format stream-json`: one-way, whole messages, no permissions.
    Headless,
}

/// Gemini's own approval modes, passed through to the headless interface only when asked: the
/// agent then does not ask (it has no channel to ask on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HeadlessApproval {
    /// `--approval-mode auto_edit`: file edits run without asking; shell is not offered.
    AutoEdit,
    /// `--approval-mode yolo`: every tool runs without asking.
    Yolo,
}

impl HeadlessApproval {
    /// The CLI's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            HeadlessApproval::AutoEdit => "auto_edit",
            HeadlessApproval::Yolo => "yolo",
        }
    }
}

/// Typed options of the `gemini` backend (`backend.gemini.*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct GeminiOptions {
    /// The interface (default ACP).
    pub interface: Option<GeminiInterface>,
    /// Headless only: the approval mode to pass through (none: Gemini's default, no shell tool).
    pub approval_mode: Option<HeadlessApproval>,
    /// ACP only: serve `fs/*` confined to the working directory (default true).
    pub fs: Option<bool>,
}

impl BackendOptions for GeminiOptions {
    const KIND: &'static str = "gemini";
}

impl GeminiOptions {
    /// Selects the interface.
    pub fn interface(mut self, interface: GeminiInterface) -> Self {
        self.interface = Some(interface);
        self
    }

    /// Sets the headless approval mode.
    pub fn approval_mode(mut self, mode: HeadlessApproval) -> Self {
        self.approval_mode = Some(mode);
        self
    }

    /// Serves (or not) the file system to the agent.
    pub fn fs(mut self, serve: bool) -> Self {
        self.fs = Some(serve);
        self
    }
}

/// Which of Qwen Code's machine interfaces a run uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum QwenInterface {
    /// `qwen --acp`: two-way ACP, permissions, file system, cancel (the default).
    #[default]
    Acp,
    /// `qwen -p --input-format stream-json --output-format stream-json`: two-way, Claude Code's
    /// control protocol (permissions as `can_use_tool`, cancel as `interrupt`).
    StreamJson,
    /// `qwen -p PROMPT --output-format stream-json`: one-way; the agent cannot ask, so tools that
    /// need a permission run only under `RunRequest::skip_permission_prompts` (`--yolo`).
    Print,
}

/// Typed options of the `qwen` backend (`backend.qwen.*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct QwenOptions {
    /// The interface (default ACP).
    pub interface: Option<QwenInterface>,
    /// ACP only: serve `fs/*` confined to the working directory (default true).
    pub fs: Option<bool>,
}

impl BackendOptions for QwenOptions {
    const KIND: &'static str = "qwen";
}

impl QwenOptions {
    /// Selects the interface.
    pub fn interface(mut self, interface: QwenInterface) -> Self {
        self.interface = Some(interface);
        self
    }

    /// Serves (or not) the file system to the agent.
    pub fn fs(mut self, serve: bool) -> Self {
        self.fs = Some(serve);
        self
    }
}

/// Typed options of the generic `acp` backend (`backend.acp.*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct AcpOptions {
    /// The agent's command line, program first, one element per argument (never a shell string).
    pub command: Vec<String>,
    /// Serve `fs/*` confined to the working directory (default true).
    pub fs: Option<bool>,
}

impl BackendOptions for AcpOptions {
    const KIND: &'static str = "acp";
}

impl AcpOptions {
    /// Sets the agent's command line.
    pub fn command<I: IntoIterator<Item = S>, S: Into<String>>(mut self, argv: I) -> Self {
        self.command = argv.into_iter().map(Into::into).collect();
        self
    }

    /// Serves (or not) the file system to the agent.
    pub fn fs(mut self, serve: bool) -> Self {
        self.fs = Some(serve);
        self
    }
}

/// `path` made absolute against the current directory.
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(path)).unwrap_or_else(|_| path.to_path_buf())
    }
}
