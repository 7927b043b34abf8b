//! The in-process scripted agent: plays a script over its pipes, waiting for the client's
//! answers where the script asks, and stopping at an interrupt.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agent_api::kit::caller_tools::client::{result_text, McpClient};
use agent_api::kit::AgentPipes;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

use crate::scenario::Step;
use crate::wire::{AgentLine, ClientLine};

/// Exit code of an interrupted run (as a shell reports SIGINT).
const INTERRUPTED: i32 = 130;

struct Player {
    out: DuplexStream,
    /// The client of the run's caller-tools MCP server, when the run has caller tools.
    mcp: Option<McpClient>,
    inbox: mpsc::UnboundedReceiver<ClientLine>,
    delay: Duration,
    output_tokens: u64,
    /// Whether the agent plans (plan mode): shared with what builds each turn's script.
    plan: Arc<AtomicBool>,
}

/// The client interrupted the turn.
struct Interrupted;

/// Why a turn did not play to its end.
enum Stopped {
    /// The client interrupted it.
    Interrupted,
    /// The script has the agent exit at once.
    Crashed,
}

/// Exit code of an agent that crashed.
const CRASHED: i32 = 70;

impl Player {
    async fn write(&mut self, line: &AgentLine) {
        let mut bytes = serde_json::to_vec(line).expect("wire lines serialize");
        bytes.push(b'\n');
        // The client going away ends the run anyway; nothing to report here.
        let _ = self.out.write_all(&bytes).await;
    }

    /// Waits `delay`, returning early with `Interrupted` if the client asks.
    async fn pause(&mut self) -> Result<(), Interrupted> {
        if self.delay.is_zero() {
            return match self.inbox.try_recv() {
                Ok(ClientLine::Interrupt) => Err(Interrupted),
                _ => Ok(()),
            };
        }
        tokio::select! {
            _ = tokio::time::sleep(self.delay) => Ok(()),
            Some(ClientLine::Interrupt) = self.inbox.recv() => Err(Interrupted),
        }
    }

    /// Waits for the client line `pick` accepts; an interrupt or a closed inbox stops the turn.
    async fn wait_for<T>(
        &mut self,
        mut pick: impl FnMut(ClientLine) -> Option<T>,
    ) -> Result<T, Interrupted> {
        loop {
            match self.inbox.recv().await {
                None | Some(ClientLine::Interrupt) => return Err(Interrupted),
                Some(line) => {
                    if let Some(found) = pick(line) {
                        return Ok(found);
                    }
                }
            }
        }
    }

    /// Asks the question and waits for its answer (`None`: rejected).
    async fn ask(
        &mut self,
        question_id: String,
        prompt: String,
        options: Vec<String>,
    ) -> Result<Option<String>, Interrupted> {
        self.write(&AgentLine::Question {
            question_id: question_id.clone(),
            prompt,
            options,
        })
        .await;
        self.wait_for(|line| match line {
            ClientLine::Answer {
                question_id: q,
                answer,
            } if q == question_id => Some(answer),
            _ => None,
        })
        .await
    }

    async fn stream(&mut self, message_id: &str, text: &str) -> Result<(), Interrupted> {
        for word in text.split_inclusive(' ') {
            self.pause().await?;
            self.output_tokens += 1;
            self.write(&AgentLine::TextDelta {
                message_id: message_id.into(),
                text: word.into(),
            })
            .await;
        }
        self.write(&AgentLine::MessageDone {
            message_id: message_id.into(),
            text: text.into(),
        })
        .await;
        Ok(())
    }

    async fn step(&mut self, step: Step) -> Result<(), Interrupted> {
        match step {
            Step::Emit(line) => self.write(&line).await,
            Step::Stream { message_id, text } => self.stream(&message_id, &text).await?,
            Step::Reason { id, text } => {
                for word in text.split_inclusive(' ') {
                    self.pause().await?;
                    self.write(&AgentLine::ReasoningDelta {
                        id: id.clone(),
                        text: word.into(),
                    })
                    .await;
                }
                self.write(&AgentLine::ReasoningDone { id }).await;
            }
            Step::GuardedTool {
                call_id,
                message_id,
                command,
                stdout,
            } => {
                let input = serde_json::json!({ "command": command });
                self.write(&AgentLine::ToolCall {
                    call_id: call_id.clone(),
                    name: "shell".into(),
                    message_id,
                    input,
                })
                .await;
                let request_id = format!("perm_{call_id}");
                self.write(&AgentLine::PermissionRequest {
                    request_id: request_id.clone(),
                    call_id: call_id.clone(),
                    summary: format!("run `{command}`"),
                })
                .await;
                let allow = self
                    .wait_for(|line| match line {
                        ClientLine::PermissionResponse {
                            request_id: r,
                            allow,
                        } if r == request_id => Some(allow),
                        _ => None,
                    })
                    .await?;
                let (exit_code, stdout) = if allow {
                    (0, stdout)
                } else {
                    (1, String::new())
                };
                self.write(&AgentLine::ToolResult {
                    call_id,
                    exit_code,
                    stdout,
                    denied: !allow,
                })
                .await;
            }
            Step::Ask {
                question_id,
                prompt,
                options,
                reply,
            } => {
                let answer = self.ask(question_id, prompt, options).await?;
                let reply = reply.replace("{answer}", answer.as_deref().unwrap_or("nothing"));
                self.stream("msg_answer", &reply).await?;
            }
            Step::CallerTool { input } => self.call_caller_tool(input).await?,
            Step::ExitPlan { question_id, plan } => {
                let options = agent_api::kit::hitl::EXIT_PLAN_OPTIONS
                    .map(str::to_string)
                    .to_vec();
                let answer = self.ask(question_id, plan, options).await?;
                let approved =
                    answer.as_deref() == Some(agent_api::kit::hitl::EXIT_PLAN_OPTIONS[0]);
                if approved {
                    self.plan.store(false, Ordering::SeqCst);
                }
                let reply = if approved {
                    "Leaving plan mode: the next turn carries out the plan."
                } else {
                    "Staying in plan mode."
                };
                self.stream("msg_exit_plan", reply).await?;
            }
            Step::Crash => {}
            Step::Done { status } => {
                let output_tokens = self.output_tokens;
                self.write(&AgentLine::Done {
                    status: status.into(),
                    input_tokens: 12,
                    output_tokens,
                })
                .await;
            }
        }
        Ok(())
    }
}

