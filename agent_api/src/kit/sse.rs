//! An incremental decoder of `text/event-stream` (Server-Sent Events), for agents whose
//! two-way channel is HTTP plus an SSE event stream.

/// One decoded server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field (`message` when absent).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field.
    pub id: Option<String>,
}

/// Feeds bytes in as they arrive; takes whole events out. Memory is bounded by `max_event`.
///
/// ```
/// use agent_api::kit::sse::SseDecoder;
/// let mut decoder = SseDecoder::new(1 << 20);
/// assert!(decoder.push(b"event: ping\ndata: {\"a\"").is_empty());
/// let events = decoder.push(b":1}\n\n");
/// assert_eq!(events[0].event.as_deref(), Some("ping"));
/// assert_eq!(events[0].data, "{\"a\":1}");
/// ```
#[derive(Debug)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no newline: each byte is searched once, however many
    /// chunks a long line arrives in.
    searched: usize,
    /// Every byte searched for a newline, for the test that decoding is linear.
    #[cfg(test)]
    searched_total: usize,
    current: SseEvent,
    has_field: bool,
    max_event: usize,
    skipping: bool,
}

impl SseDecoder {
    /// A decoder that drops any event larger than `max_event` bytes.
    pub fn new(max_event: usize) -> Self {
        Self {
            buf: Vec::new(),
            searched: 0,
            #[cfg(test)]
            searched_total: 0,
            current: SseEvent::default(),
            has_field: false,
            max_event,
            skipping: false,
        }
    }

    /// Adds bytes; returns the events they completed. Linear in the bytes pushed: a line is
    /// searched for its end once and the buffer is shifted once per push, not per line.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut buf = std::mem::take(&mut self.buf);
        buf.extend_from_slice(bytes);
        let mut start = 0;
        let mut from = self.searched;
        while let Some(found) = memchr::memchr(b'\n', &buf[from..]) {
            #[cfg(test)]
            {
                self.searched_total += found + 1;
            }
            let end = from + found;
            let line = &buf[start..end];
            self.line(line.strip_suffix(b"\r").unwrap_or(line), &mut out);
            start = end + 1;
            from = start;
        }
        #[cfg(test)]
        {
            self.searched_total += buf.len() - from;
        }
        buf.drain(..start);
        self.searched = buf.len();
        if buf.len() > self.max_event {
            buf.clear();
            self.searched = 0;
            self.skipping = true;
        }
        self.buf = buf;
        out
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.has_field && !self.skipping {
                out.push(std::mem::take(&mut self.current));
            }
            self.current = SseEvent::default();
            self.has_field = false;
            self.skipping = false;
            return;
        }
        if line[0] == b':' || self.skipping {
            return;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f.to_string(), v.strip_prefix(' ').unwrap_or(v).to_string()),
            None => (text.to_string(), String::new()),
        };
        self.has_field = true;
        match field.as_str() {
            "event" => self.current.event = Some(value),
            "data" => {
                if !self.current.data.is_empty() {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(&value);
                if self.current.data.len() > self.max_event {
                    self.skipping = true;
                }
            }
            "id" => self.current.id = Some(value),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_line_data_is_joined_and_comments_ignored() {
        let mut d = SseDecoder::new(1024);
        let events = d.push(b": keep-alive\ndata: a\ndata: b\r\n\r\ndata: c\n\n");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].data, "a\nb");
        assert_eq!(events[1].data, "c");
    }

    /// A 16 MiB event in 4 KiB chunks: every byte is searched once (the former decoder searched
    /// the whole buffer again for each chunk: 2,048 times as many bytes), and the event is whole.
    #[test]
    fn a_long_event_in_small_chunks_is_searched_once_per_byte() {
        let mut d = SseDecoder::new(32 << 20);
        let mut input = b"data: ".to_vec();
        input.extend(std::iter::repeat_n(b'x', 16 << 20));
        input.extend(b"\n\ndata: ok\n\n");
        let mut events = Vec::new();
        for chunk in input.chunks(4096) {
            events.extend(d.push(chunk));
        }
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].data.len(), 16 << 20);
        assert_eq!(events[1].data, "ok");
        assert_eq!(
            d.searched_total,
            input.len(),
            "each byte searched exactly once"
        );
    }

    #[test]
    fn an_event_over_the_limit_is_dropped_and_decoding_goes_on() {
        let mut d = SseDecoder::new(16);
        let mut input = b"data: ".to_vec();
        input.extend([b'x'; 100]);
        input.extend(b"\n\ndata: ok\n\n");
        let events = d.push(&input);
        assert_eq!(
            events,
            [SseEvent {
                data: "ok".into(),
                ..Default::default()
            }]
        );
    }
}
