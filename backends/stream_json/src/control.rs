//! The control protocol: the CLI's `control_request`s (`can_use_tool` for permissions and
//! AskUserQuestion, `hook_callback`, `mcp_message`, `elicitation`, …), its `control_cancel_request`,
//! and the caller's answers written back as `control_response`s.
//!
//! The policy, the caller's answers and the permission and question events are
//! `agent_api::kit::hitl`'s; this module only translates. A permission's id is the CLI's `request_id`. An AskUserQuestion request with several
//! questions becomes one question event per question, `<request_id>/<n>`; the answer goes back
//! once every question has one.

use std::collections::BTreeMap;

use agent_api::kit::hitl::{Decided, PermissionRequest, QuestionRequest};
use agent_api::kit::tool_table::ToolTable;
use agent_api::kit::Ctx;
use agent_api::kit::Unparsed;
use agent_api::universal::PermissionDetails;
use agent_api::{AgentError, PermissionDecision, QuestionAnswer};
use serde_json::{json, Value};

use super::{short, StreamJson};
use crate::tools;

/// A `can_use_tool` request waiting for the caller.
#[derive(Debug, Clone)]
pub(crate) struct PendingPermission {
    input: Value,
    tool_use_id: Option<String>,
    suggestions: Option<Value>,
}

/// An AskUserQuestion request waiting for answers.
#[derive(Debug, Clone)]
pub(crate) struct PendingAsk {
    input: Value,
    tool_use_id: Option<String>,
    /// The text of each question (the key of its answer).
    questions: Vec<String>,
    answers: BTreeMap<usize, String>,
    /// An ExitPlanMode request: its one question is whether to leave plan mode.
    exit_plan: bool,
}

/// The options of plan mode's exit question, every agent's: the first approves the plan (the
/// agent leaves plan mode); any other answer keeps planning, a free text answer going back as
/// feedback.
pub use agent_api::kit::hitl::EXIT_PLAN_OPTIONS;

/// The kit's permission request for a call of `tool` with `input`: its category from the agent's
/// `tools`, a short summary, the command or file it names (the kit cuts them), the diff an edit
/// would make.
pub(crate) fn tool_permission(
    tools: &ToolTable,
    id: &str,
    tool: &str,
    input: &Value,
) -> PermissionRequest {
    let (command, cwd) = agent_api::kit::transcript::shell_fields(input);
    let file = input
        .get("file_path")
        .or_else(|| input.get("notebook_path"))
        .or_else(|| input.get("path"))
        .and_then(Value::as_str);
    let details = PermissionDetails::default()
        .command(command)
        .cwd(cwd)
        .file(file)
        .diff(edit_diff(input));
    PermissionRequest::new(id, tools.category(tool), tools::summary(tool, input))
        .tool_name(tool)
        .details(details)
        .metadata(json!({ "input": input }))
}

/// What an edit or write tool's input would change, as a diff: `old_string`/`new_string` (an
/// Edit, each of a MultiEdit's `edits`), `old_str`/`new_str` (another dialect's edit tool),
/// `content` (a file written whole) or `new_source` (a notebook cell).
fn edit_diff(input: &Value) -> Option<String> {
    fn text<'v>(value: &'v Value, keys: &[&str]) -> Option<&'v str> {
        keys.iter()
            .find_map(|k| value.get(*k).and_then(Value::as_str))
    }
    let one = |edit: &Value| {
        let new = text(edit, &["new_string", "new_str", "content", "new_source"])?;
        Some(agent_api::kit::transcript::replacement_diff(
            text(edit, &["old_string", "old_str"]),
            new,
        ))
    };
    match input.get("edits").and_then(Value::as_array) {
        Some(edits) => {
            Some(edits.iter().filter_map(one).collect::<String>()).filter(|d| !d.is_empty())
        }
        None => one(input),
    }
}

/// A `control_response` with subtype success.
fn success(request_id: &str, response: Value) -> Value {
    json!({ "type": "control_response", "response": { "subtype": "success", "request_id": request_id, "response": response } })
}

/// A `control_response` with subtype error.
fn failure(request_id: &str, error: &str) -> Value {
    json!({ "type": "control_response", "response": { "subtype": "error", "request_id": request_id, "error": error } })
}

