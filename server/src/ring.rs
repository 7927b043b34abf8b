//! A live session's feed: the bounded ring ([`tokio::sync::broadcast`]) its subscribers follow,
//! there only while someone follows.
//!
//! A ring of the default 1,024 slots is about 48 KiB, made whole when it is made: held by every
//! open session, it was most of what an idle session cost. An event published while nobody
//! follows reaches nobody whether or not a ring exists (a broadcast keeps nothing for receivers
//! yet to come: a subscriber catches up from the store, where every event is before it is
//! published), so the ring is made by the first subscriber and let go when the last one leaves
//! (or, should a receiver go without saying so, by the first event published after it).
//! Let go, it also frees the last events it kept (up to its size, each a stored event).

use std::sync::{Mutex, PoisonError};

use tokio::sync::broadcast;

use crate::store::StoredEvent;

/// What a session's subscribers receive.
#[derive(Debug, Clone)]
pub(crate) enum Feed {
    /// A stored event.
    Event(std::sync::Arc<StoredEvent>),
    /// The turn numbered so has sent its last event.
    TurnEnded(u64),
    /// The session ended: no more events.
    Ended,
}

/// The ring of one session, made on demand.
pub(crate) struct FeedRing {
    /// Slots of the ring once made (`ServerConfig::sse_buffer`).
    capacity: usize,
    /// A lock, not a once-cell: a subscriber that makes the ring and a publisher that finds none
    /// are ordered by it, as a broadcast orders a subscriber and a send that finds no receiver.
    ring: Mutex<Option<broadcast::Sender<Feed>>>,
}

impl FeedRing {
    /// No ring yet; one of `capacity` slots (at least 1) once someone subscribes.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            ring: Mutex::new(None),
        }
    }

    /// A receiver of everything published from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Feed> {
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        ring.get_or_insert_with(|| broadcast::channel(self.capacity).0)
            .subscribe()
    }

    /// Publishes `feed` to the subscribers; with none left, the ring is let go.
    pub(crate) fn send(&self, feed: Feed) {
        self.send_all(std::iter::once(feed));
    }

    /// [`FeedRing::send`] for each of `feeds`, in order, under one lock.
    pub(crate) fn send_all(&self, feeds: impl IntoIterator<Item = Feed>) {
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(tx) = ring.as_ref() else {
            return;
        };
        for feed in feeds {
            if tx.send(feed).is_err() {
                // Nobody follows any more (a broadcast refuses a send without receivers).
                *ring = None;
                return;
            }
        }
    }

    /// Lets the ring go when the caller's receiver is the last one of it: called by a subscriber
    /// on its way out, its receiver still held (a ring goes only once it has no receiver, so
    /// every receiver there is belongs to the ring held now, the caller's too).
    pub(crate) fn leave(&self) {
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        if ring.as_ref().is_some_and(|tx| tx.receiver_count() <= 1) {
            *ring = None;
        }
    }

    /// Whether a ring is held now.
    #[cfg(test)]
    pub(crate) fn is_made(&self) -> bool {
        self.ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_ring_is_made_by_the_first_subscriber_and_let_go_once_nobody_follows() {
        let ring = FeedRing::new(4);
        ring.send(Feed::TurnEnded(1));
        assert!(!ring.is_made(), "nobody follows: no ring");
        let mut first = ring.subscribe();
        let mut second = ring.subscribe();
        assert!(ring.is_made());
        ring.send_all([Feed::TurnEnded(2), Feed::Ended]);
        for rx in [&mut first, &mut second] {
            assert!(matches!(rx.recv().await, Ok(Feed::TurnEnded(2))));
            assert!(matches!(rx.recv().await, Ok(Feed::Ended)));
        }
        drop(first);
        ring.send(Feed::TurnEnded(3));
        assert!(ring.is_made(), "one subscriber is left");
        assert!(matches!(second.recv().await, Ok(Feed::TurnEnded(3))));
        drop(second);
        ring.send(Feed::TurnEnded(4));
        assert!(
            !ring.is_made(),
            "the last receiver went: the next event lets the ring go"
        );
        let leaving = ring.subscribe();
        let staying = ring.subscribe();
        ring.leave();
        drop(leaving);
        assert!(ring.is_made(), "a subscriber left, one is still there");
        ring.leave();
        assert!(
            !ring.is_made(),
            "the last subscriber left: the ring is let go"
        );
        drop(staying);
        let mut later = ring.subscribe();
        ring.send(Feed::TurnEnded(5));
        assert!(
            matches!(later.recv().await, Ok(Feed::TurnEnded(5))),
            "a later subscriber gets a ring of its own, from what is published after it"
        );
    }
}
