//! The fleet's commands this server handed to another and waits for an answer to
//! ([`crate::fleet`]): plain state the server holds, woken by the store's notifications.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The commands this server waits for an answer to, by id.
#[derive(Debug, Default)]
pub(crate) struct Waiters(Mutex<HashMap<i64, Arc<Notify>>>);

impl Waiters {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Arc<Notify>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn wake(&self, id: i64) {
        if let Some(waiter) = self.lock().get(&id) {
            waiter.notify_one();
        }
    }

    pub(crate) fn wake_all(&self) {
        for waiter in self.lock().values() {
            waiter.notify_one();
        }
    }
}