fn allow(input: &Value, tool_use_id: &Option<String>) -> Value {
    json!({ "behavior": "allow", "updatedInput": input, "toolUseID": tool_use_id })
}

fn deny(message: &str, tool_use_id: &Option<String>) -> Value {
    json!({ "behavior": "deny", "message": message, "toolUseID": tool_use_id })
}

impl StreamJson {
    fn reply(&mut self, line: Value, ctx: &mut Ctx<'_>) {
        if self.writes() {
            ctx.send(&line);
        }
    }

    pub(crate) fn on_control_request(
        &mut self,
        message: &Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        let request_id = message
            .get("request_id")
            .and_then(Value::as_str)
            .ok_or_else(|| Unparsed("a control_request has no `request_id`".into()))?
            .to_string();
        let request = message
            .get("request")
            .filter(|r| r.is_object())
            .ok_or_else(|| Unparsed("a control_request has no `request` object".into()))?;
        let subtype = request
            .get("subtype")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        match subtype {
            "can_use_tool" => self.can_use_tool(&request_id, request, ctx),
            // No hooks were registered in `initialize`; an empty output lets the CLI go on.
            "hook_callback" => {
                ctx.transcript
                    .status("hook_callback", short(request.get("callback_id"), 64));
                self.reply(success(&request_id, json!({})), ctx);
            }
            "elicitation" => {
                ctx.transcript.status(
                    "elicitation_declined",
                    short(request.get("mcp_server_name"), 64),
                );
                self.reply(success(&request_id, json!({ "action": "decline" })), ctx);
            }
            "mcp_message" => {
                ctx.transcript
                    .status("mcp_message_refused", short(request.get("server_name"), 64));
                self.reply(
                    failure(
                        &request_id,
                        "no SDK MCP server is registered by this client",
                    ),
                    ctx,
                );
            }
            other => {
                ctx.transcript.status(
                    "control_request_refused",
                    short(Some(&Value::from(other)), 64),
                );
                self.reply(
                    failure(
                        &request_id,
                        &format!(
                            "unsupported control request subtype: {}",
                            agent_api::kit::bounds::utf8_prefix(other, 64)
                        ),
                    ),
                    ctx,
                );
            }
        }
        Ok(())
    }

