//! The polls of sessions another server runs ([`crate::remote`] starts them), by session id, and
//! what each last saw: plain state the server holds, told of new events by the store's
//! notifications ([`crate::fleet`]) or by its own reads.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::watch;

use crate::store::Store;

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
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<Seen>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What the store said of `session` (a notification, or a read): its followers wake when it
    /// holds more events than they were told, or ended.
    pub(crate) fn seen(&self, session: &str, seen: Seen) {
        if let Some(poll) = self.lock().get(session) {
            poll.send_if_modified(|last| advance(last, seen));
        }
    }

    /// Reads every followed session's record in `store` again (notifications may have been
    /// missed).
    pub(crate) async fn reread(&self, store: &dyn Store) {
        let ids: Vec<String> = self.lock().keys().cloned().collect();
        for id in ids {
            if let Ok(Some(record)) = store.session(&id).await {
                self.seen(
                    &id,
                    Seen {
                        events: record.event_count,
                        ended: record.ended,
                    },
                );
            }
        }
    }
}

/// Moves `last` on to `seen` where it says more (a read older than a notification says less);
/// whether it changed.
pub(crate) fn advance(last: &mut Seen, seen: Seen) -> bool {
    let next = Seen {
        events: last.events.max(seen.events),
        ended: last.ended || seen.ended,
    };
    std::mem::replace(last, next) != next
}
