//! The scripts the scripted agent can play.

use std::time::Duration;

use crate::sessions::SessionTurn;
use crate::wire::AgentLine;

/// One step of a script.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    /// Write this line.
    Emit(AgentLine),
    /// Stream a message word by word, then complete it.
    Stream { message_id: String, text: String },
    /// Stream reasoning word by word, then complete it.
    Reason { id: String, text: String },
    /// Call a tool that needs permission; wait for the decision; report the result.
    GuardedTool {
        call_id: String,
        message_id: String,
        command: String,
        stdout: String,
    },
    /// Ask a question, wait for the answer, then stream `reply` with `{answer}` filled in.
    Ask {
        question_id: String,
        prompt: String,
        options: Vec<String>,
        reply: String,
    },
    /// The turn ends with this status.
    Done { status: &'static str },
    /// Call the run's first caller-defined tool over MCP with `input`, then answer with its
    /// output, verbatim.
    CallerTool { input: serde_json::Value },
    /// The agent exits at once, mid-turn, as a crashing CLI would.
    Crash,
    /// Plan mode's end: ask to leave plan mode with `plan` (the exit-plan question every real
    /// agent asks); an approval leaves plan mode for the next turns.
    ExitPlan { question_id: String, plan: String },
}

/// A scenario of the scripted agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scenario {
    /// Every feature once: reasoning, text, a tool behind a permission, a question, an answer.
    Tour,
    /// Streams "You said: `<prompt>`" (with the turn number on a resumed session). The default.
    Text,
    /// Reasoning, then text.
    Reasoning,
    /// A tool call behind a permission request.
    Permission,
    /// A question, then an answer quoting the reply.
    Question,
    /// Some text, then an error that fails the run.
    Error,
    /// Sixty words, slowly: for cancel and timeout.
    Slow,
    /// One 150,000-byte message in a single delta: for the text bound.
    LongText,
    /// Some text, then the agent exits mid-turn, on its session's first turn: for a dying agent.
    /// Its session (which recorded that turn) continued natively answers as `text` does, so
    /// that a caller can prove it comes back.
    Crash,
    /// Answers the prompt's first line, verbatim (what follows it, such as the SDK's output-schema
    /// instructions, is dropped): for structured output, the caller scripts the answer.
    Echo,
    /// Calls the run's first caller-defined tool ([`agent_api::RunRequest::with_tool`]) over its MCP
    /// server, with the prompt's first line as input when it is a JSON object (else
    /// `{"input": line}`), then answers with the tool's output, verbatim.
    CallerTool,
}

