//! The byte budget of a run: every event waiting between the agent's stdout and the caller is
//! counted in bytes; when the budget is spent the driver stops reading the agent's stdout (its
//! pipe fills and the agent blocks), and nothing is ever dropped or reordered.
//!
//! Events cross in batches (one hand-off for all the lines already waiting). A batch holds its
//! weight in permits of one semaphore until the caller has taken its last event.
//!
//! Events the SDK itself consumes (the wrapper view projects each universal event, then has no
//! use for it) stay in their batch, and the batch goes back to the driver whole: there the
//! transcript frees one of its events for each new event it builds, and its vector gathers a
//! later batch. With the system
//! allocator, memory allocated on one thread and freed on another takes the allocating thread's
//! arena lock for every free: with the driver and the caller on two threads, the two contended
//! for it on every event, which made a wrapper-view run cost up to three times its own work.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{mpsc, Semaphore};

use crate::vocabulary::universal::{
    ContentPart, UniversalEvent, UniversalEventBody as Body, UniversalItem,
};

/// Default byte budget of a run: 1 MiB.
pub const DEFAULT_BUFFER_BUDGET: usize = 1024 * 1024;

/// Most events sent on as one batch (`spec/run-protocol.md`).
pub const EVENTS_PER_BATCH: usize = 256;

/// The semaphore holds at most `u32::MAX` permits per acquisition; budgets are capped there.
const MAX_BUDGET: usize = u32::MAX as usize;

struct Batch {
    events: Vec<UniversalEvent>,
    weight: usize,
}

/// The driver's end: sends batches once the budget has room for them.
pub(crate) struct BatchSender {
    tx: mpsc::UnboundedSender<Batch>,
    room: Arc<Semaphore>,
    budget: usize,
    /// Batches the caller's side is done with (a `Mutex` only so that the driver's future,
    /// which borrows the sender, stays `Send`: nothing else locks it).
    returned: std::sync::Mutex<Returned>,
    /// Whether the caller last waited for a batch inside a task (see [`BatchSender::caller_is_task`]).
    caller_in_task: Arc<AtomicBool>,
}

/// Batches back from the caller's side, and the few kept to hold later batches.
struct Returned {
    rx: mpsc::UnboundedReceiver<Vec<UniversalEvent>>,
    spares: Vec<Vec<UniversalEvent>>,
}

/// Emptied batch vectors a run keeps for its next batches: two cover a caller that keeps up
/// (one batch being read, one being filled) at 40 KiB each for full batches.
const SPARES: usize = 2;

/// The caller's end: hands out events one at a time and gives their bytes back to the budget.
pub(crate) struct BatchReceiver {
    rx: mpsc::UnboundedReceiver<Batch>,
    room: Arc<Semaphore>,
    budget: usize,
    /// The batch being read: [`BatchReceiver::poll_next`] takes its events out,
    /// [`BatchReceiver::poll_lend`] reads them in place (`lent` of them so far).
    current: VecDeque<UniversalEvent>,
    lent: usize,
    current_weight: usize,
    /// Events handed back with [`BatchReceiver::recycle`], not yet returned to the driver.
    spent: Vec<UniversalEvent>,
    returned_tx: mpsc::UnboundedSender<Vec<UniversalEvent>>,
    caller_in_task: Arc<AtomicBool>,
}

#[cfg(test)]
impl BatchReceiver {
    /// How many events each batch that waits to be read holds, oldest first (taking them).
    pub(crate) fn waiting_batch_sizes(&mut self) -> Vec<usize> {
        std::iter::from_fn(|| self.rx.try_recv().ok())
            .map(|batch| batch.events.len())
            .collect()
    }
}

