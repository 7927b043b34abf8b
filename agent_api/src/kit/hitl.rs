//! Permissions and questions, decided the same way for every backend.
//!
//! A backend turns each native request into a [`PermissionRequest`] or [`QuestionRequest`] plus
//! whatever it needs to answer the agent later (its *native context*, `P` or `Q`), and turns each
//! [`Decided`] / [`Answered`] this module hands back into its native reply. Everything else lives
//! here: the run's [`PermissionPolicy`] (ask the caller, approve, deny, by category), the checks
//! on the caller's answers (unknown id, already resolved), and the transcript: every request gets
//! `permission.requested` (or `question.requested`) and then exactly one resolved event saying
//! who decided ([`DecidedBy`]), whatever the policy.
//!
//! Questions are never decided by the permission policy: only the caller can answer one.
//!
//! ```
//! use agent_api::kit::hitl::{Hitl, PermissionRequest};
//! use agent_api::universal::DecidedBy;
//! use agent_api::kit::transcript::Transcript;
//! use agent_api::PermissionPolicy;
//! use agent_api::request::ToolCategory;
//! let mut t = Transcript::new("sess_1".into(), false);
//! let mut hitl: Hitl<&str, ()> = Hitl::live(PermissionPolicy::ApproveAll);
//! let request = PermissionRequest::new("req_1", ToolCategory::Shell, "Bash: ls");
//! let decided = hitl.request_permission(&mut t, request, "native reply context").expect("the policy decides");
//! assert!(decided.decision.is_approval());
//! assert_eq!((decided.native, decided.by), ("native reply context", DecidedBy::Policy));
//! let types: Vec<_> = t.drain().map(|e| e.type_name()).collect();
//! assert_eq!(types, ["session.started", "permission.requested", "permission.resolved"]);
//! ```

pub mod pre_approved;

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::pipeline::transcript::Transcript;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::request::{PermissionPolicy, PermissionRule};
use crate::vocabulary::run::{PermissionDecision, QuestionAnswer};
use crate::vocabulary::tools_facet::ToolCategory;
use crate::vocabulary::universal::PermissionDetails;
use crate::vocabulary::universal::{DecidedBy, PermissionEventData, QuestionEventData};

/// One permission request, as a backend describes it to the kit.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PermissionRequest {
    /// The id the caller answers with (unique in the run).
    pub id: String,
    /// The category the policy decides by.
    pub category: ToolCategory,
    /// A short, safe summary of the action (tool and command or file).
    pub action: String,
    /// The agent's tool name, when there is one.
    pub tool_name: Option<String>,
    /// The typed details: the tool call it is for, command, directory, file, reason.
    pub details: PermissionDetails,
    /// More context for the event's `metadata`.
    pub metadata: Option<Value>,
}

impl PermissionRequest {
    /// A request with no tool name, details or metadata.
    pub fn new(id: impl Into<String>, category: ToolCategory, action: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            category,
            action: action.into(),
            tool_name: None,
            details: PermissionDetails::default(),
            metadata: None,
        }
    }

    /// Sets the tool name.
    pub fn tool_name(mut self, name: impl Into<String>) -> Self {
        self.tool_name = Some(name.into());
        self
    }

    /// Sets the typed details.
    pub fn details(mut self, details: PermissionDetails) -> Self {
        self.details = details;
        self
    }

    /// Sets the extra metadata (an object).
    pub fn metadata(mut self, metadata: Value) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// The `permission.requested` event's data.
    fn event_data(&self) -> PermissionEventData {
        let mut data = PermissionEventData::requested(self.id.clone(), self.action.clone());
        data.category = Some(self.category);
        data.tool_name = self.tool_name.clone();
        data.details = self.details.clone();
        data.metadata = self.metadata.clone();
        data
    }
}

/// One question, as a backend describes it to the kit.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuestionRequest {
    /// The id the caller answers with (unique in the run).
    pub id: String,
    /// The question.
    pub prompt: String,
    /// The offered answers (empty for free text).
    pub options: Vec<String>,
    /// The id of the tool call that asks it, where the agent asks through a tool.
    pub call_id: Option<String>,
}

impl QuestionRequest {
    /// A question with its offered answers.
    pub fn new(id: impl Into<String>, prompt: impl Into<String>, options: Vec<String>) -> Self {
        Self {
            id: id.into(),
            prompt: prompt.into(),
            options,
            call_id: None,
        }
    }

