//! [`MemoryStore`]: sessions and events in this process's memory (`--store memory`, for tests).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use super::{SessionRecord, Store, StoreError, StoredEvent};

/// A store that keeps everything in memory; nothing survives the process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    order: Vec<String>,
    sessions: HashMap<String, (SessionRecord, Vec<StoredEvent>)>,
}

impl MemoryStore {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn create_session(&self, record: SessionRecord) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if inner.sessions.contains_key(&record.id) {
            return Err(StoreError::Duplicate(record.id));
        }
        inner.order.push(record.id.clone());
        inner
            .sessions
            .insert(record.id.clone(), (record, Vec::new()));
        Ok(())
    }

    async fn append(&self, session: &str, events: Vec<StoredEvent>) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let (record, stored) = inner
            .sessions
            .get_mut(session)
            .ok_or_else(|| StoreError::NotFound(session.into()))?;
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
        Ok(self
            .lock()
            .sessions
            .get(id)
            .map(|(record, _)| record.clone()))
    }

    async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let inner = self.lock();
        Ok(inner
            .order
            .iter()
            .filter_map(|id| inner.sessions.get(id))
            .map(|(record, _)| record.clone())
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
}