impl Player {
    /// Calls the first tool the caller-tools server lists, as a tool call item, then answers
    /// with what it returned (or why there was nothing to call).
    async fn call_caller_tool(&mut self, input: serde_json::Value) -> Result<(), Interrupted> {
        let Some(mcp) = self.mcp.clone() else {
            return self
                .stream("msg_1", "There is no caller tool to call.")
                .await;
        };
        let listed = mcp.list_tools().await.map(|tools| {
            tools
                .first()
                .and_then(|t| t["name"].as_str())
                .map(str::to_owned)
        });
        let name = match listed {
            Ok(Some(name)) => name,
            Ok(None) => {
                return self
                    .stream("msg_1", "The caller-tools server lists no tool.")
                    .await
            }
            Err(error) => {
                return self
                    .stream("msg_1", &format!("The caller-tools server failed: {error}"))
                    .await
            }
        };
        let call_id = "call_caller_1".to_string();
        self.write(&AgentLine::ToolCall {
            call_id: call_id.clone(),
            name: name.clone(),
            message_id: "msg_1".into(),
            input: input.clone(),
        })
        .await;
        let (exit_code, output) = match mcp.call_tool(&name, input).await {
            Ok(result) => (
                i64::from(result["isError"] == serde_json::Value::Bool(true)),
                result_text(&result),
            ),
            Err(error) => (1, error.to_string()),
        };
        self.write(&AgentLine::ToolResult {
            call_id,
            exit_code,
            stdout: output.clone(),
            denied: false,
        })
        .await;
        self.stream("msg_2", &output).await
    }

    /// A player on `pipes`, reading the client's lines into its inbox.
    fn new(
        pipes: AgentPipes,
        delay: Duration,
        mcp: Option<McpClient>,
        plan: Arc<AtomicBool>,
    ) -> Self {
        let (tx, inbox) = mpsc::unbounded_channel();
        let mut stdin = pipes.stdin;
        tokio::spawn(async move {
            let mut line = String::new();
            while stdin.read_line(&mut line).await.unwrap_or(0) > 0 {
                if let Ok(message) = serde_json::from_str::<ClientLine>(&line) {
                    if tx.send(message).is_err() {
                        break;
                    }
                }
                line.clear();
            }
        });
        Player {
            out: pipes.stdout,
            mcp,
            inbox,
            delay,
            output_tokens: 0,
            plan,
        }
    }

    /// Plays one turn's script; returns whether it failed, or that it was interrupted (after
    /// reporting so to the client).
    async fn play_turn(&mut self, script: Vec<Step>) -> Result<bool, Stopped> {
        self.output_tokens = 0;
        let mut failed = false;
        for step in script {
            if matches!(step, Step::Crash) {
                return Err(Stopped::Crashed);
            }
            failed |= matches!(step, Step::Done { status: "error" });
            if self.step(step).await.is_err() {
                let output_tokens = self.output_tokens;
                self.write(&AgentLine::Done {
                    status: "interrupted".into(),
                    input_tokens: 12,
                    output_tokens,
                })
                .await;
                return Err(Stopped::Interrupted);
            }
        }
        Ok(failed)
    }
}

/// Plays `script`; returns the exit code (0, 1 after an error, 130 when interrupted).
pub(crate) async fn play(
    script: Vec<Step>,
    delay: Duration,
    pipes: AgentPipes,
    mcp: Option<McpClient>,
) -> i32 {
    let plan = Arc::new(AtomicBool::new(false));
    match Player::new(pipes, delay, mcp, plan).play_turn(script).await {
        Ok(failed) => i32::from(failed),
        Err(Stopped::Interrupted) => INTERRUPTED,
        Err(Stopped::Crashed) => CRASHED,
    }
}

/// A live session: plays the script `script_for` makes of each user message, one turn after
/// another, until the client closes its input (exit code 0).
/// `plan` says whether it plans, switched by the client between turns ([`ClientLine::SetMode`])
/// and left when the person approves the plan.
pub(crate) async fn serve(
    mut script_for: impl FnMut(&str, bool) -> Vec<Step> + Send,
    delay: Duration,
    pipes: AgentPipes,
    mcp: Option<McpClient>,
    plan: Arc<AtomicBool>,
) -> i32 {
    let mut player = Player::new(pipes, delay, mcp, plan);
    while let Some(line) = player.inbox.recv().await {
        // Answers and interrupts that arrive between turns belong to no turn.
        match line {
            ClientLine::UserMessage { text } => {
                let script = script_for(&text, player.plan.load(Ordering::SeqCst));
                if let Err(Stopped::Crashed) = player.play_turn(script).await {
                    return CRASHED;
                }
            }
            ClientLine::SetMode { mode } => player.plan.store(mode == "plan", Ordering::SeqCst),
            _ => {}
        }
    }
    0
}