impl Scenario {
    /// Every scenario name.
    pub const NAMES: &'static [&'static str] = &[
        "tour",
        "text",
        "reasoning",
        "permission",
        "question",
        "error",
        "slow",
        "long_text",
        "crash",
        "echo",
        "caller_tool",
    ];

    /// The scenario with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "tour" => Self::Tour,
            "text" => Self::Text,
            "reasoning" => Self::Reasoning,
            "permission" => Self::Permission,
            "question" => Self::Question,
            "error" => Self::Error,
            "slow" => Self::Slow,
            "long_text" => Self::LongText,
            "crash" => Self::Crash,
            "echo" => Self::Echo,
            "caller_tool" => Self::CallerTool,
            _ => return None,
        })
    }

    /// The pause between streamed words when the request sets none.
    pub fn default_delay(self) -> Duration {
        match self {
            Self::Tour => Duration::from_millis(15),
            Self::Slow => Duration::from_millis(200),
            _ => Duration::ZERO,
        }
    }

    /// The turn's script; in plan mode (`plan`) no tool runs (each is described instead) and
    /// the turn ends with the exit-plan question.
    pub(crate) fn script(
        self,
        prompt: &str,
        model: Option<&str>,
        session: &SessionTurn,
        plan: bool,
    ) -> Vec<Step> {
        let steps = self.steps(prompt, model, session);
        if !plan {
            return steps;
        }
        let mut planned: Vec<Step> = steps
            .into_iter()
            .map(|step| match step {
                Step::GuardedTool {
                    message_id,
                    command,
                    ..
                } => Step::Stream {
                    message_id: format!("{message_id}_plan"),
                    text: format!("Plan mode: I would run `{command}`, and run nothing while planning."),
                },
                Step::CallerTool { .. } => Step::Stream {
                    message_id: "msg_plan".into(),
                    text: "Plan mode: I would call the caller's tool, and call nothing while planning.".into(),
                },
                other => other,
            })
            .collect();
        if let Some(Step::Done { status: "success" }) = planned.last() {
            planned.insert(
                planned.len() - 1,
                Step::ExitPlan {
                    question_id: "exit_plan_1".into(),
                    plan: format!(
                        "1. Answer {:?}.\n2. Change nothing else.",
                        prompt.lines().next().unwrap_or_default()
                    ),
                },
            );
        }
        planned
    }

    fn steps(self, prompt: &str, model: Option<&str>, session: &SessionTurn) -> Vec<Step> {
        let mut steps = vec![Step::Emit(AgentLine::Session {
            id: session.id.clone(),
            model: model.unwrap_or("scripted-1").to_string(),
        })];
        let said = match session.turn {
            1 => format!("You said: {prompt}"),
            turn => format!("You said: {prompt} (turn {turn} of this session)"),
        };
        let stream = |id: &str, text: String| Step::Stream {
            message_id: id.to_string(),
            text,
        };
        let tool = || Step::GuardedTool {
            call_id: "call_1".into(),
            message_id: "msg_1".into(),
            command: "echo hi".into(),
            stdout: "hi\n".into(),
        };
        let ask = |reply: &str| Step::Ask {
            question_id: "q_1".into(),
            prompt: "Which greeting should I use?".into(),
            options: vec!["hello".into(), "hi".into()],
            reply: reply.to_string(),
        };
        match self {
            Self::Tour => {
                steps.push(Step::Reason {
                    id: "rsn_1".into(),
                    text: format!("The user wrote {prompt:?}. I will run a command, ask a question, then answer."),
                });
                steps.push(stream("msg_1", "I'll run a command first.".into()));
                steps.push(tool());
                steps.push(ask("You chose {answer}."));
                steps.push(stream("msg_3", format!("{said}. The command printed: hi.")));
            }
            Self::Text => steps.push(stream("msg_1", said)),
            Self::Reasoning => {
                steps.push(Step::Reason {
                    id: "rsn_1".into(),
                    text: "Thinking about a short greeting.".into(),
                });
                steps.push(stream("msg_1", said));
            }
            Self::Permission => {
                steps.push(stream("msg_1", "I'll run a command.".into()));
                steps.push(tool());
                steps.push(stream("msg_2", "Tool finished.".into()));
            }
            Self::Question => steps.push(ask("You chose {answer}.")),
            Self::Error => {
                steps.push(stream("msg_1", "Working on it".into()));
                steps.push(Step::Emit(AgentLine::Error {
                    message: "the scripted model failed".into(),
                    code: "server_error".into(),
                }));
                steps.push(Step::Done { status: "error" });
                return steps;
            }
            Self::Slow => {
                let words: Vec<String> = (0..60).map(|i| format!("word{i}")).collect();
                steps.push(stream("msg_1", words.join(" ")));
            }
            Self::LongText => steps.push(stream("msg_1", "0123456789".repeat(15_000))),
            Self::Echo => steps.push(stream(
                "msg_1",
                prompt.lines().next().unwrap_or_default().to_string(),
            )),
            Self::CallerTool => {
                let line = prompt.lines().next().unwrap_or_default();
                let input = serde_json::from_str(line)
                    .ok()
                    .filter(serde_json::Value::is_object);
                steps.push(Step::CallerTool {
                    input: input.unwrap_or_else(|| serde_json::json!({ "input": line })),
                });
            }
            Self::Crash if session.turn == 1 => {
                steps.push(stream("msg_1", "Working on it".into()));
                steps.push(Step::Crash);
                return steps;
            }
            Self::Crash => steps.push(stream("msg_1", said)),
        }
        steps.push(Step::Done { status: "success" });
        steps
    }
}

/// A turn refused because the session it continues cannot be loaded: the session it was asked
/// for reported, then the turn's end ([`crate::wire::SESSION_NOT_FOUND`]), with no output.
pub(crate) fn refused(id: &str, model: Option<&str>) -> Vec<Step> {
    vec![
        Step::Emit(AgentLine::Session {
            id: id.to_string(),
            model: model.unwrap_or("scripted-1").to_string(),
        }),
        Step::Done {
            status: crate::wire::SESSION_NOT_FOUND,
        },
    ]
}
