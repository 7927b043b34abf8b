//! Requests from the agent: `session/request_permission` through `agent_api::kit::hitl`, the
//! confined `fs/*` methods, and a JSON-RPC error for anything this client does not serve (it
//! advertises no terminal), so the agent never waits on a request nobody will answer.

use std::collections::HashMap;

use agent_api::kit::bounds::utf8_prefix;
use agent_api::kit::hitl::{Decided, Hitl, PermissionRequest, QuestionRequest, EXIT_PLAN_OPTIONS};
use agent_api::kit::jsonrpc::{RpcPeer, METHOD_NOT_FOUND};
use agent_api::kit::transcript::Transcript;
use agent_api::request::ToolCategory;
use agent_api::universal::PermissionDetails;
use agent_api::universal::ToolMeta;
use agent_api::{AgentError, PermissionDecision, PermissionPolicy, QuestionAnswer};
use agent_client_protocol_schema::{
    PermissionOption, PermissionOptionKind, ReadTextFileRequest, ReadTextFileResponse,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, ToolCallContent, ToolKind, WriteTextFileRequest,
    WriteTextFileResponse,
};
use serde_json::{json, Value};

use agent_api::kit::files::FileRefusal;

use crate::fs::{error_code, status_label, ConfinedFs};
use crate::permission_options::pick_option;
use crate::plan_exit::{self, ExitPlan};
use crate::rpc::{id_key, to_value, Pending};
use crate::updates::kind_name;

/// What a permission reply needs: the JSON-RPC id and the options the agent offered.
#[derive(Debug)]
pub(crate) struct PendingPermission {
    rpc_id: Value,
    options: Vec<PermissionOption>,
    tool_call_id: String,
}

/// How file-system requests are served.
#[derive(Debug, Clone)]
pub enum FsMode {
    /// Not advertised: any `fs/*` request is refused.
    Off,
    /// Served inside the root; `empty_on_missing`: a missing file reads as empty (for an agent that
    /// creates files only after such a read succeeds).
    Confined {
        /// The confinement.
        fs: ConfinedFs,
        /// Answer a read of a missing file (inside the root) with empty text.
        empty_on_missing: bool,
    },
    /// A replay: the recording holds the answers; nothing is touched.
    Recorded,
}

/// The requests of one run.
#[derive(Debug)]
pub struct Requests {
    /// Permissions, and plan mode's exit question (its native context the permission request
    /// it answers).
    hitl: Hitl<PendingPermission, PendingPermission>,
    fs: FsMode,
    /// How the agent asks to leave plan mode, when it says ([`Requests::with_exit_plan`]).
    exit_plan: Option<ExitPlan>,
    /// The caller's policy, which a mode changes ([`Requests::set_mode`]).
    policy: PermissionPolicy,
    /// Replay only: the options each recorded request offered and its tool call, to read the
    /// recorded answer.
    offered: HashMap<String, (Vec<PermissionOption>, String)>,
    /// Tool calls whose permission was refused since the last [`Requests::take_denied`].
    denied: Vec<String>,
}

/// The permission category of an ACP tool kind.
fn category(kind: ToolKind) -> ToolCategory {
    match kind {
        ToolKind::Execute => ToolCategory::Shell,
        ToolKind::Edit | ToolKind::Delete | ToolKind::Move => ToolCategory::FileWrite,
        ToolKind::Read | ToolKind::Search => ToolCategory::FileRead,
        ToolKind::Fetch => ToolCategory::Network,
        _ => ToolCategory::Other,
    }
}

fn reply(peer: &RpcPeer<Pending>, decided: Decided<PendingPermission>) -> Value {
    let outcome = match pick_option(&decided.native.options, &decided.decision) {
        Some(option) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
            option.option_id.clone(),
        )),
        None => RequestPermissionOutcome::Cancelled,
    };
    peer.response(
        &decided.native.rpc_id,
        to_value(&RequestPermissionResponse::new(outcome)),
    )
}

impl Requests {
    /// Requests of a live run under the caller's `policy` (a mode then changes it:
    /// [`Requests::set_mode`]), serving the file system as `fs` says.
    pub fn live(policy: PermissionPolicy, fs: FsMode) -> Self {
        Self {
            hitl: Hitl::live(policy.clone()),
            fs,
            exit_plan: None,
            policy,
            offered: HashMap::new(),
            denied: Vec::new(),
        }
    }

