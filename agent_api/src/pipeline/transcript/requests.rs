//! Permission requests and questions on the transcript: each asked once and resolved once,
//! recording who decided.

use serde_json::Value;

use super::Transcript;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::universal::{
    DecidedBy, EventSource, PermissionEventData, PermissionStatus, QuestionEventData,
    QuestionStatus, UniversalEventBody,
};

impl Transcript {
    /// A number that changes whenever a permission request or question is asked or resolved:
    /// while it stays the same, so do [`Transcript::pending_permissions`] and
    /// [`Transcript::pending_questions`].
    pub fn requests_changed(&self) -> u64 {
        self.requests_changed
    }

    /// Who decides the answers given from now on: the caller (`None`), or the kit on the
    /// caller's behalf (a wait past its limit decides with [`DecidedBy::Timeout`]).
    pub(crate) fn set_decider(&mut self, decider: Option<DecidedBy>) {
        self.decider = decider;
    }

    /// Who decides an answer that comes through the run's controls: the caller, unless the kit
    /// answers on the caller's behalf (a wait past its limit: [`DecidedBy::Timeout`]).
    pub fn control_decider(&self) -> DecidedBy {
        self.decider.unwrap_or(DecidedBy::Caller)
    }

    /// Ids of permission requests still waiting for a decision.
    pub fn pending_permissions(&self) -> Vec<String> {
        self.permissions.keys().cloned().collect()
    }

    /// Records that the run's timeout is stopping it: requests still waiting from now on resolve
    /// as decided by [`DecidedBy::Timeout`] instead of [`DecidedBy::Cancel`].
    pub fn set_timed_out(&mut self) {
        self.timed_out = true;
    }

    /// Who resolves a request that is still waiting when the run stops or ends.
    pub fn stop_cause(&self) -> DecidedBy {
        if self.timed_out {
            DecidedBy::Timeout
        } else {
            DecidedBy::Cancel
        }
    }

    /// Ids of questions still waiting for an answer.
    pub fn pending_questions(&self) -> Vec<String> {
        self.questions.keys().cloned().collect()
    }

    /// The agent asks for permission; answer it with `RunControl::respond_permission(id, …)`.
    /// Backends go through `agent_api::kit::hitl`, which applies the policy and resolves it once.
    pub fn permission_requested(
        &mut self,
        permission_id: impl Into<String>,
        action: impl Into<String>,
        metadata: Option<Value>,
    ) {
        let mut data = PermissionEventData::requested(permission_id, action);
        data.metadata = metadata;
        self.record_permission_request(data);
    }

    /// Records a permission request with its typed fields (`data.status` is set to requested).
    pub fn record_permission_request(&mut self, mut data: PermissionEventData) {
        data.status = PermissionStatus::Requested;
        data.decided_by = None;
        self.permissions
            .insert(data.permission_id.clone(), data.clone());
        self.requests_changed += 1;
        self.emit(
            EventSource::Agent,
            UniversalEventBody::PermissionRequested(Box::new(data)),
        );
    }

    /// Whether a permission request is waiting for a decision.
    pub fn has_pending_permission(&self, permission_id: &str) -> bool {
        self.permissions.contains_key(permission_id)
    }

    /// A pending permission request was decided, by `by` (`agent_api::kit::hitl` calls this).
    pub fn permission_resolved(
        &mut self,
        permission_id: &str,
        approved: bool,
        by: DecidedBy,
    ) -> Result<(), AgentError> {
        let mut data = self.permissions.remove(permission_id).ok_or_else(|| {
            AgentError::UnknownPermission {
                id: permission_id.to_string(),
            }
        })?;
        self.requests_changed += 1;
        data.status = if approved {
            PermissionStatus::Approved
        } else {
            PermissionStatus::Denied
        };
        data.decided_by = Some(by);
        self.emit(
            EventSource::Daemon,
            UniversalEventBody::PermissionResolved(Box::new(data)),
        );
        Ok(())
    }

    /// The agent asks a question; answer it with `RunControl::answer_question(id, …)`.
    pub fn question_requested(
        &mut self,
        question_id: impl Into<String>,
        prompt: impl Into<String>,
        options: Vec<String>,
    ) {
        self.record_question(QuestionEventData::requested(question_id, prompt, options));
    }

    /// Records a question with its typed fields (`data.status` is set to requested).
    pub fn record_question(&mut self, mut data: QuestionEventData) {
        data.status = QuestionStatus::Requested;
        data.decided_by = None;
        data.response = None;
        self.questions
            .insert(data.question_id.clone(), data.clone());
        self.requests_changed += 1;
        self.emit(
            EventSource::Agent,
            UniversalEventBody::QuestionRequested(Box::new(data)),
        );
    }

    /// Whether a question is waiting for an answer.
    pub fn has_pending_question(&self, question_id: &str) -> bool {
        self.questions.contains_key(question_id)
    }

    /// A pending question was answered (`Some`) or rejected (`None`), by `by`.
    pub fn question_resolved(
        &mut self,
        question_id: &str,
        response: Option<String>,
        by: DecidedBy,
    ) -> Result<(), AgentError> {
        let mut data =
            self.questions
                .remove(question_id)
                .ok_or_else(|| AgentError::UnknownQuestion {
                    id: question_id.to_string(),
                })?;
        self.requests_changed += 1;
        data.status = if response.is_some() {
            QuestionStatus::Answered
        } else {
            QuestionStatus::Rejected
        };
        data.decided_by = Some(by);
        data.response = response;
        self.emit(
            EventSource::Daemon,
            UniversalEventBody::QuestionResolved(Box::new(data)),
        );
        Ok(())
    }
}
