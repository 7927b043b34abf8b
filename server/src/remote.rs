//! Following sessions another server sharing the store runs: one poll of the store per session,
//! however many clients follow it here, and the same bound of followers as a session this
//! server runs (`ServerConfig::max_subscribers`). The fleet's `LISTEN/NOTIFY` will replace the
//! poll; until then it reads one record every [`STORE_POLL`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use axum::http::StatusCode;
use tokio::sync::watch;

use crate::error::ApiError;
use crate::state::{Inner, Server};

/// How often a session run by another server sharing the store is read again.
const STORE_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// What the last poll saw of a session: how many events it holds, whether it ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) events: u64,
    pub(crate) ended: bool,
}

/// The polls running now, by session id.
#[derive(Debug, Default)]
pub(crate) struct Polls(Mutex<HashMap<String, watch::Sender<Seen>>>);

impl Polls {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<Seen>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Server {
    /// Follows `id` (a session this server does not run) through the shared poll, starting it
    /// for the first follower; 429 past the bound of followers.
    pub(crate) fn follow_elsewhere(&self, id: &str) -> Result<watch::Receiver<Seen>, ApiError> {
        let max = self.inner.config.max_subscribers;
        let mut polls = self.inner.polls.lock();
        if let Some(poll) = polls.get(id) {
            if poll.receiver_count() >= max {
                return Err(ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too_many_subscribers",
                    format!("this session has {max} subscribers already; try again later"),
                ));
            }
            return Ok(poll.subscribe());
        }
        let (poll, seen) = watch::channel(Seen::default());
        polls.insert(id.to_string(), poll.clone());
        tokio::spawn(run(Arc::downgrade(&self.inner), id.to_string(), poll));
        Ok(seen)
    }
}

/// Reads the session's record every [`STORE_POLL`] while anyone follows it and it has not ended.
async fn run(server: Weak<Inner>, id: String, poll: watch::Sender<Seen>) {
    loop {
        let Some(inner) = server.upgrade() else {
            return;
        };
        let ended = match inner.store.session(&id).await {
            Ok(Some(record)) => {
                let seen = Seen {
                    events: record.event_count,
                    ended: record.ended,
                };
                poll.send_if_modified(|last| std::mem::replace(last, seen) != seen);
                record.ended
            }
            // Gone from the store: nothing more will come.
            Ok(None) => true,
            // A store that fails now may answer at the next poll.
            Err(_) => false,
        };
        {
            let mut polls = inner.polls.lock();
            if ended || poll.receiver_count() == 0 {
                polls.remove(&id);
                return;
            }
        }
        let stopping = inner.stopping.clone();
        drop(inner);
        tokio::select! {
            () = tokio::time::sleep(STORE_POLL) => {}
            () = stopping.cancelled() => return,
        }
    }
}
