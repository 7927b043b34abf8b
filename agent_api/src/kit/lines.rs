//! A line reader whose memory stays bounded whatever the agent prints.

use std::sync::Arc;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Default cap of one native line: 16 MiB.
pub const DEFAULT_LINE_CAP: usize = 16 * 1024 * 1024;

/// One line read by [`BoundedLineReader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A whole line without its terminator (`\n` or `\r\n`).
    Complete(Vec<u8>),
    /// A line longer than the cap; it was skipped without being kept in memory.
    Oversize {
        /// How long the skipped line was, in bytes.
        bytes: u64,
    },
}

/// Whole lines read together: every line an agent had written that waited at once in the
/// reader's buffer, in one allocation, instead of one allocation (and one hand-off) a line.
/// Each line ends in `\n`; [`LineChunk::next_line`] hands them out in order, borrowed.
///
/// ```
/// use agent_api::kit::lines::LineChunk;
/// let mut chunk = LineChunk::new(b"one\r\ntwo\n".to_vec()).unwrap();
/// assert_eq!(chunk.next_line(), Some(&b"one"[..]));
/// assert_eq!(chunk.next_line(), Some(&b"two"[..]));
/// assert!(chunk.is_empty());
/// ```
#[derive(Clone)]
pub struct LineChunk {
    bytes: Vec<u8>,
    /// Where the next line starts.
    at: usize,
    /// Where the buffer goes once the chunk is dropped: back to the reader that filled it.
    home: Option<Arc<SpareBuffer>>,
}

impl LineChunk {
    /// The lines of `bytes`, which must end in `\n` (`None` otherwise).
    pub fn new(bytes: Vec<u8>) -> Option<Self> {
        (bytes.last() == Some(&b'\n')).then_some(Self {
            bytes,
            at: 0,
            home: None,
        })
    }

    /// The next line, without its terminator (`\n` or `\r\n`).
    pub fn next_line(&mut self) -> Option<&[u8]> {
        // The field, not `rest()`: the line borrows the bytes while `at` moves on.
        let rest = self.bytes.get(self.at..).filter(|rest| !rest.is_empty())?;
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        self.at += end + 1;
        let line = &rest[..end];
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    }

    /// Whether every line was handed out.
    pub fn is_empty(&self) -> bool {
        self.rest().is_empty()
    }

    /// Bytes of the lines not handed out yet.
    pub fn remaining(&self) -> usize {
        self.rest().len()
    }

    /// The lines not handed out yet (`at` is past the end after a last line without `\n`).
    fn rest(&self) -> &[u8] {
        self.bytes.get(self.at..).unwrap_or_default()
    }
}

impl PartialEq for LineChunk {
    fn eq(&self, other: &Self) -> bool {
        self.rest() == other.rest()
    }
}

impl Eq for LineChunk {}

impl Drop for LineChunk {
    fn drop(&mut self) {
        if let Some(home) = self.home.take() {
            home.put(std::mem::take(&mut self.bytes));
        }
    }
}

/// The buffer of a dropped chunk, kept for the reader's next one. A new 32 KiB allocation per
/// chunk cost more than the lines' own handling: freed, it made the allocator give the pages
/// back and merge its free lists, and the next one faulted them in again.
#[derive(Default)]
struct SpareBuffer(std::sync::Mutex<Vec<u8>>);

impl SpareBuffer {
    /// The spare buffer, emptied (a new one if none is spare).
    fn take(&self) -> Vec<u8> {
        self.0
            .try_lock()
            .map(|mut spare| std::mem::take(&mut *spare))
            .unwrap_or_default()
    }

    /// Keeps `bytes` (emptied) unless a buffer is already spare or it is larger than any chunk.
    fn put(&self, mut bytes: Vec<u8>) {
        if bytes.capacity() > 2 * CHUNK_TARGET {
            return;
        }
        if let Ok(mut spare) = self.0.try_lock() {
            if spare.capacity() == 0 {
                bytes.clear();
                *spare = bytes;
            }
        }
    }
}

impl std::fmt::Debug for LineChunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the lines themselves: they are the agent's raw output.
        f.debug_struct("LineChunk")
            .field("remaining_bytes", &self.remaining())
            .finish()
    }
}

/// What [`BoundedLineReader::next_lines`] read: several whole lines at once, or one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lines {
    /// Whole lines that all waited in the buffer.
    Chunk(LineChunk),
    /// One line, read as [`BoundedLineReader::next_line`] reads it.
    One(Line),
}

/// Most bytes a [`LineChunk`] takes at once, unless its first line alone is longer: a chunk of
/// the whole 64 KiB buffer freed made glibc's allocator merge its free lists (it does at 64 KiB).
const CHUNK_TARGET: usize = 32 * 1024;