    /// Sets the id of the tool call that asks it.
    pub fn call_id(mut self, call_id: Option<impl Into<String>>) -> Self {
        self.call_id = call_id.map(Into::into);
        self
    }

    /// Plan mode's exit as every backend asks it (whatever the agent's tool for it, such as
    /// `ExitPlanMode` or `exit_plan_mode`): one question whose text holds `plan` (cut to 8 KiB,
    /// shown as inert text), answered with one of [`EXIT_PLAN_OPTIONS`].
    pub fn exit_plan(id: impl Into<String>, plan: &str) -> Self {
        let plan = crate::guards::bounds::utf8_prefix(plan, 8192);
        Self::new(
            id,
            format!("Leave plan mode and carry out this plan?\n\n{plan}"),
            EXIT_PLAN_OPTIONS.map(str::to_string).to_vec(),
        )
    }
}

/// The options of plan mode's exit question ([`QuestionRequest::exit_plan`]), the same for every
/// agent: the first approves the plan (the agent leaves plan mode for its default mode); any
/// other answer keeps planning (an agent that takes feedback gets a free text answer as such).
pub const EXIT_PLAN_OPTIONS: [&str; 2] = [
    "Yes, leave plan mode and carry out the plan",
    "No, keep planning",
];

/// A permission decision for the backend to send to the agent.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Decided<P> {
    /// The request's id.
    pub id: String,
    /// The backend's native context of the request.
    pub native: P,
    /// The decision.
    pub decision: PermissionDecision,
    /// Who decided.
    pub by: DecidedBy,
}

/// An answer for the backend to send to the agent.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Answered<Q> {
    /// The question's id.
    pub id: String,
    /// The backend's native context of the question.
    pub native: Q,
    /// The answer.
    pub answer: QuestionAnswer,
    /// Who decided.
    pub by: DecidedBy,
}

/// The permission and question requests of one run, and the policy that decides them.
///
/// `P` and `Q` are the backend's native contexts (what it needs to reply to the agent).
#[derive(Debug)]
pub struct Hitl<P, Q> {
    /// `None` in a replay: the recording says how each request was answered.
    policy: Option<PermissionPolicy>,
    permissions: HashMap<String, P>,
    questions: HashMap<String, Q>,
    resolved: HashSet<String>,
}

impl<P, Q> Hitl<P, Q> {
    /// A live run under `policy`.
    pub fn live(policy: PermissionPolicy) -> Self {
        Self {
            policy: Some(policy),
            permissions: HashMap::new(),
            questions: HashMap::new(),
            resolved: HashSet::new(),
        }
    }

    /// A replay: no policy; requests wait for the recorded answers ([`Hitl::recorded_permission`],
    /// [`Hitl::recorded_answer`]).
    pub fn replay() -> Self {
        Self {
            policy: None,
            permissions: HashMap::new(),
            questions: HashMap::new(),
            resolved: HashSet::new(),
        }
    }

    /// Decides the requests still to come by `policy` (a session switching modes:
    /// [`policy_in_mode`]); a replay stays without one.
    pub fn set_policy(&mut self, policy: PermissionPolicy) {
        if self.policy.is_some() {
            self.policy = Some(policy);
        }
    }

    /// A session switched to `mode`: the requests still to come are decided by `policy` as the
    /// mode has it ([`policy_in_mode`]: plan denies writes), and `t` records `mode_changed`.
    pub fn switch_mode(
        &mut self,
        t: &mut Transcript,
        mode: &crate::vocabulary::modes::AgentMode,
        policy: &PermissionPolicy,
    ) {
        self.set_policy(policy_in_mode(Some(mode), policy));
        t.daemon_status("mode_changed", Some(mode.as_str().to_string()));
    }

