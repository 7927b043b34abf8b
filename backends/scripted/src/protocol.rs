//! [`ScriptedProtocol`]: converts the scripted agent's wire lines into the universal transcript,
//! the way every CLI backend converts its CLI's output.

use std::collections::HashMap;
use std::sync::Arc;

use agent_api::kit::hitl::{Hitl, PermissionRequest, QuestionRequest};
use agent_api::kit::transcript::NewItem;
use agent_api::kit::{parse_typed, parse_value, Ctx, ExitInfo, Protocol, Unparsed};
use agent_api::request::ToolCategory;
use agent_api::run::FacetKind;
use agent_api::run::ToolBytes;
use agent_api::run::{ControlCommand, Usage};
use agent_api::universal::PermissionDetails;
use agent_api::universal::{ContentPart, ItemRole, ReasoningVisibility, ToolMeta};
use agent_api::{AgentError, PermissionPolicy, Prompt, QuestionAnswer, RunCompletion};
use serde_json::{json, Value};

use crate::wire::{AgentLine, ClientLine, FlatAgentLine, LeadingLine, SESSION_NOT_FOUND};

/// Where a shell call runs: what its result repeats.
#[derive(Debug, Default)]
struct CallPlace {
    command: Option<String>,
    cwd: Option<String>,
}

/// The converter of the scripted agent's protocol.
#[derive(Debug)]
pub struct ScriptedProtocol {
    prompt: Option<String>,
    hitl: Hitl<(), ()>,
    done: Option<(String, Usage)>,
    error: Option<(String, String)>,
    /// Serving a live session: each `done` ends a turn, not the run.
    session: bool,
    /// The command and directory of calls whose result has not come, by call id: the result
    /// carries them.
    calls: HashMap<String, CallPlace>,
}

impl ScriptedProtocol {
    /// A converter for a live run of `prompt` under `policy`.
    pub fn new(prompt: String, policy: PermissionPolicy) -> Self {
        Self {
            prompt: Some(prompt),
            hitl: Hitl::live(policy),
            done: None,
            error: None,
            session: false,
            calls: HashMap::new(),
        }
    }

    /// A converter for a live session under `policy`: prompts come with each turn.
    pub fn session(policy: PermissionPolicy) -> Self {
        Self {
            prompt: None,
            hitl: Hitl::live(policy),
            done: None,
            error: None,
            session: true,
            calls: HashMap::new(),
        }
    }

    /// A converter for replaying a recording (no prompt to echo, every permission asked).
    pub fn replaying() -> Self {
        Self {
            prompt: None,
            hitl: Hitl::replay(),
            done: None,
            error: None,
            session: false,
            calls: HashMap::new(),
        }
    }

    fn send(ctx: &mut Ctx<'_>, line: &ClientLine) {
        ctx.send(&serde_json::to_value(line).expect("wire lines serialize"));
    }

    fn item_for(ctx: &mut Ctx<'_>, native_id: &str, new: impl FnOnce() -> NewItem) -> Arc<str> {
        match ctx.transcript.open_item_by_native(native_id) {
            Some(id) => id,
            None => ctx.transcript.start_item(new().native(native_id)).into(),
        }
    }

    fn text_delta(ctx: &mut Ctx<'_>, message_id: &str, text: impl AsRef<str> + Into<String>) {
        let id = Self::item_for(ctx, message_id, || NewItem::message(ItemRole::Assistant));
        ctx.transcript.delta(&id, text);
    }