/// Reads `\n`-terminated lines, never holding more than `cap` bytes of one line.
///
/// ```
/// # tokio_test_block(async {
/// use agent_api::kit::lines::{BoundedLineReader, Line};
/// let input: &[u8] = b"short\nthis line is far too long\nok";
/// let mut reader = BoundedLineReader::new(input, 10);
/// assert_eq!(reader.next_line().await.unwrap(), Some(Line::Complete(b"short".to_vec())));
/// assert_eq!(reader.next_line().await.unwrap(), Some(Line::Oversize { bytes: 25 }));
/// assert_eq!(reader.next_line().await.unwrap(), Some(Line::Complete(b"ok".to_vec())));
/// assert_eq!(reader.next_line().await.unwrap(), None);
/// # });
/// # fn tokio_test_block(f: impl std::future::Future<Output = ()>) {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
pub struct BoundedLineReader<R> {
    reader: R,
    cap: usize,
    buf: Vec<u8>,
    spare: Arc<SpareBuffer>,
}

impl<R: AsyncBufRead + Unpin> BoundedLineReader<R> {
    /// A reader over `reader` with a per-line cap of `cap` bytes.
    pub fn new(reader: R, cap: usize) -> Self {
        Self {
            reader,
            cap,
            buf: Vec::new(),
            spare: Arc::default(),
        }
    }

    /// Every whole line waiting in the buffer at once (up to about 32 KiB of them), or, when
    /// no whole line waits there, the next line as [`BoundedLineReader::next_line`] reads it.
    /// `None` at end of input.
    pub async fn next_lines(&mut self) -> std::io::Result<Option<Lines>> {
        if self.buf.is_empty() {
            let available = self.reader.fill_buf().await?;
            // A chunk within the cap holds no line over it.
            let head = &available[..available.len().min(CHUNK_TARGET.min(self.cap))];
            let end = match memchr::memrchr(b'\n', head) {
                Some(last) => Some(last + 1),
                // The first line is longer than a chunk's target: it alone, when it is here whole.
                None => memchr::memchr(b'\n', available)
                    .map(|first| first + 1)
                    .filter(|&end| end <= self.cap),
            };
            if let Some(end) = end {
                let mut bytes = self.spare.take();
                bytes.extend_from_slice(&available[..end]);
                let chunk = LineChunk {
                    bytes,
                    at: 0,
                    home: Some(self.spare.clone()),
                };
                self.reader.consume(end);
                return Ok(Some(Lines::Chunk(chunk)));
            }
        }
        Ok(self.next_line().await?.map(Lines::One))
    }

    /// The next line, `None` at end of input. A final line without `\n` is still returned.
    pub async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        self.buf.clear();
        let mut skipped: u64 = 0;
        let mut oversize = false;
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                return Ok(match (oversize, self.buf.is_empty()) {
                    (true, _) => Some(Line::Oversize { bytes: skipped }),
                    (false, true) => None,
                    (false, false) => Some(Line::Complete(trim_cr(std::mem::take(&mut self.buf)))),
                });
            }
            let (chunk, found_newline) = match memchr::memchr(b'\n', available) {
                Some(i) => (&available[..i], true),
                None => (available, false),
            };
            let chunk_len = chunk.len();
            if found_newline && !oversize && self.buf.is_empty() && chunk_len <= self.cap {
                // The whole line is in the reader's buffer (the usual case): one allocation of
                // its exact size instead of a buffer grown by doubling.
                let line = trim_cr(chunk.to_vec());
                self.reader.consume(chunk_len + 1);
                return Ok(Some(Line::Complete(line)));
            }
            if !oversize && self.buf.len() + chunk_len > self.cap {
                oversize = true;
                skipped = self.buf.len() as u64;
                self.buf = Vec::new();
            }
            if oversize {
                skipped += chunk_len as u64;
            } else {
                self.buf.extend_from_slice(chunk);
            }
            self.reader.consume(chunk_len + usize::from(found_newline));
            if found_newline {
                return Ok(Some(if oversize {
                    Line::Oversize { bytes: skipped }
                } else {
                    Line::Complete(trim_cr(std::mem::take(&mut self.buf)))
                }));
            }
        }
    }
}

