//! The provider-id → daemon-id index of a transcript, bounded: a closed item stays findable
//! (a tool result names its call after the call completed), but only the most recent
//! [`KEEP_CLOSED`] closed items are kept, so a long session does not grow it without limit.

use std::collections::VecDeque;
use std::sync::Arc;

use foldhash::HashMap;

/// Closed items whose provider ids stay findable: a tool result or a late update names an item
/// that closed a little earlier, not a thousand items earlier. (The index is most of a long
/// run's memory besides its waiting events: 4,096 kept about 1 MB.)
pub(super) const KEEP_CLOSED: usize = 1024;

/// The ids are the open item's own shared strings: the index allocates none.
#[derive(Default)]
pub(super) struct NativeIndex {
    by_native: HashMap<Arc<str>, Arc<str>>,
    /// Closed items, oldest first: (provider id, daemon id).
    closed: VecDeque<(Arc<str>, Arc<str>)>,
}

impl NativeIndex {
    pub(super) fn insert(&mut self, native: Arc<str>, item_id: Arc<str>) {
        self.by_native.insert(native, item_id);
    }

    pub(super) fn get(&self, native: &str) -> Option<&str> {
        self.by_native.get(native).map(|id| &**id)
    }

    /// The item `item_id` with provider id `native` closed; the oldest closed entry beyond
    /// [`KEEP_CLOSED`] is forgotten (unless its provider id was reused by a newer item).
    pub(super) fn closed(&mut self, native: Arc<str>, item_id: Arc<str>) {
        // Forget first: the queue never grows past its limit (a full one would double).
        if self.closed.len() == KEEP_CLOSED {
            if let Some((native, item_id)) = self.closed.pop_front() {
                if self.by_native.get(&native) == Some(&item_id) {
                    self.by_native.remove(&native);
                }
            }
        }
        self.closed.push_back((native, item_id));
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_native.len()
    }
}
