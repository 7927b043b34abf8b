//! Server-to-client requests: approvals become permission events (an MCP tool-call approval too,
//! though Codex sends it as an elicitation), `request_user_input` and other MCP elicitations become
//! questions, and anything the backend cannot serve is answered with a JSON-RPC error at once, so
//! Codex never waits on a request nobody will answer.

use std::collections::{BTreeMap, HashMap};

use agent_api::kit::hitl::{Decided, Hitl, PermissionRequest, QuestionRequest};
use agent_api::kit::jsonrpc::{RpcPeer, METHOD_NOT_FOUND};
use agent_api::kit::transcript::Transcript;
use agent_api::request::ToolCategory;
use agent_api::universal::PermissionDetails;
use agent_api::{AgentError, PermissionDecision, PermissionPolicy, QuestionAnswer};
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
    /// `{action: accept|decline|cancel, content: null}`: an MCP tool-call approval, which Codex
    /// asks as an elicitation (`_meta.codex_approval_kind: mcp_tool_call`).
    Elicitation,
}

#[derive(Debug)]
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

/// Server requests waiting for the caller. The policy and the permission and question events are
/// `agent_api::kit::hitl`'s; a question's native context is (request key, the question's own id).
pub struct Requests {
    hitl: Hitl<PendingPermission, (String, String)>,
    inputs: HashMap<String, PendingInput>,
    /// The paths and diffs of each `fileChange` item in progress, for its approval request
    /// (which names only the item).
    file_changes: HashMap<String, Vec<(String, Option<String>)>>,
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
        Some(Value::String(s)) => json!(agent_api::kit::bounds::utf8_prefix(s, 2048)),
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
        Reply::Elicitation => json!({"action": match decision {
            PermissionDecision::Cancel => "cancel",
            d if d.is_approval() => "accept",
            _ => "decline",
        }, "content": null}),
        Reply::Permissions { requested } => {
            let granted = if decision.is_approval() {
                requested.clone()
            } else {
                json!({})
            };
            let scope = if *decision == PermissionDecision::AllowForSession {
                "session"
            } else {
                "turn"
            };
            json!({"permissions": granted, "scope": scope})
        }
    }
}

/// Whether an elicitation is Codex asking to approve an MCP tool call (not the server asking the
/// user for data).
fn is_tool_approval(params: &Value) -> bool {
    params
        .pointer("/_meta/codex_approval_kind")
        .and_then(Value::as_str)
        == Some("mcp_tool_call")
}

/// Whether a recorded or sent answer approved the request.
fn answer_approves(result: &Value) -> bool {
    if let Some(action) = result.get("action").and_then(Value::as_str) {
        return action == "accept";
    }
    match result.get("decision") {
        Some(Value::String(d)) => {
            matches!(
                d.as_str(),
                "accept"
                    | "acceptForSession"
                    | "approved"
                    | "approved_for_session"
                    | "approved_mcp_policy_amendment"
            )
        }
        Some(Value::Object(o)) => o
            .keys()
            .any(|k| k.starts_with("accept") || k.starts_with("approved")),
        _ => result
            .get("permissions")
            .is_some_and(|p| p.as_object().is_some_and(|o| !o.is_empty())),
    }
}

/// The files an `applyPatchApproval` is for, with their diffs (its own `fileChanges`).
fn patch_changes(params: &Value) -> Vec<(String, Option<String>)> {
    let Some(changes) = params.get("fileChanges").and_then(Value::as_object) else {
        return Vec::new();
    };
    let diff_of = |change: &Value| {
        let body = change
            .as_object()
            .and_then(|o| o.values().next())
            .unwrap_or(change);
        ["unified_diff", "content", "diff"]
            .iter()
            .find_map(|k| body.get(*k).and_then(Value::as_str))
            .map(str::to_string)
    };
    changes
        .iter()
        .map(|(path, change)| (path.clone(), diff_of(change)))
        .collect()
}

fn text(value: Option<&Value>) -> Option<String> {
    whole_text(value).map(|s| agent_api::kit::bounds::utf8_prefix(&s, 2048).to_string())
}

/// A string, or an argv's strings joined by spaces, whole: a command goes to
/// `PermissionDetails::command` uncut, which cuts it and says so (issue 46).
fn whole_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
}

