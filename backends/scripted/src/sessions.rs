//! The scripted agent's memory of its sessions, so that resume, fork and snapshots behave as a
//! real agent's do: a resumed session keeps its id and counts its turns, a fork starts a new id
//! from the same history, and an unknown id is refused.
//!
//! Where the run's environment names a home ([`HOME_VAR`]), the agent keeps each session as a
//! file there, `sessions/<id>.jsonl`, one line per turn (its number and prompt), as a CLI keeps
//! its sessions on disk: another backend (another process, another machine) pointed at the same
//! home continues it, and a session snapshot carries that file. Without one, it keeps the same
//! lines in the backend's memory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_api::{AgentError, RunRequest, SessionSelector};

/// The variable naming the directory the scripted agent keeps its sessions in.
pub const HOME_VAR: &str = "AGENT_API_SCRIPTED_HOME";

/// Which session a run plays in, and its turn number in that session (from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionTurn {
    pub(crate) id: String,
    pub(crate) turn: u32,
}

/// The home a run of `request` keeps its sessions in: the request's [`HOME_VAR`], else this
/// process's; `None` keeps them in memory.
pub(crate) fn home_of(request: &RunRequest) -> Option<PathBuf> {
    request
        .env
        .get(HOME_VAR)
        .cloned()
        .or_else(|| std::env::var(HOME_VAR).ok())
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
}

/// Whether the sessions this process's runs play outlive it, so that another process can resume
/// them: only when this process names a home ([`HOME_VAR`]); else they live in the backend's
/// memory, and end with it.
pub fn outlive_this_process() -> bool {
    std::env::var_os(HOME_VAR).is_some_and(|dir| !dir.is_empty())
}

/// A session's file below the home.
pub(crate) fn session_file(id: &str) -> PathBuf {
    Path::new("sessions").join(format!("{id}.jsonl"))
}

/// One line of a session's file.
pub(crate) fn turn_line(turn: u32, prompt: &str) -> String {
    let mut line = serde_json::json!({ "turn": turn, "prompt": prompt }).to_string();
    line.push('\n');
    line
}

#[derive(Debug, Default)]
struct Store {
    /// Sessions kept in memory: their files' lines.
    memory: HashMap<String, String>,
    /// The last session per home (`None`: memory).
    last: HashMap<Option<PathBuf>, String>,
}

/// The sessions of one [`crate::ScriptedBackend`] (shared by its clones).
#[derive(Debug, Default, Clone)]
pub(crate) struct Sessions(Arc<Mutex<Store>>);

impl Sessions {
    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The lines of session `id` in `home`, if it exists.
    pub(crate) fn lines(&self, home: Option<&Path>, id: &str) -> Option<String> {
        if agent_api::snapshot::check_session_id(id).is_err() {
            return None;
        }
        match home {
            Some(home) => std::fs::read_to_string(home.join(session_file(id))).ok(),
            None => self.store().memory.get(id).cloned(),
        }
    }

    /// Replaces session `id`'s lines in memory (a snapshot restored into a backend with no home).
    pub(crate) fn set_memory(&self, id: &str, lines: String) {
        self.store().memory.insert(id.to_string(), lines);
    }

    fn turns(&self, home: Option<&Path>, id: &str) -> Option<u32> {
        self.lines(home, id).map(|l| l.lines().count() as u32)
    }