    /// Requests of a replay.
    pub fn replay() -> Self {
        let policy = PermissionPolicy::default();
        Self {
            hitl: Hitl::replay(),
            fs: FsMode::Recorded,
            exit_plan: None,
            policy,
            offered: HashMap::new(),
            denied: Vec::new(),
        }
    }

    /// The agent asks to leave plan mode as `exit_plan` says: that request becomes plan mode's
    /// exit question (`plan_exit`), not a permission.
    pub fn with_exit_plan(mut self, exit_plan: Option<ExitPlan>) -> Self {
        self.exit_plan = exit_plan;
        self
    }

    /// The session switched to `mode`: what the agent asks from now on is decided as it says.
    pub fn set_mode(&mut self, mode: &agent_api::request::AgentMode) {
        self.hitl.set_policy(agent_api::kit::hitl::policy_in_mode(
            Some(mode),
            &self.policy,
        ));
    }

    /// Whether the client advertises `fs/read_text_file` and `fs/write_text_file`.
    pub fn serves_fs(&self) -> bool {
        !matches!(self.fs, FsMode::Off)
    }

    /// Handles one agent request; returns the replies to send now.
    pub fn on_request(
        &mut self,
        t: &mut Transcript,
        peer: &RpcPeer<Pending>,
        id: Value,
        method: &str,
        params: Value,
    ) -> Vec<Value> {
        match method {
            "session/request_permission" => {
                match serde_json::from_value::<RequestPermissionRequest>(params) {
                    Ok(request) => self.permission(t, peer, id, request),
                    Err(_) => {
                        t.status("malformed_request", Some(method.to_string()));
                        vec![peer.error_response(&id, -32602, "invalid params")]
                    }
                }
            }
            "fs/read_text_file" | "fs/write_text_file" => {
                self.fs(t, peer, id, method, params).into_iter().collect()
            }
            other => {
                t.status(
                    "unknown_agent_request",
                    Some(utf8_prefix(other, 128).to_string()),
                );
                vec![peer.error_response(&id, METHOD_NOT_FOUND, "method not handled by agent_api")]
            }
        }
    }

    fn permission(
        &mut self,
        t: &mut Transcript,
        peer: &RpcPeer<Pending>,
        id: Value,
        request: RequestPermissionRequest,
    ) -> Vec<Value> {
        let fields = &request.tool_call.fields;
        if let Some(source) = self.exit_plan.and_then(|e| e.recognize(fields)) {
            let fs = match &self.fs {
                FsMode::Confined { fs, .. } => Some(fs),
                _ => None,
            };
            let plan = plan_exit::plan_text(source, fs);
            self.ask_exit_plan(t, id, request, &plan);
            return Vec::new();
        }
        let kind = fields.kind.unwrap_or_default();
        let title = fields.title.clone().unwrap_or_default();
        let path = fields
            .locations
            .as_ref()
            .and_then(|l| l.first())
            .map(|l| l.path.display().to_string());
        let mut details = PermissionDetails::default()
            .call_id(Some(request.tool_call.tool_call_id.0.as_ref()))
            .file(path);
        // A file change shows what it would write: the paths and diffs of its `diff` contents.
        let diffs: Vec<(String, String)> = fields
            .content
            .iter()
            .flatten()
            .filter_map(|content| match content {
                ToolCallContent::Diff(diff) => Some((
                    diff.path.display().to_string(),
                    agent_api::kit::transcript::replacement_diff(
                        diff.old_text.as_deref(),
                        &diff.new_text,
                    ),
                )),
                _ => None,
            })
            .collect();
        if !diffs.is_empty() {
            details = details.changes(
                diffs
                    .iter()
                    .map(|(path, diff)| (path.as_str(), Some(diff.as_str()))),
            );
        }
        if kind == ToolKind::Execute {
            // The command its tool call item names (`ToolMeta.command`), not a description of it.
            let shell = crate::updates::shell_fields(
                ToolMeta::default(),
                fields.raw_input.as_ref(),
                &title,
            );
            // The whole command (the item's is cut): the request says when it is cut, and by how much.
            let whole = match fields.raw_input.as_ref() {
                Some(input) => agent_api::kit::transcript::shell_fields(input).0,
                None => Some(title.clone()),
            };
            details = details.command(whole.or(shell.command)).cwd(shell.cwd);
        }
        let action = format!("{}: {}", kind_name(kind), utf8_prefix(&title, 256));
        let options: Vec<Value> = request
            .options
            .iter()
            .map(|o| json!({"option_id": o.option_id.0.as_ref(), "kind": to_value(&o.kind)}))
            .collect();
        let metadata = json!({"options": options});
        let native = PermissionRequest::new(id_key(&id), category(kind), action)
            .tool_name(kind_name(kind))
            .details(details)
            .metadata(metadata);
        let tool_call_id = request.tool_call.tool_call_id.0.to_string();
        if matches!(self.fs, FsMode::Recorded) {
            self.offered
                .insert(id_key(&id), (request.options.clone(), tool_call_id.clone()));
        }
        let pending = PendingPermission {
            rpc_id: id,
            options: request.options,
            tool_call_id,
        };
        self.hitl
            .request_permission(t, native, pending)
            .map(|d| self.answer(peer, d))
            .into_iter()
            .collect()
    }

