//! The webhook outbox: which stored events are to be delivered to which endpoint, and what became
//! of each try to deliver one.
//!
//! A store given [`OutboxRules`] ([`super::Store::set_outbox`]) puts a row in its outbox for every
//! event a rule matches, in the same write as the event itself: an event is stored with its
//! deliveries or not at all, so a server killed at any moment loses none. The delivery worker
//! (`crate::webhooks`) takes the rows due, at most the oldest undelivered one of each endpoint and
//! session at a time (per-session order), and records each try ([`DeliveryAttempt`]).

use std::sync::Arc;

use super::StoredEvent;

/// An event a webhook can ask for (`--webhook 'URL;events=…'`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum WebhookEvent {
    /// A turn ended (the session's `turn_completed` or `turn_failed` status): `turn.ended`.
    TurnEnded,
    /// The agent waits for a permission decision: `permission.requested`.
    PermissionRequested,
    /// The agent waits for an answer to a question: `question.requested`.
    QuestionRequested,
    /// The session ended: `session.ended`.
    SessionEnded,
    /// A runtime error: `error`.
    Error,
}

impl WebhookEvent {
    /// Every event, in the order the documentation lists them.
    pub const ALL: [Self; 5] = [
        Self::TurnEnded,
        Self::PermissionRequested,
        Self::QuestionRequested,
        Self::SessionEnded,
        Self::Error,
    ];

    /// Its name (`turn.ended`, …): the payload's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TurnEnded => "turn.ended",
            Self::PermissionRequested => "permission.requested",
            Self::QuestionRequested => "question.requested",
            Self::SessionEnded => "session.ended",
            Self::Error => "error",
        }
    }

    /// The event a name says.
    ///
    /// ```
    /// use agent_api_server::store::WebhookEvent;
    /// assert_eq!(WebhookEvent::parse("turn.ended"), Some(WebhookEvent::TurnEnded));
    /// assert_eq!(WebhookEvent::parse("item.delta"), None);
    /// ```
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// What a stored event is to webhooks, if anything. A turn's end is the daemon's own
    /// `turn_completed` or `turn_failed` status (an agent reporting its own turn's end with the
    /// same label is not one): its JSON is parsed only for an `item.completed` that names one.
    pub fn of(event: &StoredEvent) -> Option<Self> {
        match event.kind() {
            "permission.requested" => Some(Self::PermissionRequested),
            "question.requested" => Some(Self::QuestionRequested),
            "session.ended" => Some(Self::SessionEnded),
            "error" => Some(Self::Error),
            "item.completed"
                if event.json.contains("turn_completed") || event.json.contains("turn_failed") =>
            {
                let parsed: agent_api::UniversalEvent = serde_json::from_str(&event.json).ok()?;
                (parsed.source == agent_api::universal::EventSource::Daemon && closes_turn(&parsed))
                    .then_some(Self::TurnEnded)
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for WebhookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `event` is a turn's closing status (`turn_completed` or `turn_failed`).
pub(crate) fn closes_turn(event: &agent_api::UniversalEvent) -> bool {
    let agent_api::universal::UniversalEventBody::ItemCompleted(completed) = &event.body else {
        return false;
    };
    completed.item.content.iter().any(|part| {
        matches!(part, agent_api::universal::ContentPart::Status { label, .. }
            if label == "turn_completed" || label == "turn_failed")
    })
}

/// One endpoint the outbox fills: its key in the store and the events it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxTarget {
    /// The endpoint's key: stable across restarts, holding no secret (the webhook module makes
    /// it from the URL's digest).
    pub endpoint: String,
    /// The events it takes.
    pub events: Vec<WebhookEvent>,
}

/// What a store puts in its outbox: a row per event and endpoint whose filter takes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboxRules {
    targets: Vec<OutboxTarget>,
}

/// An outbox row to write with its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    /// The endpoint's key.
    pub endpoint: String,
    /// The event's sequence in its session.
    pub sequence: u64,
    /// What it is to webhooks.
    pub event: WebhookEvent,
}

impl OutboxRules {
    /// Rules for these endpoints.
    pub fn new(targets: Vec<OutboxTarget>) -> Self {
        Self { targets }
    }

    /// The endpoints' keys.
    pub fn endpoints(&self) -> Vec<String> {
        self.targets.iter().map(|t| t.endpoint.clone()).collect()
    }

    /// The rows `events` make, in their order.
    pub fn entries(&self, events: &[StoredEvent]) -> Vec<OutboxEntry> {
        if self.targets.is_empty() {
            return Vec::new();
        }
        let mut entries = Vec::new();
        for stored in events {
            let Some(event) = WebhookEvent::of(stored) else {
                continue;
            };
            for target in self.targets.iter().filter(|t| t.events.contains(&event)) {
                entries.push(OutboxEntry {
                    endpoint: target.endpoint.clone(),
                    sequence: stored.sequence,
                    event,
                });
            }
        }
        entries
    }
}

/// The rules a store was given, shared with its writer.
pub(crate) type SharedRules = Arc<std::sync::RwLock<Option<Arc<OutboxRules>>>>;