    fn agent_line(&mut self, line: AgentLine, ctx: &mut Ctx<'_>) {
        match line {
            AgentLine::Session { id, model } => {
                ctx.transcript.set_native_session_id(id);
                ctx.transcript
                    .session_started(Some(json!({ "model": model })));
                if let Some(prompt) = self.prompt.take() {
                    ctx.transcript.user_message(&prompt);
                }
            }
            AgentLine::TextDelta { message_id, text } => Self::text_delta(ctx, &message_id, text),
            AgentLine::MessageDone { message_id, text } => {
                let id = Self::item_for(ctx, &message_id, || NewItem::message(ItemRole::Assistant));
                ctx.transcript
                    .complete_item_with(&id, vec![ContentPart::Text { text }]);
            }
            AgentLine::ReasoningDelta { id, text } => {
                let item =
                    Self::item_for(ctx, &id, || NewItem::reasoning(ReasoningVisibility::Public));
                ctx.transcript.delta(&item, text);
            }
            AgentLine::ReasoningDone { id } => {
                let item =
                    Self::item_for(ctx, &id, || NewItem::reasoning(ReasoningVisibility::Public));
                ctx.transcript.complete_item(&item);
            }
            AgentLine::ToolCall {
                call_id,
                name,
                message_id,
                input,
            } => {
                let parent = ctx
                    .transcript
                    .item_by_native(&message_id)
                    .map(str::to_string);
                let meta = ToolMeta {
                    tool_name: Some(name.clone()),
                    ..ToolMeta::of(FacetKind::CommandExecution)
                }
                .with_shell_fields(&input);
                self.calls.insert(
                    call_id.clone(),
                    CallPlace {
                        command: meta.command.clone(),
                        cwd: meta.cwd.clone(),
                    },
                );
                let new = NewItem::tool_call(name, input.to_string(), call_id.clone())
                    .native(call_id)
                    .parent(parent)
                    .tool(meta);
                let id = ctx.transcript.start_item(new);
                ctx.transcript.complete_item(&id);
            }
            AgentLine::PermissionRequest {
                request_id,
                call_id,
                summary,
            } => {
                // The typed command is what the call runs (its `ToolMeta.command`), so an allow-list
                // decides on the command itself; the agent's own words are the reason.
                let command = self.calls.get(&call_id).and_then(|c| c.command.clone());
                let details = PermissionDetails::default()
                    .call_id(Some(call_id))
                    .command(command)
                    .reason(Some(summary.as_str()));
                let request = PermissionRequest::new(
                    request_id,
                    ToolCategory::Shell,
                    format!("shell: {summary}"),
                )
                .tool_name("shell")
                .details(details);
                if let Some(decided) = self.hitl.request_permission(ctx.transcript, request, ()) {
                    let allow = decided.decision.is_approval();
                    Self::send(
                        ctx,
                        &ClientLine::PermissionResponse {
                            request_id: decided.id,
                            allow,
                        },
                    );
                }
            }
            AgentLine::ToolResult {
                call_id,
                exit_code,
                stdout,
                denied,
            } => {
                let parent = ctx.transcript.item_by_native(&call_id).map(str::to_string);
                let bytes = ToolBytes {
                    stdout: stdout.len() as u64,
                    ..ToolBytes::default()
                };
                let call = self.calls.remove(&call_id).unwrap_or_default();
                let meta = ToolMeta {
                    kind: FacetKind::CommandExecution.into(),
                    tool_name: Some("shell".into()),
                    exit_code: Some(exit_code),
                    bytes,
                    command: call.command,
                    cwd: call.cwd,
                    ..ToolMeta::default()
                };
                let id = ctx.transcript.start_item(
                    NewItem::tool_result(call_id.clone())
                        .parent(parent)
                        .tool(meta),
                );
                let content = vec![ContentPart::ToolResult {
                    call_id,
                    output: stdout,
                }];
                if denied {
                    ctx.transcript
                        .update_item(&id, |item| item.content = content);
                    ctx.transcript.fail_item(&id);
                } else {
                    ctx.transcript.complete_item_with(&id, content);
                }
            }
            AgentLine::Question {
                question_id,
                prompt,
                options,
            } => {
                // Plan mode's end is asked as every backend asks it.
                let request = if question_id.starts_with("exit_plan") {
                    QuestionRequest::exit_plan(question_id, &prompt)
                } else {
                    QuestionRequest::new(question_id, prompt, options)
                };
                self.hitl.request_question(ctx.transcript, request, ())
            }
            AgentLine::Error { message, code } => {
                ctx.transcript
                    .error(message.clone(), Some(code.clone()), None);
                self.error = Some((message, code));
            }
            AgentLine::Done {
                status,
                input_tokens,
                output_tokens,
            } => {
                if self.session && status == SESSION_NOT_FOUND {
                    // The session it was asked to continue could not be loaded: the one it
                    // reported (as an agent that loads its session lazily says, on the first turn).
                    let id = ctx
                        .transcript
                        .native_session_id()
                        .unwrap_or_default()
                        .to_string();
                    ctx.end_turn(Err(AgentError::SessionNotFound { id }));
                    return;
                }
                let usage = Usage::tokens(input_tokens, output_tokens);
                self.done = Some((status, usage));
                if self.session {
                    let outcome = self.outcome().unwrap_or_else(|| {
                        Err(AgentError::Protocol {
                            reason: "no outcome".into(),
                        })
                    });
                    ctx.end_turn(outcome);
                } else {
                    ctx.close_input();
                }
            }
        }
    }

    /// Any line of the protocol, in any order of its fields: read flat, or as a `Value` when that
    /// fails (whose error says what is wrong).
    fn on_flat_line(&mut self, line: &[u8], ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match parse_typed::<FlatAgentLine>(line).and_then(FlatAgentLine::into_line) {
            Some(line) => {
                self.agent_line(line, ctx);
                Ok(())
            }
            None => self.on_message(parse_value(line)?, ctx),
        }
    }

