//! Server-to-client requests: approvals become permission events, `request_user_input` and MCP
//! elicitations become questions, and anything the backend cannot serve is answered with a
//! JSON-RPC error at once, so Codex never waits on a request nobody will answer.

use std::collections::{BTreeMap, HashMap};

use agent_api::kit::jsonrpc::{RpcPeer, METHOD_NOT_FOUND};
use agent_api::universal::Transcript;
use agent_api::{AgentError, PermissionDecision, PermissionPolicy, PermissionRule, QuestionAnswer, ToolCategory};
use serde_json::{json, Map, Value};

/// JSON-RPC error code for a request the client understands but will not serve.
const NOT_SUPPORTED: i64 = -32000;

/// How a permission request is answered.
#[derive(Debug, Clone)]
enum Reply {
    /// `{decision: accept|acceptForSession|decline|cancel}` (v2 command and file approvals).
    Decision,
    /// `{permissions, scope}`: grant what was requested, or nothing.
    Permissions { requested: Value },
    /// `{decision: approved|approved_for_session|denied|abort}` (v1 approvals).
    Review,
}

struct PendingPermission {
    rpc_id: Value,
    reply: Reply,
}

/// One `request_user_input` (several questions, one answer) or one MCP elicitation.
struct PendingInput {
    rpc_id: Value,
    elicitation: bool,
    question_ids: Vec<String>,
    answers: BTreeMap<String, Vec<String>>,
}

/// Server requests waiting for the caller.
#[derive(Default)]
pub struct Requests {
    permissions: HashMap<String, PendingPermission>,
    /// question id → (request key, the question's own id).
    questions: HashMap<String, (String, String)>,
    inputs: HashMap<String, PendingInput>,
}

/// The key of a JSON-RPC id (`0` and `"0"` alike).
pub fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn bounded(value: Option<&Value>) -> Value {
    match value {
        Some(Value::String(s)) => json!(agent_api::bounds::utf8_prefix(s, 2048)),
        Some(v) if v.to_string().len() <= 4096 => v.clone(),
        Some(_) => json!({"dropped": {"reason": "oversize"}}),
        None => Value::Null,
    }
}

fn decision_value(reply: &Reply, decision: &PermissionDecision) -> Value {
    match reply {
        Reply::Decision => json!({"decision": match decision {
            PermissionDecision::AllowForSession => "acceptForSession",
            PermissionDecision::Cancel => "cancel",
            d if d.is_approval() => "accept",
            _ => "decline",
        }}),
        Reply::Review => json!({"decision": match decision {
            PermissionDecision::AllowForSession => "approved_for_session",
            PermissionDecision::Cancel => "abort",
            d if d.is_approval() => "approved",
            _ => "denied",
        }}),
        Reply::Permissions { requested } => {
            let granted = if decision.is_approval() { requested.clone() } else { json!({}) };
            let scope = if *decision == PermissionDecision::AllowForSession { "session" } else { "turn" };
            json!({"permissions": granted, "scope": scope})
        }
    }
}

/// Whether a recorded or sent answer approved the request.
fn answer_approves(result: &Value) -> bool {
    match result.get("decision") {
        Some(Value::String(d)) => {
            matches!(d.as_str(), "accept" | "acceptForSession" | "approved" | "approved_for_session" | "approved_mcp_policy_amendment")
        }
        Some(Value::Object(o)) => o.keys().any(|k| k.starts_with("accept") || k.starts_with("approved")),
        _ => result.get("permissions").is_some_and(|p| p.as_object().is_some_and(|o| !o.is_empty())),
    }
}