    /// Plan mode's exit as its typed question; the reply waits for the caller's answer.
    fn ask_exit_plan(
        &mut self,
        t: &mut Transcript,
        id: Value,
        request: RequestPermissionRequest,
        plan: &str,
    ) {
        let tool_call_id = request.tool_call.tool_call_id.0.to_string();
        let question =
            QuestionRequest::exit_plan(id_key(&id), plan).call_id(Some(tool_call_id.clone()));
        if matches!(self.fs, FsMode::Recorded) {
            self.offered
                .insert(id_key(&id), (request.options.clone(), tool_call_id.clone()));
        }
        self.hitl.request_question(
            t,
            question,
            PendingPermission {
                rpc_id: id,
                options: request.options,
                tool_call_id,
            },
        );
    }

    /// The caller's answer to plan mode's exit question `id`: the agent's option that leaves plan
    /// mode for the first answer, its rejection (it stays in plan mode) for any other.
    pub fn answer_exit_plan(
        &mut self,
        t: &mut Transcript,
        peer: &RpcPeer<Pending>,
        id: &str,
        answer: QuestionAnswer,
    ) -> Result<Value, AgentError> {
        let answered = self.hitl.answer_question(t, id, answer)?;
        Ok(self.exit_plan_reply(peer, answered.native, plan_exit::approves(&answered.answer)))
    }

