//! Following a session over SSE: the events after an offset, in order, with no gap and no
//! duplicate, from the session's feed while the client keeps up and from the store when it fell
//! a ring behind (the store holds every event before any client sees it).
//!
//! Memory stays bounded whatever a client does: the feed is one shared ring, each client has a
//! queue of [`SSE_CLIENT_BUFFER`] frames, and a client that takes none for
//! `ServerConfig::sse_stall` is dropped (its stream ends; it resumes by `Last-Event-ID`).

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use crate::live::{Feed, LiveSession, Subscription};
use crate::polls::Seen;
use crate::state::Server;
use crate::store::StoredEvent;

/// Frames waiting for one SSE client.
pub(crate) const SSE_CLIENT_BUFFER: usize = 64;

pub(crate) type Frame = Result<Event, Infallible>;

/// The SSE response sending what a follower puts in `frames`, with keep-alive comments.
pub(crate) fn sse(frames: mpsc::Receiver<Frame>) -> Response {
    Sse::new(ReceiverStream::new(frames))
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `task`, ended early when the server stops: its stream ends, so that its connection closes.
pub(crate) async fn until_stopped(
    stopping: agent_api::request::CancellationToken,
    task: impl std::future::Future<Output = ()>,
) {
    tokio::select! {
        () = task => {}
        () = stopping.cancelled() => {}
    }
}

/// Whether an event waits on the client: the turn stops there until it replies.
fn asks(event: &StoredEvent) -> bool {
    matches!(event.kind(), "permission.requested" | "question.requested")
}

/// Finds a turn's last event in a session's log: its `turn_completed`, or the terminal `error`
/// that follows its `turn_failed`.
struct TurnEnd {
    turn: u64,
    failed: bool,
}

impl TurnEnd {
    /// Whether `event`, the next of the log, is the turn's last.
    fn reached(&mut self, event: &StoredEvent) -> bool {
        if self.failed || event.kind() == "session.ended" {
            return true;
        }
        match event.closed_turn() {
            Some(closed) if closed.turn == self.turn => {
                // A failed turn's terminal error comes next.
                self.failed = closed.failed;
                !closed.failed
            }
            _ => false,
        }
    }
}

/// One client's stream of one session's events.
pub(crate) struct Follower {
    server: Server,
    id: String,
    include_raw: bool,
    frames: mpsc::Sender<Frame>,
    /// The last sequence sent.
    last: u64,
    /// Counts this stream among the SSE subscribers while it lives.
    _counted: crate::metrics::Counted,
}

impl Follower {
    /// A follower sending `id`'s events after `last` to `frames`.
    pub(crate) fn new(
        server: Server,
        id: String,
        last: u64,
        include_raw: bool,
        frames: mpsc::Sender<Frame>,
    ) -> Self {
        let counted = server.inner.metrics.sse_opened();
        Self {
            server,
            id,
            include_raw,
            frames,
            last,
            _counted: counted,
        }
    }

    /// Sends one event; `false` when the client is gone, or took nothing for the stall bound.
    async fn send(&mut self, event: &StoredEvent) -> bool {
        let frame = Ok(Event::default()
            .id(event.sequence.to_string())
            .data(event.render(self.include_raw)));
        match tokio::time::timeout(self.server.inner.config.sse_stall, self.frames.send(frame))
            .await
        {
            Ok(Ok(())) => {
                self.last = event.sequence;
                true
            }
            _ => false,
        }
    }

    /// Sends the stored events after the last one sent, up to `until` when given, a page at a
    /// time, stopping after one that `stop` accepts: `Some(stopped)`, or `None` when the client
    /// is gone or the store failed.
    async fn catch_up(
        &mut self,
        until: Option<u64>,
        mut stop: impl FnMut(&StoredEvent) -> bool,
    ) -> Option<bool> {
        let page = self.server.inner.config.max_page.max(1);
        loop {
            let want = until.map_or(page, |until| {
                usize::try_from(until.saturating_sub(self.last))
                    .unwrap_or(page)
                    .min(page)
            });
            if want == 0 {
                return Some(false);
            }
            let events = self
                .server
                .inner
                .store
                .events(&self.id, self.last, want)
                .await
                .ok()?;
            for event in &events {
                if !self.send(event).await {
                    return None;
                }
                if stop(event) {
                    return Some(true);
                }
            }
            if events.len() < want {
                return Some(false);
            }
        }
    }

    /// Sends a feed event after anything between it and the last one sent (from the store);
    /// `Some(stopped)` as [`Follower::catch_up`].
    async fn follow(
        &mut self,
        event: &StoredEvent,
        stop: fn(&StoredEvent) -> bool,
    ) -> Option<bool> {
        if event.sequence <= self.last {
            return Some(false);
        }
        if event.sequence > self.last + 1 && self.catch_up(Some(event.sequence - 1), stop).await? {
            return Some(true);
        }
        if !self.send(event).await {
            return None;
        }
        Some(stop(event))
    }

    /// The events of a session: the stored ones, then the live ones as they are stored; ends
    /// once the session has ended. A session this server does not run is followed in the store.
    pub(crate) async fn session(
        mut self,
        subscription: Option<Subscription>,
        elsewhere: Option<watch::Receiver<Seen>>,
    ) {
        let never = |_: &StoredEvent| false;
        let Some(mut subscription) = subscription else {
            self.stored(elsewhere).await;
            return;
        };
        if self.catch_up(None, never).await.is_none() {
            return;
        }
        loop {
            let next = tokio::select! {
                next = subscription.feed.recv() => next,
                () = self.frames.closed() => return,
            };
            let sent = match next {
                Ok(Feed::Event(event)) => self.follow(&event, never).await,
                Ok(Feed::TurnEnded(_)) => Some(false),
                Ok(Feed::Ended) | Err(broadcast::error::RecvError::Closed) => {
                    let _ = self.catch_up(None, never).await;
                    return;
                }
                // A ring behind: every event it missed is in the store.
                Err(broadcast::error::RecvError::Lagged(_)) => self.catch_up(None, never).await,
            };
            if sent.is_none() {
                return;
            }
        }
    }

    /// The events of turn `turn` (its first one numbered after `self.last`); ends after its last
    /// event, or after one that waits on the client.
    pub(crate) async fn turn(
        mut self,
        mut subscription: Subscription,
        live: Arc<LiveSession>,
        turn: u64,
    ) {
        loop {
            let next = tokio::select! {
                next = subscription.feed.recv() => next,
                () = self.frames.closed() => return,
            };
            let sent = match next {
                Ok(Feed::Event(event)) => self.follow(&event, asks).await,
                Ok(Feed::TurnEnded(ended)) if ended == turn => return,
                Ok(Feed::TurnEnded(_)) => Some(false),
                Ok(Feed::Ended) | Err(broadcast::error::RecvError::Closed) => {
                    let _ = self.catch_up(None, asks).await;
                    return;
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Its end may be among what was missed: read whether it is over first, then
                    // catch up; over, the store holds its every event. (A turn started since by
                    // another client would be sent on too: turns are serial, it follows on.)
                    let over = live.current_turn() != Some(turn);
                    match self.catch_up(None, asks).await {
                        Some(false) if !over => Some(false),
                        _ => return,
                    }
                }
            };
            if sent != Some(false) {
                return;
            }
        }
    }

    /// The events of turn `turn` of a session another server runs (its first one numbered after
    /// `self.last`), from the store as `seen` says it grows: ends after its last event (its
    /// `turn_completed`, or the terminal `error` after its `turn_failed`), after one that waits on
    /// the client, or once the session ended.
    pub(crate) async fn stored_turn(mut self, seen: watch::Receiver<Seen>, turn: u64) {
        let mut end = TurnEnd {
            turn,
            failed: false,
        };
        self.stored_until(seen, |event| asks(event) || end.reached(event), true)
            .await;
    }

    /// Follows a session this server does not run, from the store: another server sharing it
    /// runs it (`elsewhere`: the shared poll of its record), or none does (it ended). Ends once it
    /// has ended and every event was sent.
    async fn stored(mut self, elsewhere: Option<watch::Receiver<Seen>>) {
        match elsewhere {
            Some(seen) => self.stored_until(seen, |_| false, false).await,
            None => {
                let _ = self.catch_up(None, |_| false).await;
            }
        }
    }

    /// Sends the stored events as `seen` says the log grows, until one that `stop` accepts, the
    /// session ended (every event sent), or the client is gone; `owned`: also once no server
    /// runs the session (looked at after each lease without an event).
    async fn stored_until(
        &mut self,
        mut seen: watch::Receiver<Seen>,
        mut stop: impl FnMut(&StoredEvent) -> bool,
        owned: bool,
    ) {
        let lease = self.server.inner.config.server_lease;
        loop {
            // Whether it ended is read before its events: an event stored before the end is sent.
            let ended = seen.borrow_and_update().ended;
            match self.catch_up(None, &mut stop).await {
                Some(false) if !ended => {}
                _ => return,
            }
            tokio::select! {
                changed = seen.changed() => {
                    // The poll stopped: the session ended (or left the store), or the server stops.
                    if changed.is_err() {
                        let _ = self.catch_up(None, &mut stop).await;
                        return;
                    }
                }
                () = tokio::time::sleep(lease), if owned => {
                    // Its owner died (or was paused) mid-turn: nothing goes on until a client
                    // brings the session back, so the stream ends, as the owner's own would
                    // have been cut.
                    if !self.server.runs_anywhere(&self.id).await {
                        let _ = self.catch_up(None, &mut stop).await;
                        return;
                    }
                }
                () = self.frames.closed() => return,
            }
        }
    }
}
