//! The provider-id → daemon-id index of a transcript, bounded: a closed item stays findable
//! (a tool result names its call after the call completed), but only the most recent
//! [`KEEP_CLOSED`] closed items are kept, so a long session does not grow it without limit.

use std::collections::VecDeque;

use foldhash::HashMap;

/// Closed items whose provider ids stay findable.
pub(super) const KEEP_CLOSED: usize = 4096;

#[derive(Default)]
pub(super) struct NativeIndex {
    by_native: HashMap<String, String>,
    /// Closed items, oldest first: (provider id, daemon id).
    closed: VecDeque<(String, String)>,
}

impl NativeIndex {
    pub(super) fn insert(&mut self, native: &str, item_id: &str) {
        self.by_native.insert(native.to_string(), item_id.to_string());
    }

    pub(super) fn get(&self, native: &str) -> Option<&str> {
        self.by_native.get(native).map(String::as_str)
    }

    /// The item `item_id` with provider id `native` closed; the oldest closed entry beyond
    /// [`KEEP_CLOSED`] is forgotten (unless its provider id was reused by a newer item).
    pub(super) fn closed(&mut self, native: &str, item_id: &str) {
        self.closed.push_back((native.to_string(), item_id.to_string()));
        if self.closed.len() > KEEP_CLOSED {
            if let Some((native, item_id)) = self.closed.pop_front() {
                if self.by_native.get(&native) == Some(&item_id) {
                    self.by_native.remove(&native);
                }
            }
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_native.len()
    }
}