impl Requests {
    /// Handles one server request; returns the messages to send now (the caller sends nothing in
    /// replay, where the recording holds the client's answers). `auto` is the policy the backend
    /// answers approvals with itself; `None` in replay.
    pub fn on_request(
        &mut self,
        t: &mut Transcript,
        peer: &RpcPeer<super::Pending>,
        auto: Option<&PermissionPolicy>,
        id: Value,
        method: &str,
        params: Value,
    ) -> Vec<Value> {
        let key = id_key(&id);
        let permission =
            |action: &str, category: ToolCategory, reply: Reply, metadata: Value| (action.to_string(), category, reply, metadata);
        let request = match method {
            "item/commandExecution/requestApproval" => {
                let network = params.get("networkApprovalContext").is_some_and(|v| !v.is_null());
                let category = if network { ToolCategory::Network } else { ToolCategory::Shell };
                let meta = json!({"method": method, "item_id": params.get("itemId"), "command": bounded(params.get("command")), "cwd": bounded(params.get("cwd")), "reason": bounded(params.get("reason"))});
                permission("command_execution", category, Reply::Decision, meta)
            }
            "item/fileChange/requestApproval" => {
                let meta = json!({"method": method, "item_id": params.get("itemId"), "reason": bounded(params.get("reason")), "grant_root": bounded(params.get("grantRoot"))});
                permission("file_change", ToolCategory::FileWrite, Reply::Decision, meta)
            }
            "item/permissions/requestApproval" => {
                let requested = params.get("permissions").cloned().unwrap_or(json!({}));
                let meta = json!({"method": method, "item_id": params.get("itemId"), "reason": bounded(params.get("reason")), "permissions": bounded(Some(&requested))});
                permission("permissions", ToolCategory::Other, Reply::Permissions { requested }, meta)
            }
            "execCommandApproval" => {
                let meta = json!({"method": method, "item_id": params.get("callId"), "command": bounded(params.get("command")), "cwd": bounded(params.get("cwd"))});
                permission("command_execution", ToolCategory::Shell, Reply::Review, meta)
            }
            "applyPatchApproval" => {
                let meta = json!({"method": method, "item_id": params.get("callId"), "reason": bounded(params.get("reason"))});
                permission("file_change", ToolCategory::FileWrite, Reply::Review, meta)
            }
            "item/tool/requestUserInput" => return self.user_input(t, peer, key, id, &params),
            "mcpServer/elicitation/request" => return self.elicitation(t, key, id, &params),
            "item/tool/call" => {
                // The backend registers no dynamic tools, so it can only report that it has none.
                t.status(
                    "dynamic_tool_call_refused",
                    params.get("tool").and_then(Value::as_str).map(|s| agent_api::bounds::utf8_prefix(s, 128).to_string()),
                );
                let result =
                    json!({"contentItems": [{"type": "inputText", "text": "agent_api registers no dynamic tools"}], "success": false});
                return vec![peer.response(&id, result)];
            }
            "account/chatgptAuthTokens/refresh" | "attestation/generate" => {
                t.status("server_request_refused", Some(method.to_string()));
                return vec![peer.error_response(&id, NOT_SUPPORTED, "not supported by agent_api")];
            }
            other => {
                t.status("unknown_server_request", Some(agent_api::bounds::utf8_prefix(other, 128).to_string()));
                return vec![peer.error_response(&id, METHOD_NOT_FOUND, "method not handled by agent_api")];
            }
        };
        let (action, category, reply, metadata) = request;
        t.permission_requested(key.clone(), action, Some(metadata));
        let rule = auto.map_or(PermissionRule::Ask, |p| p.rule(category));
        self.permissions.insert(key.clone(), PendingPermission { rpc_id: id, reply });
        let auto = match rule {
            PermissionRule::Ask => return Vec::new(),
            PermissionRule::Approve => PermissionDecision::Allow,
            PermissionRule::Deny => PermissionDecision::Deny { message: None },
        };
        self.decide_permission(t, peer, &key, auto).unwrap_or_default()
    }

