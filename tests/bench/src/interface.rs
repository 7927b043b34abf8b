//! The machine interfaces of the CLIs that the bench can run and record.

use std::fmt;
use std::str::FromStr;

use crate::{BenchError, Cli};

/// One machine interface of one CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Interface {
    /// `claude -p PROMPT --output-format stream-json --verbose --allowedTools Bash,Write,Edit` (one-way).
    ClaudePrint,
    /// `claude -p --input-format stream-json --output-format stream-json --verbose --permission-prompt-tool
    /// stdio` (two-way control protocol on stdin/stdout).
    ClaudeControl,
    /// `codex exec --json --skip-git-repo-check -s workspace-write -c approval_policy="never" PROMPT` (one-way).
    CodexExec,
    /// `codex app-server` (two-way JSON-RPC on stdio).
    CodexAppServer,
    /// `opencode run --format json -m mock/mock-model PROMPT` (one-way).
    OpenCodeRun,
    /// `gemini -p PROMPT --output-format stream-json --yolo` (one-way).
    GeminiHeadless,
    /// `qwen -p PROMPT --output-format stream-json --yolo` (one-way).
    QwenPrint,
    /// `qwen -p --input-format stream-json --output-format stream-json` (two-way; the same control protocol
    /// as Claude Code's).
    QwenControl,
    /// `qwen --acp` (two-way Agent Client Protocol on stdio).
    QwenAcp,
}

impl Interface {
    /// Every interface.
    pub const ALL: [Interface; 9] = [
        Interface::ClaudePrint,
        Interface::ClaudeControl,
        Interface::CodexExec,
        Interface::CodexAppServer,
        Interface::OpenCodeRun,
        Interface::GeminiHeadless,
        Interface::QwenPrint,
        Interface::QwenControl,
        Interface::QwenAcp,
    ];

    /// The CLI it belongs to.
    pub fn cli(self) -> Cli {
        match self {
            Interface::ClaudePrint | Interface::ClaudeControl => Cli::ClaudeCode,
            Interface::CodexExec | Interface::CodexAppServer => Cli::Codex,
            Interface::OpenCodeRun => Cli::OpenCode,
            Interface::GeminiHeadless => Cli::Gemini,
            Interface::QwenPrint | Interface::QwenControl | Interface::QwenAcp => Cli::Qwen,
        }
    }

    /// The fixture folder name (`print`, `control`, `exec`, `app_server`, `run`, `headless`, `acp`).
    pub fn name(self) -> &'static str {
        match self {
            Interface::ClaudePrint | Interface::QwenPrint => "print",
            Interface::ClaudeControl | Interface::QwenControl => "control",
            Interface::CodexExec => "exec",
            Interface::CodexAppServer => "app_server",
            Interface::OpenCodeRun => "run",
            Interface::GeminiHeadless => "headless",
            Interface::QwenAcp => "acp",
        }
    }

    /// True for one-way interfaces (prompt in argv, events on stdout).
    pub fn is_one_way(self) -> bool {
        !matches!(
            self,
            Interface::ClaudeControl
                | Interface::CodexAppServer
                | Interface::QwenControl
                | Interface::QwenAcp
        )
    }

    /// Looks up `name` among `cli`'s interfaces.
    pub fn find(cli: Cli, name: &str) -> Result<Interface, BenchError> {
        Interface::ALL
            .into_iter()
            .find(|i| i.cli() == cli && i.name() == name)
            .ok_or_else(|| BenchError::Unknown {
                kind: "interface",
                name: format!("{cli}/{name}"),
                known: Interface::ALL
                    .map(|i| format!("{}/{}", i.cli(), i.name()))
                    .join(", "),
            })
    }

    /// The arguments (after the sandbox's `base_args`) of a one-way run with `prompt`; for two-way
    /// interfaces, the arguments that start the long-running process (the prompt goes over stdin).
    pub fn args(self, prompt: &str) -> Vec<String> {
        let v: &[&str] = match self {
            Interface::ClaudePrint => &[
                "-p",
                prompt,
                "--output-format",
                "stream-json",
                "--verbose",
                "--allowedTools",
                "Bash,Write,Edit",
            ],
            Interface::ClaudeControl => &[
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-prompt-tool",
                "stdio",
            ],
            Interface::CodexExec => &[
                "exec",
                "--json",
                "--skip-git-repo-check",
                "-s",
                "workspace-write",
                "-c",
                "approval_policy=\"never\"",
                prompt,
            ],
            Interface::CodexAppServer => &["app-server"],
            Interface::QwenAcp => &["--acp"],
            Interface::QwenControl => &[
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
            ],
            Interface::OpenCodeRun => &["run", "--format", "json", "-m", "mock/mock-model", prompt],
            Interface::GeminiHeadless | Interface::QwenPrint => {
                &["-p", prompt, "--output-format", "stream-json", "--yolo"]
            }
        };
        v.iter().map(|s| s.to_string()).collect()
    }
}

impl fmt::Display for Interface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.cli(), self.name())
    }
}

impl FromStr for Interface {
    type Err = BenchError;

    /// Parses `<cli>/<interface>`, for example `codex/app_server`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (cli, name) = s.split_once('/').unwrap_or((s, ""));
        Interface::find(cli.parse()?, name)
    }
}

/// The prompt the bench sends for a scenario (the mock model ignores it; it only shows up in transcripts).
pub fn prompt_for(scenario: &str) -> &'static str {
    match scenario.split('.').next().unwrap_or(scenario) {
        "shell" | "slow_shell" | "big_output" => "run the command",
        "write_edit" => "create and edit created.txt",
        "question" => "ask me which color and size",
        "reasoning" => "think, then say hi",
        _ => "say hi",
    }
}
