//! What a server hands another with a command ([`crate::fleet`]), shared with the routes that
//! answer it: the mark of a request run for another server, and the turn a message streamed
//! through a server that does not run its session started.

use serde::{Deserialize, Serialize};

/// Marks a request run for another server: it is answered here, never handed on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Forwarded;

/// The turn a message started: what `POST …/messages/stream` answers (200, JSON) when it runs
/// for another server, once the turn has started, instead of the stream. Put on the request
/// again on the server the client asked, it makes that route stream the turn from the shared
/// log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TurnStarted {
    /// The turn's number in the session.
    pub(crate) turn: u64,
    /// The sequence of its first event.
    pub(crate) first: u64,
}