/// A budget of `budget` bytes (at least 1).
pub(crate) fn channel(budget: usize) -> (BatchSender, BatchReceiver) {
    let budget = budget.clamp(1, MAX_BUDGET);
    let (tx, rx) = mpsc::unbounded_channel();
    let (returned_tx, returned_rx) = mpsc::unbounded_channel();
    let room = Arc::new(Semaphore::new(budget));
    // Until the caller has waited once, as if it were a task (the driver then yields as it always did).
    let caller_in_task = Arc::new(AtomicBool::new(true));
    let receiver = BatchReceiver {
        rx,
        room: room.clone(),
        budget,
        current: VecDeque::new(),
        lent: 0,
        current_weight: 0,
        spent: Vec::new(),
        returned_tx,
        caller_in_task: caller_in_task.clone(),
    };
    let returned = std::sync::Mutex::new(Returned {
        rx: returned_rx,
        spares: Vec::new(),
    });
    (
        BatchSender {
            tx,
            room,
            budget,
            returned,
            caller_in_task,
        },
        receiver,
    )
}

/// Nobody reads the events any more.
pub(crate) struct Closed;

/// Room taken in the budget for one batch, to be filled by [`BatchSender::push`].
#[must_use]
pub(crate) struct Room(usize);

impl BatchSender {
    /// The weight a batch of `weight` bytes holds: a batch heavier than the whole budget waits
    /// until everything before it was taken, then goes alone.
    fn held(&self, weight: usize) -> usize {
        weight.clamp(1, self.budget)
    }

    /// Room for a batch of `weight` bytes, if the budget has it now.
    pub(crate) fn try_room(&self, weight: usize) -> Result<Option<Room>, Closed> {
        let held = self.held(weight);
        match self.room.try_acquire_many(held as u32) {
            Ok(permits) => {
                permits.forget();
                Ok(Some(Room(held)))
            }
            Err(tokio::sync::TryAcquireError::NoPermits) => Ok(None),
            Err(tokio::sync::TryAcquireError::Closed) => Err(Closed),
        }
    }

    /// Waits for room for a batch of `weight` bytes. Cancel-safe: dropped before it is ready,
    /// it takes nothing, so the driver can wait for it beside its other inputs.
    pub(crate) async fn room(&self, weight: usize) -> Result<Room, Closed> {
        let held = self.held(weight);
        let permits = self
            .room
            .acquire_many(held as u32)
            .await
            .map_err(|_| Closed)?;
        permits.forget();
        Ok(Room(held))
    }

    /// Sends `events` in the room taken for them (and first empties what came back).
    pub(crate) fn push(&self, events: Vec<UniversalEvent>, room: Room) -> Result<(), Closed> {
        self.reclaim();
        self.tx
            .send(Batch {
                events,
                weight: room.0,
            })
            .map_err(|_| Closed)
    }

    /// Takes back, on this (the driver's) thread, the batches the caller's side is done with,
    /// and keeps a few whole to hold later batches (the others are freed here): a batch vector
    /// freed made the allocator merge its free lists (it is over glibc's 64 KiB consolidation
    /// threshold once merged with its neighbours), and a new one was allocated for the next
    /// batch anyway.
    fn reclaim(&self) {
        let Ok(mut returned) = self.returned.try_lock() else {
            return;
        };
        while let Ok(batch) = returned.rx.try_recv() {
            // Only the newest batch back keeps its events for the transcript to free: spent
            // events held longer would be memory outside the budget.
            returned.spares.iter_mut().for_each(Vec::clear);
            let useful = batch.capacity() <= 2 * EVENTS_PER_BATCH;
            if useful && returned.spares.len() < SPARES {
                returned.spares.push(batch);
            }
        }
    }

    /// A batch vector back from the caller's side, to gather the next batch in, if one came
    /// back. It still holds the spent events: the transcript frees them one by one as it builds
    /// new ones (see [`crate::kit::transcript::Transcript`]'s `take_events_reusing`).
    pub(crate) fn spare(&self) -> Option<Vec<UniversalEvent>> {
        self.reclaim();
        self.returned.try_lock().ok()?.spares.pop()
    }