    fn can_use_tool(&mut self, request_id: &str, request: &Value, ctx: &mut Ctx<'_>) {
        let tool = request
            .get("tool_name")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        let input = request.get("input").cloned().unwrap_or_else(|| json!({}));
        let tool_use_id = request
            .get("tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_string);
        if tool == "ExitPlanMode" {
            self.ask_exit_plan(request_id, &input, tool_use_id, ctx);
            return;
        }
        if tool == "AskUserQuestion" {
            if let Some(questions) = input
                .get("questions")
                .and_then(Value::as_array)
                .filter(|q| !q.is_empty())
            {
                let questions = questions.clone();
                self.ask(request_id, &input, tool_use_id, &questions, ctx);
                return;
            }
        }
        let mut metadata = json!({ "input": input });
        for key in ["description", "blocked_path", "title"] {
            if let Some(value) = request.get(key).filter(|v| !v.is_null()) {
                metadata[key] = value.clone();
            }
        }
        let mut kit_request =
            tool_permission(&self.dialect.tools, request_id, &tool, &input).metadata(metadata);
        let text = |key: &str| request.get(key).and_then(Value::as_str);
        let mut details = std::mem::take(&mut kit_request.details)
            .call_id(tool_use_id.clone())
            .reason(text("decision_reason"));
        if details.file.is_none() {
            details = details.file(text("blocked_path"));
        }
        kit_request.details = details;
        let suggestions = request
            .get("permission_suggestions")
            .filter(|s| !s.is_null())
            .cloned();
        let native = PendingPermission {
            input,
            tool_use_id,
            suggestions,
        };
        if let Some(decided) = self
            .hitl
            .request_permission(ctx.transcript, kit_request, native)
        {
            self.send_decision(decided, ctx);
        }
    }

    /// The native reply to a decided permission request.
    fn send_decision(&mut self, decided: Decided<PendingPermission>, ctx: &mut Ctx<'_>) {
        let pending = decided.native;
        let response = match decided.decision {
            PermissionDecision::Allow => allow(&pending.input, &pending.tool_use_id),
            PermissionDecision::AllowWithInput(input) => allow(&input, &pending.tool_use_id),
            PermissionDecision::AllowForSession => {
                let mut response = allow(&pending.input, &pending.tool_use_id);
                if let Some(suggestions) = pending.suggestions {
                    response["updatedPermissions"] = suggestions;
                }
                response
            }
            PermissionDecision::Deny { message } => deny(
                message.as_deref().unwrap_or("The user denied this action."),
                &pending.tool_use_id,
            ),
            PermissionDecision::Cancel => {
                let mut response = deny(
                    "The user denied this action and stopped the turn.",
                    &pending.tool_use_id,
                );
                response["interrupt"] = json!(true);
                response
            }
            _ => deny("The user denied this action.", &pending.tool_use_id),
        };
        self.reply(success(&decided.id, response), ctx);
    }

    fn ask(
        &mut self,
        request_id: &str,
        input: &Value,
        tool_use_id: Option<String>,
        questions: &[Value],
        ctx: &mut Ctx<'_>,
    ) {
        let mut texts = Vec::new();
        for (n, question) in questions.iter().enumerate() {
            let text = question
                .get("question")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let options: Vec<String> = question
                .get("options")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|o| {
                    o.get("label")
                        .and_then(Value::as_str)
                        .or_else(|| o.as_str())
                        .map(str::to_string)
                })
                .collect();
            let kit_question =
                QuestionRequest::new(format!("{request_id}/{n}"), text.clone(), options)
                    .call_id(tool_use_id.clone());
            self.hitl
                .request_question(ctx.transcript, kit_question, (request_id.to_string(), n));
            texts.push(text);
        }
        self.asks.insert(
            request_id.to_string(),
            PendingAsk {
                input: input.clone(),
                tool_use_id,
                questions: texts,
                answers: BTreeMap::new(),
                exit_plan: false,
            },
        );
    }

    /// Plan mode's exit (the ExitPlanMode tool) as one question with the plan in its text.
    fn ask_exit_plan(
        &mut self,
        request_id: &str,
        input: &Value,
        tool_use_id: Option<String>,
        ctx: &mut Ctx<'_>,
    ) {
        let plan = input.get("plan").and_then(Value::as_str).unwrap_or("");
        let kit_question = QuestionRequest::exit_plan(format!("{request_id}/0"), plan)
            .call_id(tool_use_id.clone());
        let text = kit_question.prompt.clone();
        self.hitl
            .request_question(ctx.transcript, kit_question, (request_id.to_string(), 0));
        let ask = PendingAsk {
            input: input.clone(),
            tool_use_id,
            questions: vec![text],
            answers: BTreeMap::new(),
            exit_plan: true,
        };
        self.asks.insert(request_id.to_string(), ask);
    }

    /// The reply to plan mode's exit question: leave plan mode for the default (the protocol's
    /// agent changes mode only when the reply says so), or stay with the caller's words as
    /// feedback.
    fn answer_exit_plan(
        &mut self,
        request_id: &str,
        ask: PendingAsk,
        answer: &str,
        ctx: &mut Ctx<'_>,
    ) {
        let response = if answer == EXIT_PLAN_OPTIONS[0] {
            let mut response = allow(&ask.input, &ask.tool_use_id);
            response["updatedPermissions"] =
                json!([{ "type": "setMode", "mode": "default", "destination": "session" }]);
            response
        } else if answer == EXIT_PLAN_OPTIONS[1] {
            deny("The user wants to keep planning.", &ask.tool_use_id)
        } else {
            deny(
                &format!("The user wants to keep planning: {answer}"),
                &ask.tool_use_id,
            )
        };
        self.reply(success(request_id, response), ctx);
    }

    /// The caller's decision on permission `id`.
    pub(crate) fn decide_permission(
        &mut self,
        id: &str,
        decision: PermissionDecision,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        let decided = self.hitl.decide_permission(ctx.transcript, id, decision)?;
        self.send_decision(decided, ctx);
        Ok(())
    }