/// The rules in `shared`, if any were given.
pub(crate) fn rules(shared: &SharedRules) -> Option<Arc<OutboxRules>> {
    shared
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

/// Installs `rules` in `shared`.
pub(crate) fn install(shared: &SharedRules, rules: Arc<OutboxRules>) {
    *shared
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(rules);
}

/// An outbox row taken for delivery: the oldest undelivered one of its endpoint and session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The endpoint's key.
    pub endpoint: String,
    /// The session.
    pub session: String,
    /// Its agent, as the session was created with.
    pub agent: String,
    /// The event's sequence.
    pub sequence: u64,
    /// What it is to webhooks.
    pub event: WebhookEvent,
    /// The event's stored JSON (`"raw":null`: raw payloads are never sent).
    pub json: Arc<str>,
    /// The tries made so far.
    pub attempts: u32,
}

/// What a try to deliver came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// The endpoint answered 2xx: the row is done.
    Delivered,
    /// It failed; tried again at `next_attempt`.
    Retrying,
    /// It failed for the last time allowed: the row is given up, the session's next one goes.
    Abandoned,
}

impl AttemptOutcome {
    /// Its name in the store and the delivery log.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Retrying => "retrying",
            Self::Abandoned => "abandoned",
        }
    }

    /// The outcome a stored name says.
    pub fn parse(text: &str) -> Self {
        match text {
            "delivered" => Self::Delivered,
            "abandoned" => Self::Abandoned,
            _ => Self::Retrying,
        }
    }

    /// The outbox row's state after it: `pending` while it is to be tried again.
    pub(crate) fn row_state(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Retrying => "pending",
            Self::Abandoned => "abandoned",
        }
    }
}

/// One try to deliver an outbox row, as the delivery log shows it: no body, no secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryAttempt {
    /// The endpoint's key.
    pub endpoint: String,
    /// The session.
    pub session: String,
    /// The event's sequence.
    pub sequence: u64,
    /// The event's id (the `webhook-id` header).
    pub event_id: String,
    /// What it is to webhooks.
    pub event: WebhookEvent,
    /// Which try this was, from 1.
    pub attempt: u32,
    /// When it was made (unix milliseconds).
    pub at_ms: i64,
    /// The endpoint's HTTP status, when it answered.
    pub status: Option<u16>,
    /// Why it failed, as a class (`timeout`, `connect`, `status`, `request`), when it did.
    pub error: Option<String>,
    /// What it came to.
    pub outcome: AttemptOutcome,
    /// When the next try is due (unix milliseconds), when there is one.
    pub next_attempt_ms: Option<i64>,
}

/// The current time in unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The error a store without an outbox answers with.
pub(crate) fn unsupported() -> super::StoreError {
    super::StoreError::Backend("this store keeps no webhook outbox".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(event: agent_api::UniversalEvent) -> StoredEvent {
        StoredEvent::from_event(event).unwrap()
    }

    #[test]
    fn the_daemons_turn_end_matches_and_an_agents_look_alike_does_not() {
        let mut transcript = agent_api::kit::transcript::Transcript::new("sess_1".into(), false);
        transcript.daemon_status("turn_completed", Some("turn 1".into()));
        transcript.permission_requested("perm_1", "run ls", None);
        let events: Vec<StoredEvent> = transcript.drain().map(stored).collect();
        let kinds: Vec<Option<WebhookEvent>> = events.iter().map(WebhookEvent::of).collect();
        assert!(kinds.contains(&Some(WebhookEvent::TurnEnded)), "{kinds:?}");
        assert!(
            kinds.contains(&Some(WebhookEvent::PermissionRequested)),
            "{kinds:?}"
        );
        // The same label from the agent itself (source `agent`) is no turn's end.
        let agent_said = events
            .iter()
            .find(|e| WebhookEvent::of(e) == Some(WebhookEvent::TurnEnded))
            .map(|e| {
                e.json
                    .replace(r#""source":"daemon""#, r#""source":"agent""#)
            })
            .unwrap();
        let agent_said = StoredEvent {
            sequence: 9,
            json: agent_said.into(),
            raw: None,
        };
        assert_eq!(WebhookEvent::of(&agent_said), None);
    }

    #[test]
    fn rules_make_one_row_per_matching_endpoint_in_event_order() {
        let mut transcript = agent_api::kit::transcript::Transcript::new("sess_1".into(), false);
        transcript.permission_requested("perm_1", "run ls", None);
        transcript.daemon_status("turn_completed", Some("turn 1".into()));
        let events: Vec<StoredEvent> = transcript.drain().map(stored).collect();
        let rules = OutboxRules::new(vec![
            OutboxTarget {
                endpoint: "a".into(),
                events: vec![WebhookEvent::TurnEnded],
            },
            OutboxTarget {
                endpoint: "b".into(),
                events: WebhookEvent::ALL.to_vec(),
            },
        ]);
        let entries = rules.entries(&events);
        let shown: Vec<(&str, WebhookEvent)> = entries
            .iter()
            .map(|e| (e.endpoint.as_str(), e.event))
            .collect();
        assert_eq!(
            shown,
            [
                ("b", WebhookEvent::PermissionRequested),
                ("a", WebhookEvent::TurnEnded),
                ("b", WebhookEvent::TurnEnded)
            ]
        );
        assert!(entries.windows(2).all(|w| w[0].sequence <= w[1].sequence));
    }
}
