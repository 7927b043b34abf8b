//! The API-neutral middle of the server: what a request's conversation holds ([`Conversation`]) and what
//! the scenario answers to it ([`Reply`]). Each API module reads its own request format into a
//! `Conversation` and renders the `Reply` in its own wire format.

use std::time::Duration;

use super::conversation::{Conversation, ToolOutput};
use super::tools::{self, ToolCall};
use crate::scenario::{self, Action, Failure, Scenario, Script, Text};

/// The longest tool output quoted back in a final text.
const QUOTE_LIMIT: usize = 200;

/// One model turn, ready to be rendered by an API module.
#[derive(Debug, Clone, Default)]
pub struct TurnPlan {
    /// Reasoning text, streamed first.
    pub thinking: Option<String>,
    /// Text deltas.
    pub text: Vec<String>,
    /// Tool call after the text.
    pub tool: Option<ToolCall>,
    /// Pause before each text delta.
    pub pace: Duration,
    /// The stream breaks after the first text deltas.
    pub breaks: bool,
}

impl TurnPlan {
    /// A plan that only says `text`.
    pub fn say(text: &str) -> TurnPlan {
        TurnPlan {
            text: scenario::word_chunks(text),
            ..TurnPlan::default()
        }
    }

    /// The whole text.
    pub fn full_text(&self) -> String {
        self.text.concat()
    }

    /// How many text deltas are sent before a broken stream stops.
    pub fn deltas_before_break(&self) -> usize {
        if self.breaks {
            (self.text.len() / 2).max(1).min(self.text.len())
        } else {
            self.text.len()
        }
    }
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A model turn.
    Turn(TurnPlan),
    /// An HTTP error.
    Fail(Failure),
}

/// Plays `scenario` against the conversation.
pub fn plan(scenario: &Scenario, conv: &Conversation) -> Reply {
    let (steps, done) = match scenario.script {
        Script::Fail(f) => return Reply::Fail(f),
        Script::Steps(steps) => (steps, conv.results_this_turn.len()),
        Script::WholeConversation(steps) => (steps, conv.results_total),
    };
    let index = done.min(steps.len().saturating_sub(1));
    let step = &steps[index];
    let mut turn = TurnPlan {
        thinking: step.thinking.map(str::to_string),
        pace: step.pace(),
        breaks: step.breaks,
        ..TurnPlan::default()
    };
    let text = match step.text {
        Text::None => String::new(),
        Text::Fixed(t) => t.to_string(),
        Text::Words(n) => (0..n)
            .map(|i| format!("word{i}"))
            .collect::<Vec<_>>()
            .join(" "),
        Text::AfterTool(template) => after_tool(template, conv.results_this_turn.last()),
        Text::Echo => format!(
            "echo: user_turns={} messages={} last={}",
            conv.user_turns, conv.messages, conv.last_user_text
        ),
    };
    if let Some(action) = step.action {
        match (tools::call_for(&action, conv), action) {
            (Ok(call), _) => turn.tool = Some(call),
            // A CLI without a structured-output tool (Codex's `outputSchema`) takes the JSON as the answer.
            (Err(_), Action::Structured(json)) => {
                turn.text = scenario::word_chunks(json);
                return Reply::Turn(turn);
            }
            (Err(missing), _) => {
                // No tool fits: say so instead, so a test sees why nothing happened.
                turn.text = scenario::word_chunks(&missing);
                return Reply::Turn(turn);
            }
        }
    }
    turn.text = scenario::word_chunks(&text);
    Reply::Turn(turn)
}

