//! The `gemini` kind's typed per-run options (`backend.gemini.*`).

use agent_api::request::BackendOptions;
use serde::{Deserialize, Serialize};

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
