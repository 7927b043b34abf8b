//! [`MemoryStore`]: sessions and events in this process's memory (`--store memory`, for tests).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::outbox::{now_ms, AttemptOutcome, Delivery, DeliveryAttempt, OutboxRules};
use super::{
    unix_now, SessionRecord, SessionUpdate, Store, StoreError, StoredChain, StoredDelta,
    StoredEvent, StoredSnapshot,
};

/// A store that keeps everything in memory; nothing survives the process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    order: Vec<String>,
    sessions: HashMap<String, (SessionRecord, Vec<StoredEvent>)>,
    snapshots: HashMap<String, StoredChain>,
    /// The one server using this store (it lives in that server's process).
    server: Option<String>,
    tokens: Vec<super::tokens::TokenRecord>,
    /// What the outbox takes, once webhooks are configured.
    outbox_rules: Option<Arc<OutboxRules>>,
    /// The webhook outbox, by endpoint, session and sequence.
    outbox: BTreeMap<(String, String, u64), OutboxRow>,
    /// The delivery log, oldest try first.
    attempts: Vec<DeliveryAttempt>,
}

/// An outbox row.
#[derive(Debug)]
struct OutboxRow {
    event: super::WebhookEvent,
    attempts: u32,
    next_attempt_ms: i64,
    /// `pending`, `delivered` or `abandoned`.
    state: &'static str,
}

impl Inner {
    /// `record` with the turn of its kept snapshot.
    fn with_snapshot(&self, record: &SessionRecord) -> SessionRecord {
        let mut record = record.clone();
        record.snapshot_turn = self.snapshots.get(&record.id).map(|s| s.turn);
        record
    }

    /// The record of a session `owner` owns.
    fn owned(&mut self, id: &str, owner: &str) -> Result<&mut SessionRecord, StoreError> {
        let (record, _) = self
            .sessions
            .get_mut(id)
            .ok_or_else(|| StoreError::NotFound(id.into()))?;
        if record.owner.as_deref() != Some(owner) {
            return Err(StoreError::NotOwner {
                session: id.into(),
                owner: record.owner.clone().unwrap_or_default(),
            });
        }
        Ok(record)
    }
}

impl MemoryStore {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl super::tokens::TokenStore for MemoryStore {
    async fn create_token(&self, token: super::tokens::TokenRecord) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if inner.tokens.iter().any(|t| t.id == token.id) {
            return Err(StoreError::Duplicate(token.id));
        }
        inner.tokens.push(token);
        Ok(())
    }

    async fn token(&self, id: &str) -> Result<Option<super::tokens::TokenRecord>, StoreError> {
        Ok(self.lock().tokens.iter().find(|t| t.id == id).cloned())
    }

    async fn tokens(&self) -> Result<Vec<super::tokens::TokenRecord>, StoreError> {
        Ok(self.lock().tokens.clone())
    }

    async fn revoke_token(&self, id: &str, at: i64) -> Result<bool, StoreError> {
        let mut inner = self.lock();
        let Some(token) = inner.tokens.iter_mut().find(|t| t.id == id) else {
            return Ok(false);
        };
        token.revoked_at.get_or_insert(at);
        Ok(true)
    }

    async fn token_used(&self, id: &str, at: i64) -> Result<(), StoreError> {
        if let Some(token) = self.lock().tokens.iter_mut().find(|t| t.id == id) {
            token.last_used_at = Some(at);
        }
        Ok(())
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn token_store(&self) -> Option<&dyn super::tokens::TokenStore> {
        Some(self)
    }

    async fn create_session(&self, record: SessionRecord) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if inner.sessions.contains_key(&record.id) {
            return Err(StoreError::Duplicate(record.id));
        }
        inner.order.push(record.id.clone());
        let mut record = record;
        record.active_at = Some(unix_now());
        inner
            .sessions
            .insert(record.id.clone(), (record, Vec::new()));
        Ok(())
    }