fn trim_cr(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

impl<R> std::fmt::Debug for BoundedLineReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedLineReader").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &[u8], cap: usize) -> Vec<Line> {
        read_all_with(input, 7, cap).await
    }

    async fn read_all_with(input: &[u8], capacity: usize, cap: usize) -> Vec<Line> {
        let reader = tokio::io::BufReader::with_capacity(capacity, input);
        let mut lines = BoundedLineReader::new(reader, cap);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn lines_split_across_small_buffers_come_back_whole() {
        let out = read_all(b"{\"a\":1}\r\n{\"bb\":22}\n\nlast", 100).await;
        assert_eq!(
            out,
            [
                Line::Complete(b"{\"a\":1}".to_vec()),
                Line::Complete(b"{\"bb\":22}".to_vec()),
                Line::Complete(Vec::new()),
                Line::Complete(b"last".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn an_oversize_line_is_skipped_and_measured_and_reading_goes_on() {
        let mut input = b"before\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 1000));
        input.extend(b"\nafter\n");
        let out = read_all(&input, 64).await;
        assert_eq!(
            out,
            [
                Line::Complete(b"before".to_vec()),
                Line::Oversize { bytes: 1000 },
                Line::Complete(b"after".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn an_oversize_last_line_without_newline_is_reported() {
        let out = read_all(&[b'y'; 100], 10).await;
        assert_eq!(out, [Line::Oversize { bytes: 100 }]);
    }

    /// Every line, read with [`BoundedLineReader::next_lines`] through a buffer of `capacity`.
    async fn read_in_chunks(input: &[u8], capacity: usize, cap: usize) -> (Vec<Line>, usize) {
        let mut lines =
            BoundedLineReader::new(tokio::io::BufReader::with_capacity(capacity, input), cap);
        let (mut out, mut chunks) = (Vec::new(), 0);
        while let Some(read) = lines.next_lines().await.unwrap() {
            match read {
                Lines::Chunk(mut chunk) => {
                    chunks += 1;
                    while let Some(line) = chunk.next_line() {
                        out.push(Line::Complete(line.to_vec()));
                    }
                }
                Lines::One(line) => out.push(line),
            }
        }
        (out, chunks)
    }

    #[tokio::test]
    async fn lines_read_in_chunks_are_the_lines_read_one_by_one() {
        let mut input = Vec::new();
        for i in 0..500 {
            input.extend(format!("{{\"n\":{i}}}\r\n").bytes());
            if i % 97 == 0 {
                input.extend(std::iter::repeat_n(b'x', 3000));
                input.push(b'\n');
            }
        }
        input.extend(b"\nlast without newline");
        for capacity in [7, 64, 4096, 64 * 1024] {
            let (chunked, chunks) = read_in_chunks(&input, capacity, 2048).await;
            assert_eq!(
                chunked,
                read_all_with(&input, capacity, 2048).await,
                "buffer of {capacity}"
            );
            assert!(
                capacity < 4096 || chunks > 1,
                "a buffer of {capacity} held several lines at once"
            );
        }
    }

    #[tokio::test]
    async fn a_chunk_never_holds_a_line_over_the_cap() {
        let (out, _) = read_in_chunks(b"short\nthis line is far too long\nok\n", 64, 10).await;
        assert_eq!(
            out,
            [
                Line::Complete(b"short".to_vec()),
                Line::Oversize { bytes: 25 },
                Line::Complete(b"ok".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_cap_is_kept() {
        let out = read_all(b"0123456789\n", 10).await;
        assert_eq!(out, [Line::Complete(b"0123456789".to_vec())]);
    }

    async fn next_chunk(lines: &mut BoundedLineReader<impl AsyncBufRead + Unpin>) -> LineChunk {
        match lines.next_lines().await.unwrap() {
            Some(Lines::Chunk(chunk)) => chunk,
            other => panic!("expected a chunk, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_dropped_chunk_gives_its_buffer_to_the_next_one_and_a_kept_chunk_does_not() {
        let input = b"one\ntwo\n".repeat(4);
        // A buffer of one chunk's size: each read is one chunk.
        let mut lines =
            BoundedLineReader::new(tokio::io::BufReader::with_capacity(8, &input[..]), 64);
        let spare = |lines: &BoundedLineReader<_>| lines.spare.0.lock().unwrap().capacity();
        let first = next_chunk(&mut lines).await;
        let kept = next_chunk(&mut lines).await;
        assert_eq!(spare(&lines), 0, "nothing is spare while both chunks live");
        let first_buffer = first.bytes.as_ptr();
        drop(first);
        assert!(spare(&lines) >= 8, "the dropped chunk's buffer is kept");
        let third = next_chunk(&mut lines).await;
        assert_eq!(
            third.bytes.as_ptr(),
            first_buffer,
            "and the next chunk reads into it"
        );
        assert_eq!(spare(&lines), 0);
        assert_eq!(third, kept, "with its own lines");
    }

    #[test]
    fn a_buffer_larger_than_any_chunk_is_not_kept() {
        let spare = SpareBuffer::default();
        spare.put(Vec::with_capacity(4 * CHUNK_TARGET));
        assert_eq!(spare.take().capacity(), 0);
        spare.put(Vec::with_capacity(CHUNK_TARGET));
        assert!(spare.take().capacity() >= CHUNK_TARGET);
    }
}