    /// Whether the caller last waited for a batch from inside a task (of any runtime), rather
    /// than on a thread of its own (`Runtime::block_on`, a blocking thread): only such a caller
    /// can be woken into the driver's own worker and run there before it, so only for it is
    /// the driver's yield after a hand-over worth its cost (on a multi-thread runtime the yield
    /// wakes the other worker, a syscall and a wake-up per batch, for nothing).
    pub(crate) fn caller_is_task(&self) -> bool {
        self.caller_in_task.load(Ordering::Relaxed)
    }

    /// Waits for room, then sends `events` weighing `weight` bytes.
    pub(crate) async fn send(
        &self,
        events: Vec<UniversalEvent>,
        weight: usize,
    ) -> Result<(), Closed> {
        let room = self.room(weight).await?;
        self.push(events, room)
    }
}

impl BatchReceiver {
    /// Bytes of events waiting now, counted against the budget.
    pub(crate) fn buffered_bytes(&self) -> usize {
        self.budget - self.room.available_permits().min(self.budget)
    }

    /// Takes back an event its consumer is done with, to be freed by the driver (see the module
    /// docs): a universal-view caller's, through `UniversalEvents::give_back`.
    pub(crate) fn recycle(&mut self, event: UniversalEvent) {
        self.spent.push(event);
    }

    /// The next event, in order, to keep.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<UniversalEvent>> {
        loop {
            if let Some(event) = self.current.pop_front() {
                if self.current.is_empty() {
                    self.retire();
                }
                return Poll::Ready(Some(event));
            }
            if !std::task::ready!(self.poll_batch(cx)) {
                return Poll::Ready(None);
            }
        }
    }

    /// The next event, in order, lent: it stays in its batch, and the batch goes back to the
    /// driver whole once read (for the wrapper view, which only projects each event). The
    /// batch's bytes count against the budget until the call after its last event.
    pub(crate) fn poll_lend(&mut self, cx: &mut Context<'_>) -> Poll<Option<&UniversalEvent>> {
        loop {
            if self.lent < self.current.len() {
                self.lent += 1;
                return Poll::Ready(self.current.get(self.lent - 1));
            }
            if !self.current.is_empty() {
                self.retire();
            }
            if !std::task::ready!(self.poll_batch(cx)) {
                return Poll::Ready(None);
            }
        }
    }

    /// Waits for the next batch; `false` once the driver is gone and everything was read.
    fn poll_batch(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        // Between batches: the events handed back since the last one was read go home now.
        if !self.spent.is_empty() {
            let _ = self.returned_tx.send(std::mem::take(&mut self.spent));
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(batch)) => {
                self.current = batch.events.into();
                self.current_weight = batch.weight;
                if self.current.is_empty() {
                    self.retire();
                }
                Poll::Ready(true)
            }
            Poll::Ready(None) => Poll::Ready(false),
            Poll::Pending => {
                // Once per wait, and written only when it changes: the flag's cache line is
                // read by the driver after every batch.
                let in_task = tokio::task::try_id().is_some();
                if self.caller_in_task.load(Ordering::Relaxed) != in_task {
                    self.caller_in_task.store(in_task, Ordering::Relaxed);
                }
                Poll::Pending
            }
        }
    }

    /// The current batch is read: its bytes go back to the budget, and its vector (with the
    /// events still in it when they were lent, and those handed back) to the driver; if the
    /// driver is gone, they are dropped here.
    fn retire(&mut self) {
        self.release();
        self.lent = 0;
        let mut batch = Vec::from(std::mem::take(&mut self.current));
        batch.append(&mut self.spent);
        if batch.capacity() > 0 {
            let _ = self.returned_tx.send(batch);
        }
    }

    fn release(&mut self) {
        self.room
            .add_permits(std::mem::take(&mut self.current_weight));
    }
}

impl Drop for BatchReceiver {
    fn drop(&mut self) {
        // The driver waiting for room learns that nobody listens.
        self.room.close();
    }
}