    /// The caller's answer to question `id` (`<request_id>/<n>`): the CLI gets one answer once
    /// every question of its request has one, or a refusal as soon as one is declined.
    pub(crate) fn answer_question(
        &mut self,
        id: &str,
        answer: QuestionAnswer,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), AgentError> {
        let answered = self.hitl.answer_question(ctx.transcript, id, answer)?;
        let (request_id, n) = answered.native;
        let Some(ask) = self.asks.get_mut(&request_id) else {
            return Ok(());
        };
        match answered.answer {
            QuestionAnswer::Text(text) if ask.exit_plan => {
                let ask = self.asks.remove(&request_id).expect("present above");
                self.answer_exit_plan(&request_id, ask, &text, ctx);
            }
            QuestionAnswer::Text(text) => {
                ask.answers.insert(n, text);
                if ask.answers.len() == ask.questions.len() {
                    let ask = self.asks.remove(&request_id).expect("present above");
                    let answers: serde_json::Map<String, Value> = ask
                        .answers
                        .iter()
                        .map(|(i, a)| (ask.questions[*i].clone(), Value::from(a.clone())))
                        .collect();
                    let mut input = ask.input.clone();
                    input["answers"] = Value::Object(answers);
                    self.reply(success(&request_id, allow(&input, &ask.tool_use_id)), ctx);
                }
            }
            _ => {
                let ask = self.asks.remove(&request_id).expect("present above");
                // Declining one question declines the request: the caller decided the rest too.
                for n in 0..ask.questions.len() {
                    let _ = self.hitl.answer_question(
                        ctx.transcript,
                        &format!("{request_id}/{n}"),
                        QuestionAnswer::Reject,
                    );
                }
                self.reply(
                    success(
                        &request_id,
                        deny("The user declined to answer.", &ask.tool_use_id),
                    ),
                    ctx,
                );
            }
        }
        Ok(())
    }

    /// The CLI withdrew one of its requests (for example after an interrupt).
    pub(crate) fn on_control_cancel(
        &mut self,
        message: &Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        let request_id = message
            .get("request_id")
            .and_then(Value::as_str)
            .ok_or_else(|| Unparsed("a control_cancel_request has no `request_id`".into()))?;
        self.hitl.withdraw_permission(ctx.transcript, request_id);
        if let Some(ask) = self.asks.remove(request_id) {
            for n in 0..ask.questions.len() {
                self.hitl
                    .withdraw_question(ctx.transcript, &format!("{request_id}/{n}"));
            }
        }
        ctx.transcript.status("control_request_cancelled", None);
        Ok(())
    }

    /// A response from the CLI to one of our requests (`initialize`, `interrupt`).
    pub(crate) fn on_control_response(
        &mut self,
        message: &Value,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Unparsed> {
        let response = message
            .get("response")
            .filter(|r| r.is_object())
            .ok_or_else(|| Unparsed("a control_response has no `response` object".into()))?;
        if response.get("subtype").and_then(Value::as_str) == Some("error") {
            ctx.transcript
                .status("control_request_failed", short(response.get("error"), 200));
        }
        Ok(())
    }

    /// Replay: the recorded client's answer to a `can_use_tool` request resolves it.
    pub(crate) fn on_recorded_response(&mut self, message: &Value, ctx: &mut Ctx<'_>) {
        let Some(request_id) = message
            .pointer("/response/request_id")
            .and_then(Value::as_str)
        else {
            return;
        };
        let answer = message.pointer("/response/response");
        let approved = answer
            .and_then(|a| a.get("behavior"))
            .and_then(Value::as_str)
            == Some("allow");
        self.hitl
            .recorded_permission(ctx.transcript, request_id, approved);
        if let Some(ask) = self.asks.remove(request_id) {
            let answers = answer.and_then(|a| a.pointer("/updatedInput/answers"));
            for (n, question) in ask.questions.iter().enumerate() {
                let text = answers
                    .and_then(|a| a.get(question))
                    .and_then(Value::as_str)
                    .filter(|_| approved);
                self.hitl.recorded_answer(
                    ctx.transcript,
                    &format!("{request_id}/{n}"),
                    text.map(str::to_string),
                );
            }
        }
    }
}
