//! A turn's outcome read from its session's stored log, for the turns whose outcome no server
//! keeps in memory: a turn of a session another server runs or ran, one run here before a restart
//! or a release, one older than the last kept (`spec/http-api.md`, "Turns").
//!
//! The log says everything the outcome holds but the usage (the library reports it with the
//! run's completion, which is not an event): where the turn starts (its `turn_started`
//! delimiter), its answer (the last completed assistant message that is not reasoning, as the
//! library's own final text), what it waits on (a permission or question asked and not yet
//! resolved), and how it ended (its `turn_completed`, or its `turn_failed` and the terminal
//! `error` after it). Only the events that can say one of those are parsed.

use agent_api::universal::{
    ContentPart, EventSource, ItemKind, ItemRole, ItemStatus, UniversalEventBody as Body,
};
use agent_api::UniversalEvent;

use crate::store::StoredEvent;
use crate::wire::{PendingRequest, TurnError, TurnOutcome};

/// The permission or question `event` asks, if it asks one.
pub(crate) fn pending_request(event: &StoredEvent) -> Option<PendingRequest> {
    let (kind, field) = match event.kind() {
        "permission.requested" => ("permission", "permission_id"),
        "question.requested" => ("question", "question_id"),
        _ => return None,
    };
    let json: serde_json::Value = serde_json::from_str(&event.json).ok()?;
    Some(PendingRequest {
        kind: kind.into(),
        id: json["data"][field].as_str()?.to_string(),
        sequence: event.sequence,
    })
}

/// The id of the permission or question `event` resolves, if it resolves one.
fn resolved_request(event: &StoredEvent) -> Option<String> {
    let field = match event.kind() {
        "permission.resolved" => "permission_id",
        "question.resolved" => "question_id",
        _ => return None,
    };
    let json: serde_json::Value = serde_json::from_str(&event.json).ok()?;
    json["data"][field].as_str().map(str::to_string)
}

/// How far the log has told of the turn.
#[derive(Debug, Clone, PartialEq)]
enum Stage {
    /// Its `turn_started` is not read yet.
    NotStarted,
    /// Started at this sequence; no end read yet.
    Running { first: u64 },
    /// Its `turn_failed` read: its terminal `error` comes next.
    Failing { first: u64, last: u64 },
    /// Ended: `completed`, `failed` or `cancelled`, with its error and last sequence.
    Ended {
        first: u64,
        last: u64,
        status: &'static str,
        error: Option<TurnError>,
    },
}

/// Turn `turn` of a session as its log tells it, fed the log's events in order
/// ([`TurnReading::read`]).
#[derive(Debug, Clone)]
pub(crate) struct TurnReading {
    turn: u64,
    stage: Stage,
    final_text: Option<String>,
    /// The permissions and questions asked during the turn and not resolved yet, in order.
    pending: Vec<PendingRequest>,
}

impl TurnReading {
    /// Nothing read yet of turn `turn`.
    pub(crate) fn new(turn: u64) -> Self {
        Self {
            turn,
            stage: Stage::NotStarted,
            final_text: None,
            pending: Vec::new(),
        }
    }

    /// Whether the turn's last event was read (or the session ended before it).
    pub(crate) fn ended(&self) -> bool {
        matches!(self.stage, Stage::Ended { .. })
    }

    /// Whether the turn waits on a permission or a question.
    pub(crate) fn waiting(&self) -> bool {
        matches!(self.stage, Stage::Running { .. }) && !self.pending.is_empty()
    }

    /// Whether a turn of a later number started: this one never will.
    fn later_turn_started(&self, event: &StoredEvent) -> bool {
        self.started_turn(event).is_some_and(|n| n > self.turn)
    }

    /// Reads the next event of the log.
    pub(crate) fn read(&mut self, event: &StoredEvent) {
        match self.stage.clone() {
            Stage::NotStarted => {
                if self.started_turn(event) == Some(self.turn) {
                    self.stage = Stage::Running {
                        first: event.sequence,
                    };
                }
            }
            Stage::Running { first } => self.read_running(first, event),
            Stage::Failing { first, last } => {
                // The terminal error after `turn_failed`; anything else (an older log) ends it
                // without one.
                let error = (event.kind() == "error")
                    .then(|| terminal_error(event))
                    .flatten();
                let status = match &error {
                    Some(error) if error.code == "cancelled" => "cancelled",
                    _ => "failed",
                };
                let last = if error.is_some() {
                    event.sequence
                } else {
                    last
                };
                self.stage = Stage::Ended {
                    first,
                    last,
                    status,
                    error,
                };
            }
            Stage::Ended { .. } => {}
        }
    }