    /// Replay: what the recorded client answered.
    fn client_line(&mut self, line: ClientLine, ctx: &mut Ctx<'_>) {
        match line {
            ClientLine::PermissionResponse { request_id, allow } => {
                self.hitl
                    .recorded_permission(ctx.transcript, &request_id, allow);
            }
            ClientLine::Answer {
                question_id,
                answer,
            } => {
                self.hitl
                    .recorded_answer(ctx.transcript, &question_id, answer);
            }
            ClientLine::SetMode { mode } => {
                ctx.transcript.daemon_status("mode_changed", Some(mode));
            }
            ClientLine::Interrupt | ClientLine::UserMessage { .. } => {}
        }
    }
}

impl Protocol for ScriptedProtocol {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn on_line(&mut self, line: &[u8], ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        match LeadingLine::parse(line) {
            Some(LeadingLine::TextDelta { message_id, text }) => {
                Self::text_delta(ctx, &message_id, text.0)
            }
            Some(LeadingLine::Line(line)) => self.agent_line(line, ctx),
            None => return self.on_flat_line(line, ctx),
        }
        Ok(())
    }

    fn on_message(&mut self, message: Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let line: AgentLine = serde_json::from_value(message)?;
        self.agent_line(line, ctx);
        Ok(())
    }

    fn on_recorded_send(&mut self, message: Value, ctx: &mut Ctx<'_>) {
        if let Ok(line) = serde_json::from_value::<ClientLine>(message) {
            self.client_line(line, ctx);
        }
    }

    fn on_control(&mut self, command: ControlCommand, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let line = match command {
            ControlCommand::Permission { id, decision } => {
                let decided = self.hitl.decide_permission(ctx.transcript, &id, decision)?;
                ClientLine::PermissionResponse {
                    request_id: decided.id,
                    allow: decided.decision.is_approval(),
                }
            }
            ControlCommand::Question { id, answer } => {
                let answered = self.hitl.answer_question(ctx.transcript, &id, answer)?;
                let answer = match answered.answer {
                    QuestionAnswer::Text(text) => Some(text),
                    _ => None,
                };
                ClientLine::Answer {
                    question_id: answered.id,
                    answer,
                }
            }
            other => {
                return Err(AgentError::InvalidRequest {
                    reason: format!("the scripted agent cannot handle {other}"),
                })
            }
        };
        Self::send(ctx, &line);
        Ok(())
    }

    fn interrupt(&mut self, ctx: &mut Ctx<'_>) -> bool {
        Self::send(ctx, &ClientLine::Interrupt);
        true
    }

    /// A session switches between `default` and `plan` between turns.
    fn set_mode(
        &mut self,
        mode: &agent_api::request::AgentMode,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        if !self.session {
            return Err(AgentError::InvalidRequest {
                reason: "a one-shot scripted run takes no mode switch".into(),
            });
        }
        agent_api::kit::check_mode(crate::KIND.as_str(), crate::MODES, mode)?;
        Self::send(
            ctx,
            &ClientLine::SetMode {
                mode: mode.as_str().to_string(),
            },
        );
        ctx.transcript
            .daemon_status("mode_changed", Some(mode.as_str().to_string()));
        Ok(())
    }

    fn send_turn(&mut self, prompt: &Prompt, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        if !self.session {
            return Err(AgentError::no_more_turns("scripted"));
        }
        self.prompt = Some(prompt.text.clone());
        self.error = None;
        Self::send(
            ctx,
            &ClientLine::UserMessage {
                text: prompt.text.clone(),
            },
        );
        Ok(())
    }

    fn finish(&mut self, exit: &ExitInfo, _ctx: &mut Ctx<'_>) -> Result<RunCompletion, AgentError> {
        self.outcome()
            .unwrap_or_else(|| Err(exit.early_exit_error()))
    }
}

impl ScriptedProtocol {
    /// How the turn went, once the agent said it was done.
    fn outcome(&mut self) -> Option<Result<RunCompletion, AgentError>> {
        Some(match self.done.take()? {
            (status, usage) if status == "success" => Ok(RunCompletion::new().with_usage(usage)),
            (status, _) if status == "interrupted" => Err(AgentError::Cancelled),
            _ => {
                let (message, code) = self
                    .error
                    .take()
                    .unwrap_or_else(|| ("the scripted agent failed".into(), String::new()));
                Err(match code.as_str() {
                    "server_error" => AgentError::ServerError {
                        status: None,
                        message,
                    },
                    _ => AgentError::AgentFailed { message },
                })
            }
        })
    }
}