    fn user_input(&mut self, t: &mut Transcript, peer: &RpcPeer<super::Pending>, key: String, id: Value, params: &Value) -> Vec<Value> {
        let questions = params.get("questions").and_then(Value::as_array).cloned().unwrap_or_default();
        let mut ids = Vec::new();
        for (i, q) in questions.iter().enumerate() {
            let qid = q.get("id").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| i.to_string());
            let question_id = format!("{key}/{qid}");
            let header = q.get("header").and_then(Value::as_str).unwrap_or("");
            let text = q.get("question").and_then(Value::as_str).unwrap_or("");
            let prompt = if header.is_empty() { text.to_string() } else { format!("{header}: {text}") };
            let options = q
                .get("options")
                .and_then(Value::as_array)
                .map(|o| o.iter().filter_map(|o| o.get("label").and_then(Value::as_str).map(str::to_string)).collect())
                .unwrap_or_default();
            t.question_requested(question_id.clone(), prompt, options);
            self.questions.insert(question_id.clone(), (key.clone(), qid));
            ids.push(question_id);
        }
        self.inputs.insert(key.clone(), PendingInput { rpc_id: id, elicitation: false, question_ids: ids, answers: BTreeMap::new() });
        // A request without questions is answered at once rather than left hanging.
        self.maybe_answer(&key).map(|m| envelope(peer, m)).into_iter().collect()
    }

    fn elicitation(&mut self, t: &mut Transcript, key: String, id: Value, params: &Value) -> Vec<Value> {
        let message = params.get("message").and_then(Value::as_str).unwrap_or("");
        let server = params.get("serverName").and_then(Value::as_str).unwrap_or("mcp");
        let prompt = format!("{server}: {message}");
        t.question_requested(key.clone(), prompt, vec!["accept".into(), "decline".into(), "cancel".into()]);
        self.questions.insert(key.clone(), (key.clone(), key.clone()));
        self.inputs.insert(key.clone(), PendingInput { rpc_id: id, elicitation: true, question_ids: vec![key], answers: BTreeMap::new() });
        Vec::new()
    }

    /// The response to a request whose questions are all answered, built by the caller with the
    /// peer (kept peer-free here so replay can reuse the bookkeeping).
    fn maybe_answer(&mut self, key: &str) -> Option<Value> {
        let input = self.inputs.get(key)?;
        if input.question_ids.iter().any(|q| self.questions.contains_key(q)) {
            return None;
        }
        let input = self.inputs.remove(key)?;
        let result = if input.elicitation {
            let answer = input.answers.values().next().and_then(|a| a.first()).cloned();
            match answer.as_deref() {
                None | Some("decline") => json!({"action": "decline", "content": null}),
                Some("cancel") => json!({"action": "cancel", "content": null}),
                Some(text) => match serde_json::from_str::<Value>(text) {
                    Ok(content @ Value::Object(_)) => json!({"action": "accept", "content": content}),
                    _ => json!({"action": "accept", "content": null}),
                },
            }
        } else {
            let answers: Map<String, Value> = input.answers.into_iter().map(|(k, v)| (k, json!({"answers": v}))).collect();
            json!({"answers": answers})
        };
        Some(json!({"id": input.rpc_id, "result": result}))
    }

    /// Decides a pending permission; returns the response to send.
    pub fn decide_permission(
        &mut self,
        t: &mut Transcript,
        peer: &RpcPeer<super::Pending>,
        id: &str,
        decision: PermissionDecision,
    ) -> Result<Vec<Value>, AgentError> {
        let pending = self.permissions.remove(id).ok_or_else(|| AgentError::UnknownPermission { id: id.to_string() })?;
        let response = peer.response(&pending.rpc_id, decision_value(&pending.reply, &decision));
        t.permission_resolved(id, decision.is_approval())?;
        Ok(vec![response])
    }

    /// Answers a pending question; returns the response to send once every question of its
    /// request has an answer.
    pub fn answer_question(
        &mut self,
        t: &mut Transcript,
        peer: &RpcPeer<super::Pending>,
        id: &str,
        answer: QuestionAnswer,
    ) -> Result<Vec<Value>, AgentError> {
        let (key, qid) = self.questions.remove(id).ok_or_else(|| AgentError::UnknownQuestion { id: id.to_string() })?;
        let response = match &answer {
            QuestionAnswer::Text(text) => Some(text.clone()),
            _ => None,
        };
        if let Some(input) = self.inputs.get_mut(&key) {
            input.answers.insert(qid, response.iter().cloned().collect());
        }
        t.question_resolved(id, response)?;
        Ok(self.maybe_answer(&key).map(|m| envelope(peer, m)).into_iter().collect())
    }

    /// A recorded client answer to a server request (replay): resolves what it answered.
    pub fn on_recorded_answer(&mut self, t: &mut Transcript, id: &Value, result: Option<&Value>) {
        let key = id_key(id);
        if self.permissions.remove(&key).is_some() {
            let _ = t.permission_resolved(&key, result.is_some_and(answer_approves));
        }
        if let Some(input) = self.inputs.remove(&key) {
            for qid in input.question_ids {
                if let Some((_, own)) = self.questions.remove(&qid) {
                    let answer = result
                        .and_then(|r| r.pointer(&format!("/answers/{own}/answers/0")).or_else(|| r.get("action")))
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    let _ = t.question_resolved(&qid, answer);
                }
            }
        }
    }

    /// Whether anything waits for the caller.
    pub fn is_waiting(&self) -> bool {
        !self.permissions.is_empty() || !self.inputs.is_empty()
    }

    /// Cancel: answers every pending request (approvals `cancel`, questions without answers) so
    /// Codex is not left waiting while it interrupts the turn.
    pub fn cancel_all(&mut self, t: &mut Transcript, peer: &RpcPeer<super::Pending>) -> Vec<Value> {
        let mut out = Vec::new();
        let mut ids: Vec<String> = self.permissions.keys().cloned().collect();
        ids.sort();
        for id in ids {
            out.extend(self.decide_permission(t, peer, &id, PermissionDecision::Cancel).unwrap_or_default());
        }
        let mut questions: Vec<String> = self.questions.keys().cloned().collect();
        questions.sort();
        for id in questions {
            out.extend(self.answer_question(t, peer, &id, QuestionAnswer::Reject).unwrap_or_default());
        }
        out
    }
}

fn envelope(peer: &RpcPeer<super::Pending>, message: Value) -> Value {
    peer.response(&message["id"], message["result"].clone())
}