fn after_tool(template: &str, output: Option<&ToolOutput>) -> String {
    let (status, text) = match output {
        Some(o) => (
            if o.is_error { "failed" } else { "finished" },
            o.text.trim(),
        ),
        None => ("finished", ""),
    };
    let quoted = if text.chars().count() > QUOTE_LIMIT {
        let head: String = text.chars().take(QUOTE_LIMIT).collect();
        format!("{head}... ({} characters)", text.chars().count())
    } else {
        text.to_string()
    };
    template
        .replace("{status}", status)
        .replace("{output}", &quoted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::conversation::OfferedTool;

    fn conv_with_results(results: &[&str]) -> Conversation {
        let mut c = Conversation::default();
        c.push_user(
            ["<system-reminder>x</system-reminder>", "run the command"],
            vec![],
        );
        for r in results {
            c.push_assistant();
            c.push_user(
                [],
                vec![ToolOutput {
                    text: r.to_string(),
                    is_error: false,
                }],
            );
        }
        c
    }

    #[test]
    fn wrapper_blocks_are_not_user_turns() {
        let c = conv_with_results(&[]);
        assert_eq!((c.user_turns, c.messages), (1, 1));
        assert_eq!(c.last_user_text, "run the command");
        let mut c2 = Conversation::default();
        c2.push_user(["<environment_context>x</environment_context>"], vec![]);
        assert_eq!((c2.user_turns, c2.messages), (0, 0));
    }

    #[test]
    fn a_new_user_text_starts_a_new_turn() {
        let mut c = conv_with_results(&["hi"]);
        assert_eq!(c.results_this_turn.len(), 1);
        c.push_assistant();
        c.push_user(["again"], vec![]);
        assert!(c.results_this_turn.is_empty());
        assert_eq!(c.user_turns, 2);
    }

    #[test]
    fn a_message_mid_turn_does_not_start_the_steer_script_again() {
        let steer = scenario::find("steer").unwrap();
        let mut c = conv_with_results(&[""]);
        c.push_user(["also say banana"], vec![]);
        assert!(
            c.results_this_turn.is_empty(),
            "a new user text: a new turn for Steps scripts"
        );
        let Reply::Turn(t) = plan(steer, &c) else {
            panic!("not a turn")
        };
        assert!(t.tool.is_none(), "the shell call is not made again");
        assert_eq!(
            t.full_text(),
            "echo: user_turns=2 messages=4 last=also say banana"
        );
    }

    #[test]
    fn shell_scenario_answers_the_tool_result_with_its_output() {
        let shell = scenario::find("shell").unwrap();
        let Reply::Turn(t) = plan(shell, &conv_with_results(&["hi\n"])) else {
            panic!("not a turn")
        };
        assert!(t.tool.is_none());
        assert_eq!(t.full_text(), "Tool finished. Output was: hi");
    }

    #[test]
    fn a_deferred_caller_tool_is_searched_for_once_then_called_in_its_namespace() {
        let caller = scenario::find("caller_tool").unwrap();
        let mut c = conv_with_results(&[]);
        c.tools
            .push(OfferedTool::function(tools::TOOL_SEARCH, None));
        let Reply::Turn(t) = plan(caller, &c) else {
            panic!("not a turn")
        };
        assert_eq!(
            t.tool.as_ref().map(|call| call.name.as_str()),
            Some(tools::TOOL_SEARCH)
        );
        c.push_assistant();
        let mut loaded = OfferedTool::function("agent_api_probe", None);
        loaded.namespace = Some("mcp__caller".into());
        c.push_search_result([loaded]);
        let Reply::Turn(t) = plan(caller, &c) else {
            panic!("not a turn")
        };
        let call = t
            .tool
            .expect("the tool call, not the answer: a search is no tool result");
        assert_eq!(
            (call.name.as_str(), call.namespace.as_deref()),
            ("agent_api_probe", Some("mcp__caller"))
        );
        // A search that loaded nothing is not repeated: the answer says what is missing.
        let mut empty = conv_with_results(&[]);
        empty
            .tools
            .push(OfferedTool::function(tools::TOOL_SEARCH, None));
        empty.push_assistant();
        empty.push_search_result([]);
        let Reply::Turn(t) = plan(caller, &empty) else {
            panic!("not a turn")
        };
        assert!(
            t.tool.is_none() && t.full_text().contains("offers no agent_api_probe tool"),
            "{}",
            t.full_text()
        );
    }

    #[test]
    fn long_tool_output_is_shortened_in_the_quote() {
        let big = "a".repeat(10_000);
        let text = after_tool(
            "{output}",
            Some(&ToolOutput {
                text: big,
                is_error: false,
            }),
        );
        assert!(text.len() < 300, "{}", text.len());
        assert!(text.ends_with("(10000 characters)"));
    }

    #[test]
    fn echo_describes_the_history() {
        let echo = scenario::find("echo").unwrap();
        let Reply::Turn(t) = plan(echo, &conv_with_results(&["x"])) else {
            panic!("not a turn")
        };
        assert_eq!(
            t.full_text(),
            "echo: user_turns=1 messages=3 last=run the command"
        );
    }
}
