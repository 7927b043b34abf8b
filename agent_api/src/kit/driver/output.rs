//! The agent's output as the driver reads it: the transport's items, and the lines of a chunk
//! the driver stopped in when its batch was full (they come first, before anything newer).

use futures::future::FutureExt;
use futures::stream::StreamExt;

use super::{LineSource, SourceItem};
use crate::kit::lines::LineChunk;

pub(super) struct Output {
    source: LineSource,
    rest: Option<LineChunk>,
}

impl Output {
    pub(super) fn new(source: LineSource) -> Self {
        Self { source, rest: None }
    }

    /// The next item; `None` once the output ended.
    pub(super) async fn next(&mut self) -> Option<std::io::Result<SourceItem>> {
        match self.rest.take() {
            Some(rest) => Some(Ok(SourceItem::Lines(rest))),
            None => self.source.next().await,
        }
    }

    /// The next item if one is ready now (`None`: none is).
    pub(super) fn ready(&mut self) -> Option<Option<std::io::Result<SourceItem>>> {
        self.next().now_or_never()
    }

    /// Keeps the lines of `chunk` not handled yet for the next read.
    pub(super) fn put_back(&mut self, chunk: LineChunk) {
        if !chunk.is_empty() {
            self.rest = Some(chunk);
        }
    }
}
