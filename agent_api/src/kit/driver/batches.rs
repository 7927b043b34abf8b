//! How the driver hands its events to the caller within the byte budget: the events the
//! transcript holds become one batch, sent at once when the budget has room; otherwise the batch
//! waits, and waiting for its room is one branch of the driver's loop, so that cancellation, the
//! timeout and control messages still act while the caller is paused.

use super::{Core, Pending};
use crate::pipeline::budget::{self, Closed, Room, EVENTS_PER_BATCH};
use crate::vocabulary::universal::UniversalEvent;

impl Core {
    /// Takes the events the transcript holds as batches of at most [`EVENTS_PER_BATCH`] (one
    /// native line may make more) and sends each at once while the byte budget has room; the
    /// first that finds none waits in `pending`, the rest in the transcript. Whether a batch
    /// went to the caller.
    pub(super) fn stage(&mut self) -> bool {
        let mut handed_over = false;
        loop {
            if self.pending.is_none() {
                if self.transcript.pending_events() == 0 {
                    self.raw_bytes = 0;
                    return handed_over;
                }
                let spare = self.events_tx.as_ref().and_then(|tx| tx.spare());
                let events: Vec<UniversalEvent> =
                    self.transcript.take_events_reusing(spare, EVENTS_PER_BATCH);
                // The raw payloads shared by these events count with the first batch of them.
                let raw_bytes = std::mem::take(&mut self.raw_bytes);
                let weight = budget::batch_weight(&events) + raw_bytes;
                self.pending = Some(Pending { events, weight });
            }
            let (Some(tx), Some(pending)) = (&self.events_tx, &self.pending) else {
                // Nobody listens any more; the run goes on to reap its process.
                self.pending = None;
                drop(self.transcript.take_events());
                return handed_over;
            };
            let sent = match tx.try_room(pending.weight) {
                Ok(Some(room)) => self.send_pending(Ok(room)),
                Ok(None) => return handed_over,
                Err(closed) => self.send_pending(Err(closed)),
            };
            handed_over |= sent;
            if !sent {
                return handed_over;
            }
        }
    }

    /// Room in the budget for the waiting batch; never ready while none waits. (It borrows
    /// only the sender: the protocol is not `Sync`, so the driver's future cannot hold `&self`.)
    pub(super) fn room_for_pending(
        &self,
    ) -> impl std::future::Future<Output = Result<Room, Closed>> + Send + '_ {
        let (tx, weight) = (
            self.events_tx.as_ref(),
            self.pending.as_ref().map(|p| p.weight),
        );
        async move {
            match (tx, weight) {
                (Some(tx), Some(weight)) => tx.room(weight).await,
                _ => std::future::pending().await,
            }
        }
    }

    /// Sends the waiting batch into the room taken for it; whether the caller got it.
    fn send_pending(&mut self, room: Result<Room, Closed>) -> bool {
        let Some(Pending { events, .. }) = self.pending.take() else {
            return false;
        };
        let sent = match (&self.events_tx, room) {
            (Some(tx), Ok(room)) => tx.push(events, room).is_ok(),
            _ => false,
        };
        if !sent {
            // Nobody listens any more; the run goes on to reap its process.
            self.events_tx = None;
        }
        sent
    }

    /// Sends everything the transcript holds, waiting for the caller to make room.
    pub(super) async fn flush(&mut self) {
        self.stage();
        while self.pending.is_some() {
            let room = self.room_for_pending().await;
            self.send_pending(room);
            self.stage();
        }
    }

    /// After a wait for room: the agent's output drains again, so an exited agent's drain grace
    /// starts again (it counts only while the driver reads).
    pub(super) fn on_room(&mut self, room: Result<Room, Closed>) {
        self.send_pending(room);
        if !self.source_done {
            if let Some(drain) = &mut self.drain {
                drain.on_output();
            }
        }
    }

    /// Whether the driver reads the agent's output now: while no batch waits for room, and,
    /// once the run is being stopped and the agent has exited, always (what is left in the
    /// pipe is bounded by the pipe, and the run must end without the caller).
    pub(super) fn may_read(&self) -> bool {
        self.pending.is_none()
            || (self.exit.is_some() && (self.stop.is_some() || self.fatal.is_some()))
    }
}
