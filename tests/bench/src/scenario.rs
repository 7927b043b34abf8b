//! Scripted scenarios: small declarative scripts that say what the mock model does.
//!
//! A scenario is chosen per request by the base-URL prefix `/s/<scenario>[.<tag>]/...` (the tag is free
//! text that only shows up in logs). The server keeps no state between requests: a [`Script::Steps`]
//! scenario plays step *i* when *i* tool results of the current turn (the tool results after the last
//! user message that carries text) are already in the request's conversation. Tool names and argument
//! shapes come from the tools the request offers (see [`crate::server::tools`]), so one scenario drives
//! every CLI.
//!
//! Adding a scenario is one more entry in [`SCENARIOS`].

use std::time::Duration;

/// One scripted scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// The name used in the base URL (`/s/<name>/...`).
    pub name: &'static str,
    /// What the mock model does, in one sentence.
    pub description: &'static str,
    /// The script.
    pub script: Script,
}

/// What a scenario answers.
#[derive(Debug, Clone, Copy)]
pub enum Script {
    /// A turn made of steps; step *i* is played once *i* tool results of this turn are in the request.
    /// Requests past the last step get the last step again.
    Steps(&'static [Step]),
    /// Steps counted over the whole conversation: step *i* is played once *i* tool results are in
    /// the request, whatever user messages came between them (a message that steers a running turn
    /// does not start the script again). Requests past the last step get the last step again.
    WholeConversation(&'static [Step]),
    /// Every request fails with this HTTP error.
    Fail(Failure),
}

/// An HTTP failure the mock model can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// HTTP 401, invalid API key.
    Unauthorized,
    /// HTTP 500, internal server error.
    ServerError,
    /// Overloaded: HTTP 529 `overloaded_error` for Anthropic, 429 for Chat Completions, 503 for OpenAI
    /// Responses and Gemini.
    Overloaded,
}

/// One model reply within a turn.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// Reasoning / thinking text streamed before the answer.
    pub thinking: Option<&'static str>,
    /// The visible text.
    pub text: Text,
    /// A tool call made after the text.
    pub action: Option<Action>,
    /// Pause before every text delta, in milliseconds.
    pub pace_ms: u64,
    /// The stream breaks after the first text deltas (an SSE error event where the API has one, then the
    /// connection is cut). Non-streaming requests get the whole reply.
    pub breaks: bool,
}

