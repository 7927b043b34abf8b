//! Following sessions another server sharing the store runs: one watch per session, however many
//! clients follow it here, and the same bound of followers as a session this server runs
//! (`ServerConfig::max_subscribers`). On a store with notifications (PostgreSQL: a fleet), the
//! watch is woken by the store's `NOTIFY` of the session's new event count ([`crate::fleet`]),
//! read once when it starts and again only when notifications may have been missed; on any other
//! store, the record is read every [`STORE_POLL`].

use std::sync::{Arc, Weak};

use axum::http::StatusCode;
use tokio::sync::watch;

use crate::error::ApiError;
use crate::polls::{advance, Seen};
use crate::state::{Inner, Server};

/// How often a session run by another server sharing the store is read again.
const STORE_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// How often a session followed through the store's notifications is read all the same: a
/// safety net, never the path an event takes.
const NOTIFIED_REREAD: std::time::Duration = std::time::Duration::from_secs(5);

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

/// Reads the session's record while anyone follows it and it has not ended: every
/// [`STORE_POLL`], or once when the store's notifications wake its followers (and again after
/// [`NOTIFIED_REREAD`], in case).
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
                poll.send_if_modified(|last| advance(last, seen));
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
        let pause = match inner.store.fleet() {
            Some(_) => NOTIFIED_REREAD,
            None => STORE_POLL,
        };
        drop(inner);
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = poll.closed() => {}
            () = stopping.cancelled() => return,
        }
    }
}