    /// Starts the turn `selector` asks for, in `home`, with `prompt` (recorded now).
    pub(crate) fn begin(
        &self,
        selector: &SessionSelector,
        home: Option<&Path>,
        prompt: Option<&str>,
    ) -> Result<SessionTurn, AgentError> {
        let not_found = |id: &str| AgentError::SessionNotFound { id: id.to_string() };
        let known = |id: &str| self.turns(home, id).ok_or_else(|| not_found(id));
        let (id, turn, copy_of) = match selector {
            SessionSelector::Resume(session) => (session.id.clone(), known(&session.id)? + 1, None),
            SessionSelector::ResumeLast => {
                let last = self.store().last.get(&home.map(Path::to_path_buf)).cloned();
                let id = last.ok_or_else(|| not_found("(the last session)"))?;
                let turn = known(&id)? + 1;
                (id, turn, None)
            }
            SessionSelector::Fork(session) => {
                (new_id(), known(&session.id)? + 1, Some(session.id.clone()))
            }
            _ => (new_id(), 1, None),
        };
        if let Some(from) = copy_of {
            let lines = self.lines(home, &from).unwrap_or_default();
            self.write(home, &id, lines)?;
        }
        let turn = SessionTurn { id, turn };
        match prompt {
            Some(prompt) => self.record(home, &turn, prompt)?,
            None => self.mark_last(home, &turn.id),
        }
        Ok(turn)
    }

    /// The next turn of the known session `id` (a warm session's next message), recorded.
    pub(crate) fn next_turn(&self, home: Option<&Path>, id: &str, prompt: &str) -> SessionTurn {
        let turn = SessionTurn {
            id: id.to_string(),
            turn: self.turns(home, id).unwrap_or(0) + 1,
        };
        if let Err(e) = self.record(home, &turn, prompt) {
            tracing::warn!(error = %e, "the scripted agent could not record its turn");
        }
        turn
    }

    /// Appends `turn`'s line to its session.
    pub(crate) fn record(
        &self,
        home: Option<&Path>,
        turn: &SessionTurn,
        prompt: &str,
    ) -> Result<(), AgentError> {
        let line = turn_line(turn.turn, prompt);
        match home {
            Some(home) => {
                use std::io::Write;
                let path = home.join(session_file(&turn.id));
                let setup = |source| AgentError::HomeSetup {
                    path: path.clone(),
                    source,
                };
                std::fs::create_dir_all(path.parent().unwrap_or(home)).map_err(setup)?;
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .and_then(|mut file| file.write_all(line.as_bytes()))
                    .map_err(setup)?;
            }
            None => self
                .store()
                .memory
                .entry(turn.id.clone())
                .or_default()
                .push_str(&line),
        }
        self.mark_last(home, &turn.id);
        Ok(())
    }

    fn write(&self, home: Option<&Path>, id: &str, lines: String) -> Result<(), AgentError> {
        match home {
            Some(home) => {
                let path = home.join(session_file(id));
                let setup = |source| AgentError::HomeSetup {
                    path: path.clone(),
                    source,
                };
                std::fs::create_dir_all(path.parent().unwrap_or(home)).map_err(setup)?;
                std::fs::write(&path, lines).map_err(setup)
            }
            None => {
                self.set_memory(id, lines);
                Ok(())
            }
        }
    }

    fn mark_last(&self, home: Option<&Path>, id: &str) {
        self.store()
            .last
            .insert(home.map(Path::to_path_buf), id.to_string());
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
        let first = sessions
            .begin(&SessionSelector::New, None, Some("a"))
            .unwrap();
        assert_eq!(first.turn, 1);
        let second = sessions
            .begin(
                &SessionSelector::Resume(first.id.clone().into()),
                None,
                Some("b"),
            )
            .unwrap();
        assert_eq!(
            second,
            SessionTurn {
                id: first.id.clone(),
                turn: 2
            }
        );
        let fork = sessions
            .begin(
                &SessionSelector::Fork(first.id.clone().into()),
                None,
                Some("c"),
            )
            .unwrap();
        assert_ne!(fork.id, first.id);
        assert_eq!(fork.turn, 3);
        assert_eq!(
            sessions
                .begin(&SessionSelector::ResumeLast, None, Some("d"))
                .unwrap(),
            SessionTurn {
                id: fork.id,
                turn: 4
            }
        );
        let missing = sessions
            .begin(&SessionSelector::Resume("nope".into()), None, None)
            .unwrap_err();
        assert!(matches!(missing, AgentError::SessionNotFound { ref id } if id == "nope"));
    }
}