/// What one heap allocation costs beyond its bytes: the allocator's header and rounding.
const PER_ALLOCATION: usize = 32;

fn string(s: &str) -> usize {
    s.len() + PER_ALLOCATION
}

/// An inline string's weight beyond its struct: its heap room, if it has any.
fn heap_text(room: usize) -> usize {
    match room {
        0 => 0,
        room => room + PER_ALLOCATION,
    }
}

fn opt(s: &Option<String>) -> usize {
    s.as_deref().map_or(0, string)
}

/// What an event weighs in memory, roughly: its struct and the allocations it owns (so that
/// the budget counts what the process holds, not only the text). Shared raw payloads are
/// counted once per native line by the driver, not here.
pub(crate) fn weight(event: &UniversalEvent) -> usize {
    // `time` and the session ids are shared with the transcript and the other events.
    // The id is inline (its bytes are in the struct) except for a long one read back.
    let envelope =
        std::mem::size_of::<UniversalEvent>() + heap_text(event.event_id.heap_capacity());
    envelope
        + match &event.body {
            // The ids are shared by every delta of the item.
            // Its room, not its length: an answer's joined deltas hold room for more.
            Body::ItemDelta(d) => heap_text(d.delta.heap_capacity()),
            Body::ItemStarted(d) | Body::ItemCompleted(d) => item_weight(&d.item),
            // Status-like events: a few short strings.
            _ => 256,
        }
}

/// What a batch weighs: its events, and the room its vector holds for more (a batch vector
/// grows by doubling, so up to half of it can be empty slots the process still holds).
pub(crate) fn batch_weight(events: &Vec<UniversalEvent>) -> usize {
    let spare = events.capacity() - events.len();
    events.iter().map(weight).sum::<usize>() + spare * std::mem::size_of::<UniversalEvent>()
}

