//! The scripted agent's memory of its sessions, so that resume and fork behave as a real
//! agent's do: a resumed session keeps its id and counts its turns, a fork starts a new id
//! from the same history, and an unknown id is refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_api::{AgentError, SessionSelector};

/// Which session a run plays in, and its turn number in that session (from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionTurn {
    pub(crate) id: String,
    pub(crate) turn: u32,
}

#[derive(Debug, Default)]
struct Store {
    turns: HashMap<String, u32>,
    last: Option<String>,
}

/// The sessions of one [`crate::ScriptedBackend`] (shared by its clones).
#[derive(Debug, Default, Clone)]
pub(crate) struct Sessions(Arc<Mutex<Store>>);

impl Sessions {
    /// Starts the turn `selector` asks for.
    pub(crate) fn begin(&self, selector: &SessionSelector) -> Result<SessionTurn, AgentError> {
        let mut store = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let not_found = |id: &str| AgentError::SessionNotFound { id: id.to_string() };
        let (id, turn) = match selector {
            SessionSelector::Resume(session) => (
                session.id.clone(),
                store
                    .turns
                    .get(&session.id)
                    .ok_or_else(|| not_found(&session.id))?
                    + 1,
            ),
            SessionSelector::ResumeLast => {
                let id = store
                    .last
                    .clone()
                    .ok_or_else(|| not_found("(the last session)"))?;
                let turn = store.turns[&id] + 1;
                (id, turn)
            }
            SessionSelector::Fork(session) => (
                new_id(),
                store
                    .turns
                    .get(&session.id)
                    .ok_or_else(|| not_found(&session.id))?
                    + 1,
            ),
            _ => (new_id(), 1),
        };
        store.turns.insert(id.clone(), turn);
        store.last = Some(id.clone());
        Ok(SessionTurn { id, turn })
    }

    /// The next turn of the known session `id` (a warm session's next message).
    pub(crate) fn next_turn(&self, id: &str) -> SessionTurn {
        let mut store = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let turn = store.turns.get(id).copied().unwrap_or(0) + 1;
        store.turns.insert(id.to_string(), turn);
        store.last = Some(id.to_string());
        SessionTurn {
            id: id.to_string(),
            turn,
        }
    }
}

fn new_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "scripted-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_counts_turns_fork_copies_history_and_unknown_ids_are_refused() {
        let sessions = Sessions::default();
        let first = sessions.begin(&SessionSelector::New).unwrap();
        assert_eq!(first.turn, 1);
        let second = sessions
            .begin(&SessionSelector::Resume(first.id.clone().into()))
            .unwrap();
        assert_eq!(
            second,
            SessionTurn {
                id: first.id.clone(),
                turn: 2
            }
        );
        let fork = sessions
            .begin(&SessionSelector::Fork(first.id.clone().into()))
            .unwrap();
        assert_ne!(fork.id, first.id);
        assert_eq!(fork.turn, 3);
        assert_eq!(
            sessions.begin(&SessionSelector::ResumeLast).unwrap(),
            SessionTurn {
                id: fork.id,
                turn: 4
            }
        );
        let missing = sessions
            .begin(&SessionSelector::Resume("nope".into()))
            .unwrap_err();
        assert!(matches!(missing, AgentError::SessionNotFound { ref id } if id == "nope"));
    }
}