    fn exit_plan_reply(
        &mut self,
        peer: &RpcPeer<Pending>,
        pending: PendingPermission,
        approved: bool,
    ) -> Value {
        if !approved {
            self.denied.push(pending.tool_call_id.clone());
        }
        let outcome = match plan_exit::option(&pending.options, approved) {
            Some(option) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                option.option_id.clone(),
            )),
            None => RequestPermissionOutcome::Cancelled,
        };
        peer.response(
            &pending.rpc_id,
            to_value(&RequestPermissionResponse::new(outcome)),
        )
    }

    /// The reply to a decided permission; a refused tool call is noted for [`Requests::take_denied`].
    fn answer(&mut self, peer: &RpcPeer<Pending>, decided: Decided<PendingPermission>) -> Value {
        if !decided.decision.is_approval() {
            self.denied.push(decided.native.tool_call_id.clone());
        }
        reply(peer, decided)
    }

    /// The tool calls refused since the last call: they will not run (an agent may send no update
    /// for them), so their results end now.
    pub fn take_denied(&mut self) -> Vec<String> {
        std::mem::take(&mut self.denied)
    }

    /// The caller's decision on permission `id`.
    pub fn decide(
        &mut self,
        t: &mut Transcript,
        peer: &RpcPeer<Pending>,
        id: &str,
        decision: PermissionDecision,
    ) -> Result<Value, AgentError> {
        let decided = self.hitl.decide_permission(t, id, decision)?;
        Ok(self.answer(peer, decided))
    }

    /// The run stops: every pending request is answered `cancelled` (an exit question too).
    pub fn cancel_all(&mut self, t: &mut Transcript, peer: &RpcPeer<Pending>) -> Vec<Value> {
        let mut replies: Vec<Value> = self
            .hitl
            .cancel_permissions(t)
            .into_iter()
            .map(|d| reply(peer, d))
            .collect();
        for answered in self.hitl.cancel_questions(t) {
            let cancelled = RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled);
            replies.push(peer.response(&answered.native.rpc_id, to_value(&cancelled)));
        }
        replies
    }

    /// Replay: the recorded client answered request `id` with `result` (`None`: an error).
    pub fn on_recorded_answer(&mut self, t: &mut Transcript, id: &Value, result: Option<&Value>) {
        let Some(result) = result else { return };
        let Ok(response) = serde_json::from_value::<RequestPermissionResponse>(result.clone())
        else {
            return;
        };
        let key = id_key(id);
        let Some((options, tool_call_id)) = self.offered.remove(&key) else {
            return;
        };
        let approved = match &response.outcome {
            RequestPermissionOutcome::Selected(s) => options.iter().any(|o| {
                o.option_id == s.option_id
                    && matches!(
                        o.kind,
                        PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
                    )
            }),
            _ => false,
        };
        if self.hitl.question(&key).is_some() {
            self.hitl.recorded_answer(
                t,
                &key,
                Some(EXIT_PLAN_OPTIONS[usize::from(!approved)].to_string()),
            );
        } else {
            self.hitl.recorded_permission(t, &key, approved);
        }
        if !approved {
            self.denied.push(tool_call_id);
        }
    }

    fn fs(
        &mut self,
        t: &mut Transcript,
        peer: &RpcPeer<Pending>,
        id: Value,
        method: &str,
        params: Value,
    ) -> Option<Value> {
        let (fs, empty_on_missing) = match &self.fs {
            FsMode::Recorded => {
                let path = params
                    .get("path")
                    .and_then(Value::as_str)
                    .map(|p| utf8_prefix(p, 512).to_string());
                t.status(method.replace('/', "_"), path);
                return None;
            }
            FsMode::Off => {
                t.status(
                    "fs_refused",
                    Some("the client does not serve the file system".into()),
                );
                return Some(peer.error_response(
                    &id,
                    METHOD_NOT_FOUND,
                    "file system not offered by this client",
                ));
            }
            FsMode::Confined {
                fs,
                empty_on_missing,
            } => (fs, *empty_on_missing),
        };
        // The path as the agent asked, for the status event of a refusal (bounded; shown inert).
        let asked = params
            .get("path")
            .and_then(Value::as_str)
            .map(|p| utf8_prefix(p, 512).to_string())
            .unwrap_or_default();
        let result = if method == "fs/read_text_file" {
            serde_json::from_value::<ReadTextFileRequest>(params)
                .map_err(|_| None)
                .and_then(|r| match fs.read(&r) {
                    Ok(text) => Ok(to_value(&ReadTextFileResponse::new(text))),
                    Err(FileRefusal::NotFound) if empty_on_missing => {
                        Ok(to_value(&ReadTextFileResponse::new("")))
                    }
                    Err(e) => Err(Some(e)),
                })
        } else {
            serde_json::from_value::<WriteTextFileRequest>(params)
                .map_err(|_| None)
                .and_then(|r| match fs.write(&r) {
                    Ok(path) => {
                        t.status(
                            "fs_write",
                            Some(utf8_prefix(&path.display().to_string(), 512).to_string()),
                        );
                        Ok(to_value(&WriteTextFileResponse::new()))
                    }
                    Err(e) => Err(Some(e)),
                })
        };
        Some(match result {
            Ok(value) => peer.response(&id, value),
            Err(None) => {
                t.status("malformed_request", Some(method.to_string()));
                peer.error_response(&id, -32602, "invalid params")
            }
            Err(Some(refusal)) => {
                t.status(
                    status_label(&refusal),
                    Some(format!("{method} {asked}: {refusal}")),
                );
                peer.error_response(&id, error_code(&refusal), &refusal.to_string())
            }
        })
    }
}