fn item_weight(item: &UniversalItem) -> usize {
    let parts: usize = item
        .content
        .iter()
        .map(|part| {
            std::mem::size_of::<ContentPart>()
                + match part {
                    ContentPart::Text { text } | ContentPart::Reasoning { text, .. } => {
                        string(text)
                    }
                    ContentPart::ToolCall {
                        name,
                        arguments,
                        call_id,
                    } => string(name) + string(arguments) + string(call_id),
                    ContentPart::ToolResult { call_id, output } => string(call_id) + string(output),
                    ContentPart::FileRef { path, diff, .. } => string(path) + opt(diff),
                    // JSON, images and status parts are small or rare; a flat estimate will do.
                    _ => 256,
                }
        })
        .sum();
    string(&item.item_id) + opt(&item.native_item_id) + opt(&item.parent_id) + parts + 256
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::transcript::{NewItem, Transcript};
    use crate::vocabulary::universal::ItemRole;

    fn events(n: usize) -> Vec<UniversalEvent> {
        let mut t = Transcript::new("sess_budget".into(), false);
        let id = t.start_item(NewItem::message(ItemRole::Assistant));
        for _ in 0..n {
            t.delta(&id, "some text");
        }
        t.drain().collect()
    }

    #[tokio::test]
    async fn a_full_budget_holds_the_sender_until_the_reader_takes_the_batch() {
        let (tx, mut rx) = channel(1000);
        tx.send(events(1), 600).await.ok().unwrap();
        assert_eq!(rx.buffered_bytes(), 600);
        let blocked = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            tx.send(events(1), 600),
        )
        .await;
        assert!(
            blocked.is_err(),
            "a second batch waits while the first one fills the budget"
        );
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut taken = 0;
        while let Poll::Ready(Some(_)) = rx.poll_next(&mut cx) {
            taken += 1;
        }
        assert_eq!(taken, 3, "session.started, item.started and the delta");
        assert_eq!(rx.buffered_bytes(), 0);
        tx.send(events(1), 600).await.ok().unwrap();
    }

    #[tokio::test]
    async fn events_the_view_hands_back_go_back_to_the_sender_and_only_the_newest_batch_keeps_them()
    {
        let (tx, mut rx) = channel(1 << 20);
        let payload = Arc::new(serde_json::json!({"native": "line"}));
        let mut batch = events(1);
        for event in &mut batch {
            event.raw = Some(payload.clone());
        }
        tx.send(batch, 10).await.ok().unwrap();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        while let Poll::Ready(Some(event)) = rx.poll_next(&mut cx) {
            rx.recycle(event);
        }
        assert_eq!(
            Arc::strong_count(&payload),
            4,
            "the three events went back to the sender, not freed here"
        );
        tx.send(events(1), 10).await.ok().unwrap();
        // Two of them came back with the batch the view finished, the third after it.
        assert_eq!(
            Arc::strong_count(&payload),
            2,
            "the sender freed the older batch back"
        );
        let back: usize = std::iter::from_fn(|| tx.spare())
            .map(|spare| spare.len())
            .sum();
        assert_eq!(
            back, 1,
            "the newest keeps its event, for the transcript to free as it builds new ones"
        );
        assert_eq!(Arc::strong_count(&payload), 1);
    }

    #[tokio::test]
    async fn a_lent_batch_goes_back_whole_and_its_vector_gathers_a_later_batch() {
        let (tx, mut rx) = channel(1 << 20);
        let payload = Arc::new(serde_json::json!({"native": "line"}));
        let mut batch = events(EVENTS_PER_BATCH);
        for event in &mut batch {
            event.raw = Some(payload.clone());
        }
        let (count, capacity) = (batch.len(), batch.capacity());
        tx.send(batch, 10).await.ok().unwrap();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut sequences = Vec::new();
        while let Poll::Ready(Some(event)) = rx.poll_lend(&mut cx) {
            sequences.push(event.sequence);
        }
        assert_eq!(
            sequences,
            (1..=count as u64).collect::<Vec<_>>(),
            "every event, in order, once"
        );
        assert_eq!(
            rx.buffered_bytes(),
            0,
            "a batch read to its end gives its bytes back"
        );
        let mut spare = tx.spare().expect("the read batch came back");
        assert_eq!(
            Arc::strong_count(&payload),
            count + 1,
            "its events came back with it, to be freed by the sender"
        );
        assert!(
            spare.len() == count && spare.capacity() == capacity,
            "the same vector"
        );
        spare.clear();
        assert_eq!(Arc::strong_count(&payload), 1);
    }

    /// glibc consolidates its free lists whenever a chunk of 64 KiB or more is freed: a full
    /// batch's vector stays under that (the rarer events' data is boxed to keep events small).
    #[test]
    fn a_full_batch_vector_stays_under_the_allocators_consolidation_threshold() {
        assert!(
            std::mem::size_of::<UniversalEvent>() * EVENTS_PER_BATCH < 64 * 1024,
            "{}",
            std::mem::size_of::<UniversalEvent>()
        );
    }

    #[test]
    fn a_batch_weighs_the_empty_slots_its_vector_holds() {
        let mut batch = Vec::with_capacity(16);
        batch.extend(events(1));
        let full: usize = batch.iter().map(weight).sum();
        let spare = (batch.capacity() - batch.len()) * std::mem::size_of::<UniversalEvent>();
        assert!(spare > 0);
        assert_eq!(batch_weight(&batch), full + spare);
        batch.shrink_to_fit();
        assert_eq!(batch_weight(&batch), full);
    }

    #[tokio::test]
    async fn a_batch_heavier_than_the_budget_still_goes_alone_and_a_dropped_reader_frees_the_sender(
    ) {
        let (tx, rx) = channel(100);
        tx.send(events(3), 10_000).await.ok().unwrap();
        assert_eq!(rx.buffered_bytes(), 100);
        drop(rx);
        assert!(tx.send(events(1), 10).await.is_err());
    }
}