    fn read_running(&mut self, first: u64, event: &StoredEvent) {
        if let Some(closed) = event.closed_turn() {
            if closed.turn == self.turn {
                self.pending.clear();
                self.stage = match closed.failed {
                    true => Stage::Failing {
                        first,
                        last: event.sequence,
                    },
                    false => Stage::Ended {
                        first,
                        last: event.sequence,
                        status: "completed",
                        error: None,
                    },
                };
                return;
            }
        }
        match event.kind() {
            "item.completed" => {
                if let Some(text) = answer_text(event) {
                    self.final_text = Some(text);
                }
            }
            "permission.requested" | "question.requested" => {
                self.pending.extend(pending_request(event));
            }
            "permission.resolved" | "question.resolved" => {
                if let Some(id) = resolved_request(event) {
                    self.pending.retain(|asked| asked.id != id);
                }
            }
            "session.ended" => {
                self.pending.clear();
                self.stage = Stage::Ended {
                    first,
                    last: event.sequence,
                    status: "failed",
                    error: Some(TurnError {
                        code: "session_ended".into(),
                        message: "the session ended before the turn did".into(),
                    }),
                };
            }
            _ => {}
        }
    }

    /// The turn number of the `turn_started` delimiter `event` is, if it is one (the server's
    /// own: `source: daemon`, detail `turn N`). Parsed only when its text names the label.
    fn started_turn(&self, event: &StoredEvent) -> Option<u64> {
        if !matches!(event.kind(), "item.started" | "item.completed")
            || !event.json.contains("\"turn_started\"")
        {
            return None;
        }
        let event: UniversalEvent = serde_json::from_str(&event.json).ok()?;
        if event.source != EventSource::Daemon {
            return None;
        }
        let (Body::ItemStarted(data) | Body::ItemCompleted(data)) = &event.body else {
            return None;
        };
        data.item.content.iter().find_map(|part| match part {
            ContentPart::Status {
                label,
                detail: Some(detail),
            } if label == "turn_started" => detail.strip_prefix("turn ")?.parse().ok(),
            _ => None,
        })
    }

    /// The outcome so far of a turn of `session`: `None` when its start was not read.
    pub(crate) fn outcome(&self, session: &str) -> Option<TurnOutcome> {
        let outcome = |status: &str, first, last, error| TurnOutcome {
            session_id: session.to_string(),
            turn: Some(self.turn),
            status: status.into(),
            final_text: None,
            usage: None,
            error,
            first_sequence: Some(first),
            last_sequence: last,
            pending: None,
        };
        match &self.stage {
            Stage::NotStarted => None,
            Stage::Running { first } | Stage::Failing { first, .. } => {
                let pending = self.pending.last().cloned();
                let status = if pending.is_some() {
                    "waiting"
                } else {
                    "running"
                };
                Some(TurnOutcome {
                    pending,
                    ..outcome(status, *first, None, None)
                })
            }
            Stage::Ended {
                first,
                last,
                status,
                error,
            } => Some(TurnOutcome {
                final_text: (*status == "completed")
                    .then(|| self.final_text.clone())
                    .flatten(),
                ..outcome(status, *first, Some(*last), error.clone())
            }),
        }
    }
}

/// Reads `events` (the next page of the log) into `reading`; `true` once nothing later can
/// change what it says of its turn: the turn ended, or a later turn started without it.
pub(crate) fn read_page(reading: &mut TurnReading, events: &[StoredEvent]) -> bool {
    for event in events {
        if matches!(reading.stage, Stage::NotStarted) && reading.later_turn_started(event) {
            return true;
        }
        reading.read(event);
        if reading.ended() {
            return true;
        }
    }
    false
}

/// The answer text of a completed assistant message that is not reasoning, if `event` is one
/// with text (a message that only carried tool calls is not an answer).
fn answer_text(event: &StoredEvent) -> Option<String> {
    if !event.json.contains("\"assistant\"") {
        return None;
    }
    let event: UniversalEvent = serde_json::from_str(&event.json).ok()?;
    let Body::ItemCompleted(data) = &event.body else {
        return None;
    };
    let item = &data.item;
    let answer = item.kind == ItemKind::Message
        && item.role == Some(ItemRole::Assistant)
        && item.status == ItemStatus::Completed
        && !item.is_reasoning();
    let text = item.text();
    (answer && !text.is_empty()).then_some(text)
}

/// The code and message of a terminal `error` event.
fn terminal_error(event: &StoredEvent) -> Option<TurnError> {
    let json: serde_json::Value = serde_json::from_str(&event.json).ok()?;
    let data = &json["data"];
    Some(TurnError {
        code: data["code"].as_str().unwrap_or("error").to_string(),
        message: agent_api::display::line(data["message"].as_str().unwrap_or_default(), 2048),
    })
}

#[cfg(test)]
mod tests {
    use agent_api::kit::transcript::{NewItem, Transcript};
    use agent_api::universal::{DecidedBy, ItemRole, ReasoningVisibility};

    use super::*;

