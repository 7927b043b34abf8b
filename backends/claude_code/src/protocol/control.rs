//! The control protocol: the CLI's `control_request`s (`can_use_tool` for permissions and
//! AskUserQuestion, `hook_callback`, `mcp_message`, `elicitation`, …), its `control_cancel_request`,
//! and the caller's answers written back as `control_response`s.
//!
//! A permission's id is the CLI's `request_id`. An AskUserQuestion request with several
//! questions becomes one question event per question, `<request_id>/<n>`; the answer goes back
//! once every question has one.

use std::collections::BTreeMap;

use agent_api::kit::driver::Unparsed;
use agent_api::kit::Ctx;
use agent_api::{AgentError, PermissionDecision, PermissionRule, QuestionAnswer, ToolCategory};
use serde_json::{json, Value};

use super::{short, ClaudeProtocol};
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
}

/// The permission category of a Claude Code tool.
pub(crate) fn category(tool: &str) -> ToolCategory {
    match tool {
        "Bash" | "PowerShell" | "BashOutput" | "KillShell" => ToolCategory::Shell,
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => ToolCategory::FileWrite,
        "Read" | "Glob" | "Grep" | "LS" => ToolCategory::FileRead,
        "WebFetch" | "WebSearch" => ToolCategory::Network,
        _ if tool.starts_with("mcp__") => ToolCategory::Mcp,
        _ => ToolCategory::Other,
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

impl ClaudeProtocol {
    fn reply(&mut self, line: Value, ctx: &mut Ctx<'_>) {
        if self.writes() {
            ctx.send(&line);
        }
    }

    pub(crate) fn on_control_request(&mut self, message: &Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let request_id = message
            .get("request_id")
            .and_then(Value::as_str)
            .ok_or_else(|| Unparsed("a control_request has no `request_id`".into()))?
            .to_string();
        let request =
            message.get("request").filter(|r| r.is_object()).ok_or_else(|| Unparsed("a control_request has no `request` object".into()))?;
        let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("unknown");
        match subtype {
            "can_use_tool" => self.can_use_tool(&request_id, request, ctx),
            // No hooks were registered in `initialize`; an empty output lets the CLI go on.
            "hook_callback" => {
                ctx.transcript.status("hook_callback", short(request.get("callback_id"), 64));
                self.reply(success(&request_id, json!({})), ctx);
            }
            "elicitation" => {
                ctx.transcript.status("elicitation_declined", short(request.get("mcp_server_name"), 64));
                self.reply(success(&request_id, json!({ "action": "decline" })), ctx);
            }
            "mcp_message" => {
                ctx.transcript.status("mcp_message_refused", short(request.get("server_name"), 64));
                self.reply(failure(&request_id, "no SDK MCP server is registered by this client"), ctx);
            }
            other => {
                ctx.transcript.status("control_request_refused", short(Some(&Value::from(other)), 64));
                self.reply(
                    failure(&request_id, &format!("unsupported control request subtype: {}", agent_api::bounds::utf8_prefix(other, 64))),
                    ctx,
                );
            }
        }
        Ok(())
    }

    fn can_use_tool(&mut self, request_id: &str, request: &Value, ctx: &mut Ctx<'_>) {
        let tool = request.get("tool_name").and_then(Value::as_str).unwrap_or("unknown").to_string();
        let input = request.get("input").cloned().unwrap_or_else(|| json!({}));
        let tool_use_id = request.get("tool_use_id").and_then(Value::as_str).map(str::to_string);
        if tool == "AskUserQuestion" {
            if let Some(questions) = input.get("questions").and_then(Value::as_array).filter(|q| !q.is_empty()) {
                let questions = questions.clone();
                self.ask(request_id, &input, tool_use_id, &questions, ctx);
                return;
            }
        }
        let action = tools::summary(&tool, &input);
        let rule = if self.channel == super::Channel::Replay { PermissionRule::Ask } else { self.policy.rule(category(&tool)) };
        match rule {
            PermissionRule::Approve => {
                ctx.transcript.status("permission_auto_approved", Some(action));
                self.reply(success(request_id, allow(&input, &tool_use_id)), ctx);
            }
            PermissionRule::Deny => {
                ctx.transcript.status("permission_auto_denied", Some(action));
                self.reply(success(request_id, deny("Denied by the run's permission policy.", &tool_use_id)), ctx);
            }
            PermissionRule::Ask => {
                let mut metadata = json!({ "tool_name": tool, "input": input, "tool_use_id": tool_use_id });
                for key in ["description", "blocked_path", "decision_reason", "title"] {
                    if let Some(value) = request.get(key).filter(|v| !v.is_null()) {
                        metadata[key] = value.clone();
                    }
                }
                let suggestions = request.get("permission_suggestions").filter(|s| !s.is_null()).cloned();
                self.permissions.insert(request_id.to_string(), PendingPermission { input, tool_use_id, suggestions });
                ctx.transcript.permission_requested(request_id, action, Some(metadata));
            }
        }
    }

    fn ask(&mut self, request_id: &str, input: &Value, tool_use_id: Option<String>, questions: &[Value], ctx: &mut Ctx<'_>) {
        let mut texts = Vec::new();
        for (n, question) in questions.iter().enumerate() {
            let text = question.get("question").and_then(Value::as_str).unwrap_or_default().to_string();
            let options: Vec<String> = question
                .get("options")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|o| o.get("label").and_then(Value::as_str).or_else(|| o.as_str()).map(str::to_string))
                .collect();
            ctx.transcript.question_requested(format!("{request_id}/{n}"), text.clone(), options);
            texts.push(text);
        }
        self.asks
            .insert(request_id.to_string(), PendingAsk { input: input.clone(), tool_use_id, questions: texts, answers: BTreeMap::new() });
    }

    /// The caller's decision on permission `id`.
    pub(crate) fn decide_permission(&mut self, id: &str, decision: PermissionDecision, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        if !ctx.transcript.has_pending_permission(id) {
            return Err(AgentError::UnknownPermission { id: id.to_string() });
        }
        let pending = self.permissions.remove(id).ok_or_else(|| AgentError::UnknownPermission { id: id.to_string() })?;
        let approved = decision.is_approval();
        let response = match decision {
            PermissionDecision::Allow => allow(&pending.input, &pending.tool_use_id),
            PermissionDecision::AllowWithInput(input) => allow(&input, &pending.tool_use_id),
            PermissionDecision::AllowForSession => {
                let mut response = allow(&pending.input, &pending.tool_use_id);
                if let Some(suggestions) = pending.suggestions {
                    response["updatedPermissions"] = suggestions;
                }
                response
            }
            PermissionDecision::Deny { message } => {
                deny(message.as_deref().unwrap_or("The user denied this action."), &pending.tool_use_id)
            }
            PermissionDecision::Cancel => {
                let mut response = deny("The user denied this action and stopped the turn.", &pending.tool_use_id);
                response["interrupt"] = json!(true);
                response
            }
            _ => deny("The user denied this action.", &pending.tool_use_id),
        };
        self.reply(success(id, response), ctx);
        ctx.transcript.permission_resolved(id, approved)
    }

    /// The caller's answer to question `id` (`<request_id>/<n>`).
    pub(crate) fn answer_question(&mut self, id: &str, answer: QuestionAnswer, ctx: &mut Ctx<'_>) -> Result<(), AgentError> {
        let unknown = || AgentError::UnknownQuestion { id: id.to_string() };
        let (request_id, n) = id.rsplit_once('/').ok_or_else(unknown)?;
        let n: usize = n.parse().map_err(|_| unknown())?;
        if !ctx.transcript.has_pending_question(id) || !self.asks.contains_key(request_id) {
            return Err(unknown());
        }
        let request_id = request_id.to_string();
        match answer {
            QuestionAnswer::Text(text) => {
                ctx.transcript.question_resolved(id, Some(text.clone()))?;
                let ask = self.asks.get_mut(&request_id).ok_or_else(unknown)?;
                ask.answers.insert(n, text);
                if ask.answers.len() == ask.questions.len() {
                    let ask = self.asks.remove(&request_id).ok_or_else(unknown)?;
                    let answers: serde_json::Map<String, Value> =
                        ask.answers.iter().map(|(i, a)| (ask.questions[*i].clone(), Value::from(a.clone()))).collect();
                    let mut input = ask.input.clone();
                    input["answers"] = Value::Object(answers);
                    self.reply(success(&request_id, allow(&input, &ask.tool_use_id)), ctx);
                }
                Ok(())
            }
            _ => {
                let ask = self.asks.remove(&request_id).ok_or_else(unknown)?;
                self.reject_rest(&request_id, ask.questions.len(), ctx);
                self.reply(success(&request_id, deny("The user declined to answer.", &ask.tool_use_id)), ctx);
                Ok(())
            }
        }
    }

    fn reject_rest(&mut self, request_id: &str, count: usize, ctx: &mut Ctx<'_>) {
        for n in 0..count {
            let id = format!("{request_id}/{n}");
            if ctx.transcript.has_pending_question(&id) {
                let _ = ctx.transcript.question_resolved(&id, None);
            }
        }
    }

    /// The CLI withdrew one of its requests (for example after an interrupt).
    pub(crate) fn on_control_cancel(&mut self, message: &Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let request_id = message
            .get("request_id")
            .and_then(Value::as_str)
            .ok_or_else(|| Unparsed("a control_cancel_request has no `request_id`".into()))?;
        if self.permissions.remove(request_id).is_some() && ctx.transcript.has_pending_permission(request_id) {
            let _ = ctx.transcript.permission_resolved(request_id, false);
        }
        if let Some(ask) = self.asks.remove(request_id) {
            self.reject_rest(request_id, ask.questions.len(), ctx);
        }
        ctx.transcript.status("control_request_cancelled", None);
        Ok(())
    }

    /// A response from the CLI to one of our requests (`initialize`, `interrupt`).
    pub(crate) fn on_control_response(&mut self, message: &Value, ctx: &mut Ctx<'_>) -> Result<(), Unparsed> {
        let response = message
            .get("response")
            .filter(|r| r.is_object())
            .ok_or_else(|| Unparsed("a control_response has no `response` object".into()))?;
        if response.get("subtype").and_then(Value::as_str) == Some("error") {
            ctx.transcript.status("control_request_failed", short(response.get("error"), 200));
        }
        Ok(())
    }

    /// Replay: the recorded client's answer to a `can_use_tool` request resolves it.
    pub(crate) fn on_recorded_response(&mut self, message: &Value, ctx: &mut Ctx<'_>) {
        let Some(request_id) = message.pointer("/response/request_id").and_then(Value::as_str) else { return };
        let answer = message.pointer("/response/response");
        let approved = answer.and_then(|a| a.get("behavior")).and_then(Value::as_str) == Some("allow");
        if self.permissions.remove(request_id).is_some() && ctx.transcript.has_pending_permission(request_id) {
            let _ = ctx.transcript.permission_resolved(request_id, approved);
        }
        if let Some(ask) = self.asks.remove(request_id) {
            let answers = answer.and_then(|a| a.pointer("/updatedInput/answers"));
            for (n, question) in ask.questions.iter().enumerate() {
                let id = format!("{request_id}/{n}");
                let text = answers.and_then(|a| a.get(question)).and_then(Value::as_str).filter(|_| approved);
                if ctx.transcript.has_pending_question(&id) {
                    let _ = ctx.transcript.question_resolved(&id, text.map(str::to_string));
                }
            }
        }
    }
}