    async fn append(&self, session: &str, events: Vec<StoredEvent>) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let (record, stored) = inner
            .sessions
            .get_mut(session)
            .ok_or_else(|| StoreError::NotFound(session.into()))?;
        let added = events.len();
        for event in events {
            let last = stored.last().map_or(0, |e| e.sequence);
            if event.sequence != last + 1 {
                return Err(StoreError::OutOfOrder {
                    session: session.into(),
                    last,
                    got: event.sequence,
                });
            }
            stored.push(event);
        }
        record.event_count = stored.len() as u64;
        let entries = inner
            .outbox_rules
            .as_ref()
            .map(|rules| rules.entries(&stored[stored.len().saturating_sub(added)..]))
            .unwrap_or_default();
        let now = now_ms();
        for entry in entries {
            inner.outbox.insert(
                (entry.endpoint, session.to_string(), entry.sequence),
                OutboxRow {
                    event: entry.event,
                    attempts: 0,
                    next_attempt_ms: now,
                    state: "pending",
                },
            );
        }
        Ok(())
    }

    async fn events(
        &self,
        session: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let inner = self.lock();
        let (_, stored) = inner
            .sessions
            .get(session)
            .ok_or_else(|| StoreError::NotFound(session.into()))?;
        // Sequences are 1..=len with no gaps, so the event after `after` sits at index `after`.
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(stored.len());
        Ok(stored[start..].iter().take(limit).cloned().collect())
    }

    async fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .sessions
            .get(id)
            .map(|(record, _)| inner.with_snapshot(record)))
    }

    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .order
            .iter()
            .filter_map(|id| inner.sessions.get(id))
            .map(|(record, _)| inner.with_snapshot(record))
            .collect())
    }

    async fn set_native_session_id(&self, id: &str, native: &str) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let (record, _) = inner
            .sessions
            .get_mut(id)
            .ok_or_else(|| StoreError::NotFound(id.into()))?;
        record.native_session_id = Some(native.into());
        Ok(())
    }

    async fn set_usage(&self, id: &str, usage: &str) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let (record, _) = inner
            .sessions
            .get_mut(id)
            .ok_or_else(|| StoreError::NotFound(id.into()))?;
        record.usage = Some(usage.into());
        Ok(())
    }

    async fn set_agent_mode(&self, id: &str, mode: &str) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let (record, _) = inner
            .sessions
            .get_mut(id)
            .ok_or_else(|| StoreError::NotFound(id.into()))?;
        record.agent_mode = mode.into();
        Ok(())
    }

    async fn append_owned(
        &self,
        session: &str,
        owner: &str,
        events: Vec<StoredEvent>,
    ) -> Result<(), StoreError> {
        self.lock().owned(session, owner)?.active_at = Some(unix_now());
        self.append(session, events).await
    }

    async fn claim(&self, id: &str, owner: &str, from: Option<&str>) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let (record, _) = inner
            .sessions
            .get_mut(id)
            .ok_or_else(|| StoreError::NotFound(id.into()))?;
        if record.owner.as_deref() != from {
            return Err(StoreError::NotOwner {
                session: id.into(),
                owner: record.owner.clone().unwrap_or_default(),
            });
        }
        record.owner = Some(owner.into());
        record.state = super::SessionState::Live;
        record.active_at = Some(unix_now());
        Ok(())
    }

    async fn update(&self, id: &str, owner: &str, update: SessionUpdate) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let record = inner.owned(id, owner)?;
        if let Some(state) = update.state {
            record.state = state;
        }
        if let Some((turns, open)) = update.turns {
            record.turns = turns;
            record.turn_open = open;
            record.active_at = Some(unix_now());
        }
        if let Some(how) = update.resumed_how {
            record.resumed_how = Some(how);
        }
        Ok(())
    }

    async fn put_snapshot(
        &self,
        id: &str,
        owner: &str,
        snapshot: StoredSnapshot,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        inner.owned(id, owner)?;
        inner
            .snapshots
            .insert(id.into(), StoredChain::whole(snapshot));
        Ok(())
    }

    async fn put_snapshot_delta(
        &self,
        id: &str,
        owner: &str,
        delta: StoredDelta,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        inner.owned(id, owner)?;
        match inner.snapshots.get_mut(id) {
            Some(chain) if chain.delta_count + 1 == delta.seq => {
                chain.push(delta);
                Ok(())
            }
            kept => Err(StoreError::SnapshotOutOfOrder {
                session: id.into(),
                kept: kept.map_or(0, |c| c.delta_count),
                got: delta.seq,
            }),
        }
    }

    async fn snapshot(&self, id: &str) -> Result<Option<StoredChain>, StoreError> {
        Ok(self.lock().snapshots.get(id).cloned())
    }

    async fn heartbeat(&self, server: &str) -> Result<(), StoreError> {
        self.lock().server = Some(server.into());
        Ok(())
    }

    async fn server_alive(
        &self,
        server: &str,
        _lease: std::time::Duration,
    ) -> Result<bool, StoreError> {
        Ok(self.lock().server.as_deref() == Some(server))
    }

    async fn mark_ended(&self, id: &str, error: Option<&str>) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let (record, _) = inner
            .sessions
            .get_mut(id)
            .ok_or_else(|| StoreError::NotFound(id.into()))?;
        record.ended = true;
        record.end_error = error.map(Into::into);
        Ok(())
    }

    fn set_outbox(&self, rules: Arc<OutboxRules>) -> Result<(), StoreError> {
        self.lock().outbox_rules = Some(rules);
        Ok(())
    }

    async fn claim_deliveries(
        &self,
        _server: &str,
        endpoints: &[String],
        now_ms: i64,
        _lease: std::time::Duration,
        limit: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        // One server uses a memory store, and its one worker finishes a batch before it takes the
        // next: a row is never taken twice, with no lease to keep.
        let inner = self.lock();
        let mut heads: Vec<Delivery> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for ((endpoint, session, sequence), row) in &inner.outbox {
            if row.state != "pending" || !endpoints.contains(endpoint) {
                continue;
            }
            // The first pending row of its endpoint and session: the only one that may go.
            if !seen.insert((endpoint, session)) || row.next_attempt_ms > now_ms {
                continue;
            }
            let Some((record, events)) = inner.sessions.get(session) else {
                continue;
            };
            let Some(stored) = usize::try_from(*sequence)
                .ok()
                .and_then(|s| events.get(s.wrapping_sub(1)))
            else {
                continue;
            };
            heads.push(Delivery {
                endpoint: endpoint.clone(),
                session: session.clone(),
                agent: record.agent.clone(),
                sequence: *sequence,
                event: row.event,
                json: stored.json.clone(),
                attempts: row.attempts,
            });
        }
        heads.sort_by_key(|d| {
            inner
                .outbox
                .get(&(d.endpoint.clone(), d.session.clone(), d.sequence))
                .map_or(0, |row| row.next_attempt_ms)
        });
        heads.truncate(limit);
        Ok(heads)
    }

    async fn record_attempt(&self, attempt: DeliveryAttempt) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let key = (
            attempt.endpoint.clone(),
            attempt.session.clone(),
            attempt.sequence,
        );
        let Some(row) = inner.outbox.get_mut(&key) else {
            return Err(StoreError::NotFound(attempt.session));
        };
        row.attempts = attempt.attempt;
        row.state = attempt.outcome.row_state();
        if attempt.outcome == AttemptOutcome::Retrying {
            row.next_attempt_ms = attempt.next_attempt_ms.unwrap_or(row.next_attempt_ms);
        }
        inner.attempts.push(attempt);
        Ok(())
    }

    async fn delivery_log(
        &self,
        session: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeliveryAttempt>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .attempts
            .iter()
            .rev()
            .filter(|a| session.is_none_or(|s| a.session == s))
            .take(limit)
            .cloned()
            .collect())
    }
}