    /// A session's log as the server stores it: the transcript's events, numbered in order.
    fn stored(transcript: &mut Transcript) -> Vec<StoredEvent> {
        transcript
            .drain()
            .map(|event| StoredEvent::from_event(event).unwrap())
            .collect()
    }

    fn turn(transcript: &mut Transcript, n: u64, answer: &str) {
        transcript.begin_turn();
        transcript.daemon_status("turn_started", Some(format!("turn {n}")));
        transcript.user_message("hello");
        transcript.message(
            NewItem::reasoning(ReasoningVisibility::Public),
            "thinking it over",
        );
        transcript.message(NewItem::message(ItemRole::Assistant), answer);
        transcript.daemon_status("turn_completed", Some(format!("turn {n}")));
    }

    fn outcome_of(turn: u64, events: &[StoredEvent]) -> Option<TurnOutcome> {
        let mut reading = TurnReading::new(turn);
        read_page(&mut reading, events);
        reading.outcome("s1")
    }

    #[test]
    fn a_completed_turn_is_read_with_its_answer_not_its_reasoning_nor_another_turns() {
        let mut transcript = Transcript::new("s1".into(), false);
        turn(&mut transcript, 1, "first answer");
        turn(&mut transcript, 2, "second answer");
        let events = stored(&mut transcript);
        let second = outcome_of(2, &events).unwrap();
        assert_eq!(second.status, "completed");
        assert_eq!(second.final_text.as_deref(), Some("second answer"));
        assert_eq!(second.turn, Some(2));
        let first = events
            .iter()
            .position(|e| e.json.contains("\"turn 2\""))
            .unwrap();
        assert_eq!(second.first_sequence, Some(events[first].sequence));
        assert_eq!(second.last_sequence, Some(events.last().unwrap().sequence));
        assert_eq!(second.error, None);
        let first = outcome_of(1, &events).unwrap();
        assert_eq!(first.final_text.as_deref(), Some("first answer"));
        assert!(first.last_sequence < second.first_sequence);
        assert_eq!(outcome_of(3, &events), None, "a turn not started yet");
    }

    #[test]
    fn a_failed_or_cancelled_turn_ends_at_its_terminal_error() {
        for (error, status) in [
            (agent_api::AgentError::Cancelled, "cancelled"),
            (agent_api::AgentError::no_more_turns("run_1"), "failed"),
        ] {
            let mut transcript = Transcript::new("s1".into(), false);
            transcript.daemon_status("turn_started", Some("turn 1".into()));
            transcript.message(NewItem::message(ItemRole::Assistant), "half an answer");
            transcript.daemon_status("turn_failed", Some("turn 1".into()));
            transcript.terminal_error(&error);
            let events = stored(&mut transcript);
            let outcome = outcome_of(1, &events).unwrap();
            assert_eq!(outcome.status, status);
            assert_eq!(outcome.final_text, None, "a failed turn has no answer");
            let error_read = outcome.error.unwrap();
            assert_eq!(error_read.code, error.code());
            assert_eq!(error_read.message, error.to_string());
            assert_eq!(outcome.last_sequence, Some(events.last().unwrap().sequence));
        }
    }

    #[test]
    fn a_turn_asking_is_waiting_until_answered_then_running() {
        let mut transcript = Transcript::new("s1".into(), false);
        transcript.daemon_status("turn_started", Some("turn 1".into()));
        transcript.permission_requested("perm_1", "Bash: ls", None);
        let asked = stored(&mut transcript);
        let mut reading = TurnReading::new(1);
        assert!(!read_page(&mut reading, &asked));
        let waiting = reading.outcome("s1").unwrap();
        assert_eq!(waiting.status, "waiting");
        let pending = waiting.pending.unwrap();
        assert_eq!(
            (pending.kind.as_str(), pending.id.as_str()),
            ("permission", "perm_1")
        );
        assert_eq!(pending.sequence, asked.last().unwrap().sequence);
        transcript
            .permission_resolved("perm_1", true, DecidedBy::Caller)
            .unwrap();
        assert!(!read_page(&mut reading, &stored(&mut transcript)));
        let running = reading.outcome("s1").unwrap();
        assert_eq!(
            (running.status.as_str(), running.pending),
            ("running", None)
        );
    }

    #[test]
    fn an_agents_own_status_with_the_label_does_not_start_a_turn() {
        let mut transcript = Transcript::new("s1".into(), false);
        transcript.status("turn_started", Some("turn 1".into()));
        assert_eq!(outcome_of(1, &stored(&mut transcript)), None);
    }

    #[test]
    fn a_turn_skipped_for_a_later_one_is_known_absent_without_reading_on() {
        let mut transcript = Transcript::new("s1".into(), false);
        turn(&mut transcript, 2, "answer");
        let mut reading = TurnReading::new(1);
        assert!(read_page(&mut reading, &stored(&mut transcript)));
        assert_eq!(reading.outcome("s1"), None);
    }
}
