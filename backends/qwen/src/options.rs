//! The `qwen` kind's typed per-run options (`backend.qwen.*`).

use agent_api::request::BackendOptions;
use serde::{Deserialize, Serialize};

/// Which of Qwen Code's machine interfaces a run uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum QwenInterface {
    /// `qwen --acp`: two-way ACP, permissions, file system, cancel (the default).
    #[default]
    Acp,
    /// `qwen -p --input-format stream-json --output-format stream-json`: two-way, the stream-json
    /// family's control protocol (permissions as `can_use_tool`, cancel as `interrupt`).
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
