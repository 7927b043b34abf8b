//! The coding-agent CLIs the bench knows.

use std::fmt;
use std::str::FromStr;

use crate::BenchError;

/// One of the real coding-agent CLIs pinned in `tests/bench/clis/package.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Cli {
    /// Anthropic's Claude Code (`claude`, npm `@anthropic-ai/claude-code`).
    ClaudeCode,
    /// OpenAI's Codex CLI (`codex`, npm `@openai/codex`).
    Codex,
    /// OpenCode (`opencode`, npm `opencode-ai`).
    OpenCode,
    /// Google's Gemini CLI (`gemini`, npm `@google/gemini-cli`).
    Gemini,
    /// Qwen Code (`qwen`, npm `@qwen-code/qwen-code`).
    Qwen,
}

impl Cli {
    /// Every CLI the bench knows, in a fixed order.
    pub const ALL: [Cli; 5] = [
        Cli::ClaudeCode,
        Cli::Codex,
        Cli::OpenCode,
        Cli::Gemini,
        Cli::Qwen,
    ];

    /// The bench's name for the CLI, as used in fixture folders (`claude_code`, `codex`, `opencode`,
    /// `gemini`, `qwen`).
    pub fn name(self) -> &'static str {
        match self {
            Cli::ClaudeCode => "claude_code",
            Cli::Codex => "codex",
            Cli::OpenCode => "opencode",
            Cli::Gemini => "gemini",
            Cli::Qwen => "qwen",
        }
    }

    /// The executable's file name in `node_modules/.bin`.
    pub fn executable(self) -> &'static str {
        match self {
            Cli::ClaudeCode => "claude",
            Cli::Codex => "codex",
            Cli::OpenCode => "opencode",
            Cli::Gemini => "gemini",
            Cli::Qwen => "qwen",
        }
    }

    /// The npm package that ships the CLI.
    pub fn npm_package(self) -> &'static str {
        match self {
            Cli::ClaudeCode => "@anthropic-ai/claude-code",
            Cli::Codex => "@openai/codex",
            Cli::OpenCode => "opencode-ai",
            Cli::Gemini => "@google/gemini-cli",
            Cli::Qwen => "@qwen-code/qwen-code",
        }
    }
}

impl fmt::Display for Cli {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Cli {
    type Err = BenchError;

    /// Accepts the bench name (`claude_code`) or the executable name (`claude`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Cli::ALL
            .into_iter()
            .find(|c| c.name() == s || c.executable() == s)
            .ok_or_else(|| BenchError::Unknown {
                kind: "cli",
                name: s.to_string(),
                known: Cli::ALL.map(Cli::name).join(", "),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_parses_from_bench_and_executable_names() {
        for cli in Cli::ALL {
            assert_eq!(cli.name().parse::<Cli>().unwrap(), cli);
            assert_eq!(cli.executable().parse::<Cli>().unwrap(), cli);
        }
        let err = "cursor".parse::<Cli>().unwrap_err().to_string();
        assert!(err.contains("claude_code"), "{err}");
    }
}
