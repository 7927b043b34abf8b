//! The checks of a recorded session (`spec/run-protocol.md` §8): every turn is a conformant
//! run of its own, and all turns together are one transcript.

use agent_api::universal::{ContentPart, ItemKind, UniversalEventBody};
use agent_api::UniversalEvent;
use agent_api::{AgentError, RunCompletion, RunHandle, Session};

pub mod e2e;

use crate::{record_answering, universal_problems, wrapper_problems, Answers, RunRecord};

/// The turns of one session and the events `close` returned.
#[derive(Debug, Default)]
pub struct SessionRecord {
    /// Each turn, in order.
    pub turns: Vec<RunRecord>,
    /// What [`Session::close`] returned.
    pub trailing: Vec<UniversalEvent>,
}

impl SessionRecord {
    /// Sends `prompt` on `session`, records the turn and returns its completion.
    pub async fn turn(
        &mut self,
        session: &mut Session,
        prompt: &str,
    ) -> &Result<RunCompletion, AgentError> {
        let handle = session
            .send(prompt)
            .await
            .expect("the session takes the turn");
        self.record(handle, Answers::none()).await
    }

    /// Records a turn already sent, answering as `answers` says.
    pub async fn record(
        &mut self,
        handle: RunHandle,
        answers: Answers,
    ) -> &Result<RunCompletion, AgentError> {
        self.turns.push(record_answering(handle, answers).await);
        &self.turns.last().expect("just pushed").completion
    }

    /// Every universal event of the session, in order.
    pub fn universal(&self) -> Vec<UniversalEvent> {
        self.turns
            .iter()
            .flat_map(|t| t.universal.iter().cloned())
            .chain(self.trailing.iter().cloned())
            .collect()
    }
}

/// The label and detail of the status item an event completes, if it does.
pub fn status_of(event: &UniversalEvent) -> Option<(&str, Option<&str>)> {
    event
        .completed_item()?
        .content
        .iter()
        .find_map(|p| match p {
            ContentPart::Status { label, detail } => Some((label.as_str(), detail.as_deref())),
            _ => None,
        })
}

/// Every way the recorded session breaks the specs. Empty for a conformant session.
pub fn session_problems(session: &SessionRecord) -> Vec<String> {
    let mut out = Vec::new();
    let all = session.universal();
    universal_problems(&all, &mut out);
    if all
        .iter()
        .filter(|e| e.type_name() == "session.started")
        .count()
        != 1
    {
        out.push("a session has exactly one session.started".into());
    }
    let ids: std::collections::HashSet<&str> = all.iter().map(|e| &*e.session_id).collect();
    if ids.len() != 1 {
        out.push(format!(
            "the session's events carry {} session ids",
            ids.len()
        ));
    }
    for (n, turn) in session.turns.iter().enumerate() {
        let n = n + 1;
        wrapper_problems(turn, &mut out);
        let detail = format!("turn {n}");
        // What came between turns (`session.started`, status items such as a mode switch's)
        // goes out before the turn's `turn_started`; nothing of the turn's own may.
        let opening = turn
            .universal
            .iter()
            .position(|e| status_of(e) == Some(("turn_started", Some(detail.as_str()))));
        let between = |e: &UniversalEvent| {
            e.type_name() == "session.started"
                || e.item().is_some_and(|i| i.kind == ItemKind::Status)
        };
        if !opening.is_some_and(|at| turn.universal[..at].iter().all(between)) {
            out.push(format!(
                "turn {n} does not open with its turn_started status"
            ));
        }
        let body: Vec<&UniversalEvent> = turn
            .universal
            .iter()
            .filter(|e| e.type_name() != "session.ended")
            .collect();
        let last = body.last().copied();
        match &turn.completion {
            Ok(_) => {
                if last.and_then(status_of) != Some(("turn_completed", Some(detail.as_str()))) {
                    out.push(format!(
                        "turn {n} succeeded but does not close with turn_completed"
                    ));
                }
            }
            Err(_) => {
                let terminal = last.is_some_and(
                    |e| matches!(&e.body, UniversalEventBody::Error(d) if d.details.as_ref().is_some_and(|d| d["terminal"] == true)),
                );
                let before = body.len().checked_sub(2).and_then(|i| status_of(body[i]));
                if !terminal || before != Some(("turn_failed", Some(detail.as_str()))) {
                    out.push(format!("turn {n} failed but does not close with turn_failed and its terminal error"));
                }
            }
        }
    }
    out
}

/// Panics with every problem of the session, if it has any.
pub fn assert_session_conformant(session: &SessionRecord) {
    let problems = session_problems(session);
    assert!(
        problems.is_empty(),
        "the session breaks the specs:\n- {}",
        problems.join("\n- ")
    );
}