impl Requests {
    /// Requests of a live run, decided by `policy` where it says so.
    pub fn live(policy: PermissionPolicy) -> Self {
        Self {
            hitl: Hitl::live(policy),
            inputs: HashMap::new(),
            file_changes: HashMap::new(),
        }
    }

    /// Requests of a replay: the recorded answers resolve them.
    pub fn replay() -> Self {
        Self {
            hitl: Hitl::replay(),
            inputs: HashMap::new(),
            file_changes: HashMap::new(),
        }
    }

    /// Decides the requests from now on by `policy`.
    pub fn set_policy(&mut self, policy: PermissionPolicy) {
        self.hitl.set_policy(policy);
    }

    /// A warm session switched to `mode`: the requests from now on are decided by `policy` as
    /// the mode has it ([`Hitl::switch_mode`]).
    pub fn switch_mode(
        &mut self,
        t: &mut Transcript,
        mode: &agent_api::request::AgentMode,
        policy: &PermissionPolicy,
    ) {
        self.hitl.switch_mode(t, mode, policy);
    }

    /// A `fileChange` item started (`started`) or ended: what its approval will show.
    pub fn note_file_change(&mut self, item: &Value, started: bool) {
        let Some(id) = item.get("id").and_then(Value::as_str) else {
            return;
        };
        if !started {
            self.file_changes.remove(id);
            return;
        }
        let changes = item
            .get("changes")
            .cloned()
            .and_then(|c| serde_json::from_value::<Vec<crate::schema::FileUpdateChange>>(c).ok());
        let changes = changes
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.path, c.diff))
            .collect();
        self.file_changes.insert(id.to_string(), changes);
    }

    /// Handles one server request; returns the messages to send now (the caller sends nothing in
    /// replay, where the recording holds the client's answers).
    pub fn on_request(
        &mut self,
        t: &mut Transcript,
        peer: &RpcPeer<super::Pending>,
        id: Value,
        method: &str,
        params: Value,
    ) -> Vec<Value> {
        let key = id_key(&id);
        let permission = |action: &str, category: ToolCategory, reply: Reply, metadata: Value| {
            let details = PermissionDetails::default()
                .call_id(text(params.get("itemId").or_else(|| params.get("callId"))))
                .command(whole_text(params.get("command")))
                .cwd(text(params.get("cwd")))
                .reason(text(params.get("reason")))
                .file(text(params.get("grantRoot")));
            (
                PermissionRequest::new(key.clone(), category, action)
                    .details(details)
                    .metadata(metadata),
                reply,
            )
        };
        let request = match method {
            "item/commandExecution/requestApproval" => {
                let network = params
                    .get("networkApprovalContext")
                    .is_some_and(|v| !v.is_null());
                let category = if network {
                    ToolCategory::Network
                } else {
                    ToolCategory::Shell
                };
                let meta = json!({"method": method});
                permission("command_execution", category, Reply::Decision, meta)
            }
            "item/fileChange/requestApproval" | "applyPatchApproval" => {
                let meta = json!({"method": method});
                let reply = if method == "applyPatchApproval" {
                    Reply::Review
                } else {
                    Reply::Decision
                };
                let (mut request, reply) =
                    permission("file_change", ToolCategory::FileWrite, reply, meta);
                // What will change: the paths and diffs of the change, so the approval shows them.
                let changes = match params.get("itemId").and_then(Value::as_str) {
                    Some(item) => self.file_changes.remove(item).unwrap_or_default(),
                    None => patch_changes(&params),
                };
                if !changes.is_empty() {
                    request.details = request.details.changes(
                        changes
                            .iter()
                            .map(|(path, diff)| (path.as_str(), diff.as_deref())),
                    );
                }
                (request, reply)
            }
            "item/permissions/requestApproval" => {
                let requested = params.get("permissions").cloned().unwrap_or(json!({}));
                let meta = json!({"method": method, "permissions": bounded(Some(&requested))});
                permission(
                    "permissions",
                    ToolCategory::Other,
                    Reply::Permissions { requested },
                    meta,
                )
            }
            "execCommandApproval" => {
                let meta = json!({"method": method});
                permission(
                    "command_execution",
                    ToolCategory::Shell,
                    Reply::Review,
                    meta,
                )
            }
            "item/tool/requestUserInput" => return self.user_input(t, peer, key, id, &params),
            "mcpServer/elicitation/request" if is_tool_approval(&params) => {
                let tool = text(params.pointer("/_meta/tool_name"));
                let server = text(params.get("serverName"));
                let meta = json!({"method": method, "server": server, "tool_params": bounded(params.pointer("/_meta/tool_params"))});
                let (request, reply) =
                    permission("mcp_tool_call", ToolCategory::Mcp, Reply::Elicitation, meta);
                let request = match (&server, &tool) {
                    (Some(server), Some(tool)) => request.tool_name(format!("{server}.{tool}")),
                    _ => request,
                };
                (request, reply)
            }
            "mcpServer/elicitation/request" => return self.elicitation(t, key, id, &params),
            "item/tool/call" => {
                // The backend registers no dynamic tools, so it can only report that it has none.
                t.status(
                    "dynamic_tool_call_refused",
                    params
                        .get("tool")
                        .and_then(Value::as_str)
                        .map(|s| agent_api::kit::bounds::utf8_prefix(s, 128).to_string()),
                );
                let result = json!({"contentItems": [{"type": "inputText", "text": "agent_api registers no dynamic tools"}], "success": false});
                return vec![peer.response(&id, result)];
            }
            "account/chatgptAuthTokens/refresh" | "attestation/generate" => {
                t.status("server_request_refused", Some(method.to_string()));
                return vec![peer.error_response(&id, NOT_SUPPORTED, "not supported by agent_api")];
            }
            other => {
                t.status(
                    "unknown_server_request",
                    Some(agent_api::kit::bounds::utf8_prefix(other, 128).to_string()),
                );
                return vec![peer.error_response(
                    &id,
                    METHOD_NOT_FOUND,
                    "method not handled by agent_api",
                )];
            }
        };
        let (request, reply) = request;
        let decided =
            self.hitl
                .request_permission(t, request, PendingPermission { rpc_id: id, reply });
        decided.map(|d| reply_to(peer, d)).into_iter().collect()
    }

    fn user_input(
        &mut self,
        t: &mut Transcript,
        peer: &RpcPeer<super::Pending>,
        key: String,
        id: Value,
        params: &Value,
    ) -> Vec<Value> {
        let questions = params
            .get("questions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let call_id = text(params.get("itemId"));
        let mut ids = Vec::new();
        for (i, q) in questions.iter().enumerate() {
            let qid = q
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| i.to_string());
            let question_id = format!("{key}/{qid}");
            let header = q.get("header").and_then(Value::as_str).unwrap_or("");
            let text = q.get("question").and_then(Value::as_str).unwrap_or("");
            let prompt = if header.is_empty() {
                text.to_string()
            } else {
                format!("{header}: {text}")
            };
            let options = q
                .get("options")
                .and_then(Value::as_array)
                .map(|o| {
                    o.iter()
                        .filter_map(|o| o.get("label").and_then(Value::as_str).map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let question =
                QuestionRequest::new(question_id.clone(), prompt, options).call_id(call_id.clone());
            self.hitl.request_question(t, question, (key.clone(), qid));
            ids.push(question_id);
        }
        self.inputs.insert(
            key.clone(),
            PendingInput {
                rpc_id: id,
                elicitation: false,
                question_ids: ids,
                answers: BTreeMap::new(),
            },
        );
        // A request without questions is answered at once rather than left hanging.
        self.maybe_answer(&key)
            .map(|m| envelope(peer, m))
            .into_iter()
            .collect()
    }

    fn elicitation(
        &mut self,
        t: &mut Transcript,
        key: String,
        id: Value,
        params: &Value,
    ) -> Vec<Value> {
        let message = params.get("message").and_then(Value::as_str).unwrap_or("");
        let server = params
            .get("serverName")
            .and_then(Value::as_str)
            .unwrap_or("mcp");
        let prompt = format!("{server}: {message}");
        let options = vec!["accept".into(), "decline".into(), "cancel".into()];
        self.hitl.request_question(
            t,
            QuestionRequest::new(key.clone(), prompt, options),
            (key.clone(), key.clone()),
        );
        self.inputs.insert(
            key.clone(),
            PendingInput {
                rpc_id: id,
                elicitation: true,
                question_ids: vec![key],
                answers: BTreeMap::new(),
            },
        );
        Vec::new()
    }

    /// The response to a request whose questions are all answered, built by the caller with the
    /// peer (kept peer-free here so replay can reuse the bookkeeping).
    fn maybe_answer(&mut self, key: &str) -> Option<Value> {
        let input = self.inputs.get(key)?;
        if input
            .question_ids
            .iter()
            .any(|q| self.hitl.question(q).is_some())
        {
            return None;
        }
        let input = self.inputs.remove(key)?;
        let result = if input.elicitation {
            let answer = input
                .answers
                .values()
                .next()
                .and_then(|a| a.first())
                .cloned();
            match answer.as_deref() {
                None | Some("decline") => json!({"action": "decline", "content": null}),
                Some("cancel") => json!({"action": "cancel", "content": null}),
                Some(text) => match serde_json::from_str::<Value>(text) {
                    Ok(content @ Value::Object(_)) => {
                        json!({"action": "accept", "content": content})
                    }
                    _ => json!({"action": "accept", "content": null}),
                },
            }
        } else {
            let answers: Map<String, Value> = input
                .answers
                .into_iter()
                .map(|(k, v)| (k, json!({"answers": v})))
                .collect();
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
        let decided = self.hitl.decide_permission(t, id, decision)?;
        Ok(vec![reply_to(peer, decided)])
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
        let answered = self.hitl.answer_question(t, id, answer)?;
        let (key, qid) = answered.native;
        let response = match answered.answer {
            QuestionAnswer::Text(text) => vec![text],
            _ => Vec::new(),
        };
        if let Some(input) = self.inputs.get_mut(&key) {
            input.answers.insert(qid, response);
        }
        Ok(self
            .maybe_answer(&key)
            .map(|m| envelope(peer, m))
            .into_iter()
            .collect())
    }

    /// A recorded client answer to a server request (replay): resolves what it answered.
    pub fn on_recorded_answer(&mut self, t: &mut Transcript, id: &Value, result: Option<&Value>) {
        let key = id_key(id);
        self.hitl
            .recorded_permission(t, &key, result.is_some_and(answer_approves));
        if let Some(input) = self.inputs.remove(&key) {
            for qid in input.question_ids {
                let Some((_, own)) = self.hitl.question(&qid).cloned() else {
                    continue;
                };
                let answer = result
                    .and_then(|r| {
                        r.pointer(&format!("/answers/{own}/answers/0"))
                            .or_else(|| r.get("action"))
                    })
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.hitl.recorded_answer(t, &qid, answer);
            }
        }
    }

    /// Whether anything waits for the caller.
    pub fn is_waiting(&self) -> bool {
        self.hitl.is_waiting() || !self.inputs.is_empty()
    }

    /// Cancel: answers every pending request (approvals `cancel`, questions without answers) so
    /// Codex is not left waiting while it interrupts the turn.
    pub fn cancel_all(&mut self, t: &mut Transcript, peer: &RpcPeer<super::Pending>) -> Vec<Value> {
        let mut out: Vec<Value> = self
            .hitl
            .cancel_permissions(t)
            .into_iter()
            .map(|d| reply_to(peer, d))
            .collect();
        for answered in self.hitl.cancel_questions(t) {
            let (key, qid) = answered.native;
            if let Some(input) = self.inputs.get_mut(&key) {
                input.answers.insert(qid, Vec::new());
            }
            out.extend(self.maybe_answer(&key).map(|m| envelope(peer, m)));
        }
        out
    }
}

/// The JSON-RPC response carrying a decision.
fn reply_to(peer: &RpcPeer<super::Pending>, decided: Decided<PendingPermission>) -> Value {
    peer.response(
        &decided.native.rpc_id,
        decision_value(&decided.native.reply, &decided.decision),
    )
}

fn envelope(peer: &RpcPeer<super::Pending>, message: Value) -> Value {
    peer.response(&message["id"], message["result"].clone())
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Requests").finish_non_exhaustive()
    }
}