    /// The agent asks for a permission. Records `permission.requested`; when the policy decides
    /// it, records `permission.resolved` at once and returns the decision to send. Otherwise it
    /// waits for the caller ([`Hitl::decide_permission`]) and `None` is returned.
    pub fn request_permission(
        &mut self,
        t: &mut Transcript,
        request: PermissionRequest,
        native: P,
    ) -> Option<Decided<P>> {
        t.record_permission_request(request.event_data());
        let decision = match self.policy.as_ref().map(|p| p.rule(request.category)) {
            Some(PermissionRule::Approve) => PermissionDecision::Allow,
            Some(PermissionRule::Deny) => PermissionDecision::Deny {
                message: Some("Denied by the run's permission policy.".into()),
            },
            _ => {
                t.daemon_status(
                    "waiting_for_caller",
                    Some(format!("permission {}", request.id)),
                );
                self.permissions.insert(request.id, native);
                return None;
            }
        };
        Some(self.resolve_permission(t, request.id, native, decision, DecidedBy::Policy))
    }

    /// The caller's decision on permission `id`.
    pub fn decide_permission(
        &mut self,
        t: &mut Transcript,
        id: &str,
        decision: PermissionDecision,
    ) -> Result<Decided<P>, AgentError> {
        let native = self
            .permissions
            .remove(id)
            .ok_or_else(|| self.unknown(id, true))?;
        let by = t.control_decider();
        Ok(self.resolve_permission(t, id.to_string(), native, decision, by))
    }

    /// Replay: the recorded client answered permission `id`. Returns its native context.
    pub fn recorded_permission(
        &mut self,
        t: &mut Transcript,
        id: &str,
        approved: bool,
    ) -> Option<P> {
        let native = self.permissions.remove(id)?;
        let decision = if approved {
            PermissionDecision::Allow
        } else {
            PermissionDecision::Deny { message: None }
        };
        Some(
            self.resolve_permission(t, id.to_string(), native, decision, DecidedBy::Caller)
                .native,
        )
    }

    /// The agent withdrew permission request `id`: it resolves as denied, decided by nobody
    /// ([`DecidedBy::Cancel`]). Returns its native context, if it was pending.
    pub fn withdraw_permission(&mut self, t: &mut Transcript, id: &str) -> Option<P> {
        let native = self.permissions.remove(id)?;
        Some(
            self.resolve_permission(
                t,
                id.to_string(),
                native,
                PermissionDecision::Cancel,
                DecidedBy::Cancel,
            )
            .native,
        )
    }

    /// The run stops (cancel or timeout, see [`Transcript::stop_cause`]): every pending permission
    /// resolves as [`PermissionDecision::Cancel`]; the backend sends each reply, oldest id first.
    pub fn cancel_permissions(&mut self, t: &mut Transcript) -> Vec<Decided<P>> {
        let by = t.stop_cause();
        let mut ids: Vec<String> = self.permissions.keys().cloned().collect();
        ids.sort();
        ids.into_iter()
            .filter_map(|id| {
                let native = self.permissions.remove(&id)?;
                Some(self.resolve_permission(t, id, native, PermissionDecision::Cancel, by))
            })
            .collect()
    }

    fn resolve_permission(
        &mut self,
        t: &mut Transcript,
        id: String,
        native: P,
        decision: PermissionDecision,
        by: DecidedBy,
    ) -> Decided<P> {
        // The transcript already resolved it when the run's end closed it; the reply still goes out.
        let _ = t.permission_resolved(&id, decision.is_approval(), by);
        self.resolved.insert(id.clone());
        Decided {
            id,
            native,
            decision,
            by,
        }
    }

    /// The agent asks a question; it waits for the caller ([`Hitl::answer_question`]).
    pub fn request_question(&mut self, t: &mut Transcript, request: QuestionRequest, native: Q) {
        let mut data =
            QuestionEventData::requested(request.id.clone(), request.prompt, request.options);
        data.call_id = request.call_id;
        t.record_question(data);
        t.daemon_status(
            "waiting_for_caller",
            Some(format!("question {}", request.id)),
        );
        self.questions.insert(request.id, native);
    }

    /// The caller's answer to question `id`.
    pub fn answer_question(
        &mut self,
        t: &mut Transcript,
        id: &str,
        answer: QuestionAnswer,
    ) -> Result<Answered<Q>, AgentError> {
        let native = self
            .questions
            .remove(id)
            .ok_or_else(|| self.unknown(id, false))?;
        let by = t.control_decider();
        Ok(self.resolve_question(t, id.to_string(), native, answer, by))
    }

    /// Replay: the recorded client answered question `id` (`None`: it declined).
    pub fn recorded_answer(
        &mut self,
        t: &mut Transcript,
        id: &str,
        response: Option<String>,
    ) -> Option<Q> {
        let native = self.questions.remove(id)?;
        let answer = response.map_or(QuestionAnswer::Reject, QuestionAnswer::Text);
        Some(
            self.resolve_question(t, id.to_string(), native, answer, DecidedBy::Caller)
                .native,
        )
    }