/// The visible text of a step.
#[derive(Debug, Clone, Copy)]
pub enum Text {
    /// No text.
    None,
    /// This text, streamed word by word.
    Fixed(&'static str),
    /// `word0 word1 ...` with this many words, one delta each.
    Words(usize),
    /// This template, where `{output}` is replaced by the last tool result of the turn (shortened to 200
    /// characters) and `{status}` by `finished` or `failed`.
    AfterTool(&'static str),
    /// `echo: user_turns=N messages=M last=<last user text>`, describing the conversation received.
    Echo,
}

/// A tool call, described independently of any CLI's tool names.
#[derive(Debug, Clone, Copy)]
pub enum Action {
    /// Run this shell command with the CLI's shell tool.
    Shell(&'static str),
    /// Create a file (path relative to the working directory) with the CLI's write tool.
    WriteFile {
        /// File name relative to the working directory.
        path: &'static str,
        /// Full content.
        content: &'static str,
    },
    /// Replace text in a file with the CLI's edit tool.
    EditFile {
        /// File name relative to the working directory.
        path: &'static str,
        /// Text to replace.
        old: &'static str,
        /// Replacement.
        new: &'static str,
    },
    /// Ask the user through the CLI's own question tool.
    Ask(&'static [Question]),
    /// Give this JSON as the structured answer: with the CLI's structured-output tool when the request
    /// offers one (Claude Code `StructuredOutput`, Qwen `structured_output`), else as the answer text.
    Structured(&'static str),
    /// Call the offered tool whose name ends with this suffix (a caller-defined MCP tool: each CLI
    /// prefixes MCP tools its own way, `mcp__caller__NAME`, `caller__NAME`, `NAME`) with this JSON input.
    CallTool {
        /// The end of the tool's name.
        suffix: &'static str,
        /// Its input, a JSON object.
        input: &'static str,
    },
}

/// One multiple-choice question for [`Action::Ask`].
#[derive(Debug, Clone, Copy)]
pub struct Question {
    /// Stable identifier (snake_case).
    pub id: &'static str,
    /// Short header.
    pub header: &'static str,
    /// The question.
    pub question: &'static str,
    /// Option labels.
    pub options: &'static [&'static str],
}

impl Step {
    /// A step that only says `text`.
    pub const fn say(text: &'static str) -> Step {
        Step {
            thinking: None,
            text: Text::Fixed(text),
            action: None,
            pace_ms: 0,
            breaks: false,
        }
    }

    /// A step with this text and no action.
    pub const fn text(text: Text) -> Step {
        Step {
            thinking: None,
            text,
            action: None,
            pace_ms: 0,
            breaks: false,
        }
    }

    /// A step that says `preamble` (may be empty) and then calls a tool.
    pub const fn act(preamble: &'static str, action: Action) -> Step {
        let text = if preamble.is_empty() {
            Text::None
        } else {
            Text::Fixed(preamble)
        };
        Step {
            thinking: None,
            text,
            action: Some(action),
            pace_ms: 0,
            breaks: false,
        }
    }

    /// The same step with thinking first.
    pub const fn thinking(self, thinking: &'static str) -> Step {
        Step {
            thinking: Some(thinking),
            ..self
        }
    }

    /// The same step with a pause before every text delta.
    pub const fn paced(self, pace_ms: u64) -> Step {
        Step { pace_ms, ..self }
    }

    /// The same step with a stream that breaks mid-way.
    pub const fn broken(self) -> Step {
        Step {
            breaks: true,
            ..self
        }
    }

    /// Pause before each text delta.
    pub fn pace(&self) -> Duration {
        Duration::from_millis(self.pace_ms)
    }
}

/// The shell command of the `shell` scenario.
pub const SHELL_COMMAND: &str = "echo hi > out.txt && cat out.txt";
/// The final text after a tool call.
const AFTER_TOOL: &str = "Tool {status}. Output was: {output}";

const QUESTIONS: &[Question] = &[
    Question {
        id: "color",
        header: "Color",
        question: "Which color should the file use?",
        options: &["Red", "Blue"],
    },
    Question {
        id: "size",
        header: "Size",
        question: "How large should it be?",
        options: &["Small", "Large"],
    },
];

/// Every scenario the server knows. The name is the first path segment after `/s/`.
pub const SCENARIOS: &[Scenario] = &[
    Scenario { name: "text", description: "Replies \"Hello from mock\".", script: Script::Steps(&[Step::say("Hello from mock")]) },
    Scenario {
        name: "long_text",
        description: "Streams 200 words (`word0 ... word199`), one delta each.",
        script: Script::Steps(&[Step::text(Text::Words(200))]),
    },
    Scenario {
        name: "reasoning",
        description: "Thinks (\"The user said hello. I should greet them back.\"), then replies \"Hello after thinking\".",
        script: Script::Steps(&[Step::say("Hello after thinking").thinking("The user said hello. I should greet them back.")]),
    },
    Scenario {
        name: "shell",
        description: "Says \"I'll run a command.\" and calls the shell tool with `echo hi > out.txt && cat out.txt`; \
                      after the result it replies \"Tool finished. Output was: <output>\".",
        script: Script::Steps(&[Step::act("I'll run a command.", Action::Shell(SHELL_COMMAND)), Step::text(Text::AfterTool(AFTER_TOOL))]),
    },
    Scenario {
        name: "write_edit",
        description: "Writes created.txt (\"created by mock\"), edits it (created -> edited), then replies \
                      \"Edit finished. Output was: <output>\".",
        script: Script::Steps(&[
            Step::act("", Action::WriteFile { path: "created.txt", content: "created by mock\n" }),
            Step::act("Now I will edit it.", Action::EditFile { path: "created.txt", old: "created by mock", new: "edited by mock" }),
            Step::text(Text::AfterTool("Edit {status}. Output was: {output}")),
        ]),
    },
    Scenario {
        name: "question",
        description: "Asks two multiple-choice questions with the CLI's own question tool (Claude \
                      AskUserQuestion, Codex request_user_input, ...), then replies \"You answered: <answer>\".",
        script: Script::Steps(&[Step::act("", Action::Ask(QUESTIONS)), Step::text(Text::AfterTool("You answered: {output}"))]),
    },
    Scenario {
        name: "slow_text",
        description: "Streams 60 words 0.5 s apart (for interrupt and cancel tests).",
        script: Script::Steps(&[Step::text(Text::Words(60)).paced(500)]),
    },
    Scenario {
        name: "slow_shell",
        description: "Calls the shell tool with `sleep 30`; after the result it replies \"Tool finished. ...\".",
        script: Script::Steps(&[Step::act("I'll wait.", Action::Shell("sleep 30")), Step::text(Text::AfterTool(AFTER_TOOL))]),
    },
    Scenario {
        name: "steer",
        description: "Calls the shell tool with `sleep 4`; after the result it replies \"echo: user_turns=N messages=M \
                      last=<last user text>\": a message that steered the turn mid-way is the last user text. Steps \
                      count the tool results of the whole conversation, so that message does not start it again.",
        script: Script::WholeConversation(&[Step::act("I'll wait.", Action::Shell("sleep 4")), Step::text(Text::Echo)]),
    },
    Scenario {
        name: "ask_echo",
        description: "Calls the shell tool with `echo hi > out.txt && cat out.txt` (a write: an agent asks before it \
                      runs it); after the result it replies \"echo: user_turns=N messages=M last=<last user text>\". \
                      Steps count the tool results of the whole conversation: every later turn only echoes, so a \
                      session resumed with its history echoes at once.",
        script: Script::WholeConversation(&[Step::act("I'll write a file.", Action::Shell(SHELL_COMMAND)), Step::text(Text::Echo)]),
    },
    Scenario {
        name: "big_output",
        description: "Calls the shell tool with a command that prints 10 MB (`head -c 10000000 /dev/zero | tr '\\0' a`), \
                      then replies with the start of the output.",
        script: Script::Steps(&[
            Step::act("I'll print a lot.", Action::Shell("head -c 10000000 /dev/zero | tr '\\0' a")),
            Step::text(Text::AfterTool(AFTER_TOOL)),
        ]),
    },
    Scenario {
        name: "echo",
        description: "Replies \"echo: user_turns=N messages=M last=<last user text>\" describing the history it got \
                      (for resume and multi-turn tests).",
        script: Script::Steps(&[Step::text(Text::Echo)]),
    },
    Scenario {
        name: "json_answer",
        description: "Answers {\"city\":\"Lyon\"} as structured output (the structured-output tool when offered, \
                      else the answer text), then \"Done.\".",
        script: Script::Steps(&[Step::act("", Action::Structured(r#"{"city":"Lyon"}"#)), Step::text(Text::Fixed("Done."))]),
    },
    Scenario {
        name: "json_wrong",
        description: "Like json_answer, but {\"city\":3}: an answer that does not fit a schema asking for a string.",
        script: Script::Steps(&[Step::act("", Action::Structured(r#"{"city":3}"#)), Step::text(Text::Fixed("Done."))]),
    },
    Scenario {
        name: "caller_tool",
        description: "Calls the offered tool whose name ends with `agent_api_probe` (a caller-defined MCP tool) with \
                      {\"city\":\"Paris\"}, then replies \"Tool <status>. The tool said: <output>\".",
        script: Script::Steps(&[
            Step::act("", Action::CallTool { suffix: "agent_api_probe", input: r#"{"city":"Paris"}"# }),
            Step::text(Text::AfterTool("Tool {status}. The tool said: {output}")),
        ]),
    },
    Scenario {
        name: "exit_plan",
        description: "Calls the offered tool whose name ends with `ExitPlanMode` (Claude Code's plan-mode exit) with \
                      {\"plan\":\"1. Write plan.txt\"}, then replies \"Plan <status>: <output>\".",
        script: Script::Steps(&[
            Step::act("", Action::CallTool { suffix: "ExitPlanMode", input: r#"{"plan":"1. Write plan.txt"}"# }),
            Step::text(Text::AfterTool("Plan {status}: {output}")),
        ]),
    },
    Scenario {
        name: "exit_plan_file",
        description: "Calls the offered tool whose name ends with `exit_plan_mode` (Gemini CLI's plan-mode exit) with \
                      {\"plan_filename\":\"plan.md\"}, then replies \"Plan <status>: <output>\".",
        script: Script::Steps(&[
            Step::act("", Action::CallTool { suffix: "exit_plan_mode", input: r#"{"plan_filename":"plan.md"}"# }),
            Step::text(Text::AfterTool("Plan {status}: {output}")),
        ]),
    },
    Scenario {
        name: "exit_plan_text",
        description: "Calls the offered tool whose name ends with `exit_plan_mode` (Qwen Code's plan-mode exit) with \
                      {\"plan\":\"1. Write plan.txt\"}, then replies \"Plan <status>: <output>\".",
        script: Script::Steps(&[
            Step::act("", Action::CallTool { suffix: "exit_plan_mode", input: r#"{"plan":"1. Write plan.txt"}"# }),
            Step::text(Text::AfterTool("Plan {status}: {output}")),
        ]),
    },
    Scenario {
        name: "error401",
        description: "HTTP 401 (invalid API key) for every request.",
        script: Script::Fail(Failure::Unauthorized),
    },
    Scenario {
        name: "error500",
        description: "HTTP 500 for every request (Chat Completions adds retry-after-ms: 10).",
        script: Script::Fail(Failure::ServerError),
    },
    Scenario {
        name: "overloaded",
        description: "Overloaded for every request: HTTP 529 for Anthropic, 429 (retry-after 1 s) for Chat \
                      Completions, 503 for OpenAI Responses and Gemini.",
        script: Script::Fail(Failure::Overloaded),
    },
    Scenario {
        name: "broken_stream",
        description: "Streams \"Hello from\" and then breaks: an SSE error event where the API has one, then the \
                      connection is cut. A non-streaming request (Claude Code's fallback) gets \"Hello from mock\".",
        script: Script::Steps(&[Step::say("Hello from mock").broken()]),
    },
];

/// Looks a scenario up by name. `name` may carry a `.tag` suffix, which is ignored.
pub fn find(name: &str) -> Option<&'static Scenario> {
    let base = name.split('.').next().unwrap_or(name);
    SCENARIOS.iter().find(|s| s.name == base)
}

/// The names of every scenario, comma-separated (for error messages).
pub fn names() -> String {
    SCENARIOS
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Splits a text into word deltas that keep their trailing space ("Hello ", "from ", "mock").
pub fn word_chunks(text: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut current = String::new();
    for ch in text.chars() {
        if ch == ' ' {
            current.push(ch);
            chunks.push(std::mem::take(&mut current));
        } else {
            current.push(ch);
        }
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_names_are_unique_and_found_with_tags() {
        let mut names: Vec<_> = SCENARIOS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SCENARIOS.len());
        assert_eq!(find("shell.my-run").unwrap().name, "shell");
        assert!(find("nope").is_none());
    }

    #[test]
    fn word_chunks_keep_spaces_and_rejoin_to_the_text() {
        assert_eq!(word_chunks("Hello from mock"), ["Hello ", "from ", "mock"]);
        assert_eq!(word_chunks("a  b ").concat(), "a  b ");
    }
}