    /// The agent withdrew question `id` (or the other questions of its request were declined):
    /// it resolves as rejected, decided by nobody. Returns its native context, if it was pending.
    pub fn withdraw_question(&mut self, t: &mut Transcript, id: &str) -> Option<Q> {
        let native = self.questions.remove(id)?;
        Some(
            self.resolve_question(
                t,
                id.to_string(),
                native,
                QuestionAnswer::Reject,
                DecidedBy::Cancel,
            )
            .native,
        )
    }

    /// The run stops: every pending question resolves as rejected, oldest id first.
    pub fn cancel_questions(&mut self, t: &mut Transcript) -> Vec<Answered<Q>> {
        let by = t.stop_cause();
        let mut ids: Vec<String> = self.questions.keys().cloned().collect();
        ids.sort();
        ids.into_iter()
            .filter_map(|id| {
                let native = self.questions.remove(&id)?;
                Some(self.resolve_question(t, id, native, QuestionAnswer::Reject, by))
            })
            .collect()
    }

    fn resolve_question(
        &mut self,
        t: &mut Transcript,
        id: String,
        native: Q,
        answer: QuestionAnswer,
        by: DecidedBy,
    ) -> Answered<Q> {
        let response = match &answer {
            QuestionAnswer::Text(text) => Some(text.clone()),
            QuestionAnswer::Reject => None,
        };
        let _ = t.question_resolved(&id, response, by);
        self.resolved.insert(id.clone());
        Answered {
            id,
            native,
            answer,
            by,
        }
    }

    /// The native context of a pending question.
    pub fn question(&self, id: &str) -> Option<&Q> {
        self.questions.get(id)
    }

    /// Whether any permission request or question waits for the caller.
    pub fn is_waiting(&self) -> bool {
        !self.permissions.is_empty() || !self.questions.is_empty()
    }

    fn unknown(&self, id: &str, permission: bool) -> AgentError {
        let id = id.to_string();
        match (self.resolved.contains(&id), permission) {
            (true, _) => AgentError::AlreadyResolved { id },
            (false, true) => AgentError::UnknownPermission { id },
            (false, false) => AgentError::UnknownQuestion { id },
        }
    }
}

/// The permission policy a run in `mode` is decided by: in [`AgentMode::Plan`](crate::request::AgentMode::Plan) every request
/// to write a file or run a command the agent did not already judge read-only is denied (an
/// agent may ask for them in plan mode and would act on an approval), whatever
/// `policy` approves; other modes keep `policy`.
///
/// ```
/// use agent_api::kit::hitl::policy_in_mode;
/// use agent_api::request::{AgentMode, PermissionRule, ToolCategory};
/// use agent_api::PermissionPolicy;
/// let plan = policy_in_mode(Some(&AgentMode::Plan), &PermissionPolicy::ApproveAll);
/// assert_eq!(plan.rule(ToolCategory::FileWrite), PermissionRule::Deny);
/// assert_eq!(plan.rule(ToolCategory::FileRead), PermissionRule::Approve);
/// ```
pub fn policy_in_mode(
    mode: Option<&crate::vocabulary::modes::AgentMode>,
    policy: &crate::vocabulary::request::PermissionPolicy,
) -> crate::vocabulary::request::PermissionPolicy {
    use crate::vocabulary::request::PermissionRule;
    use crate::vocabulary::tools_facet::ToolCategory;
    if mode != Some(&crate::vocabulary::modes::AgentMode::Plan) {
        return policy.clone();
    }
    let categories = [
        ToolCategory::Shell,
        ToolCategory::FileWrite,
        ToolCategory::FileRead,
        ToolCategory::Network,
        ToolCategory::Mcp,
        ToolCategory::Other,
    ];
    let rules = categories.into_iter().map(|c| {
        let rule = if matches!(c, ToolCategory::Shell | ToolCategory::FileWrite) {
            PermissionRule::Deny
        } else {
            policy.rule(c)
        };
        (c, rule)
    });
    crate::vocabulary::request::PermissionPolicy::ByCategory(rules.collect())
}

#[cfg(test)]
mod tests;
