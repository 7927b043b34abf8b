//! A line reader whose memory stays bounded whatever the agent prints.

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
}

impl<R: AsyncBufRead + Unpin> BoundedLineReader<R> {
    /// A reader over `reader` with a per-line cap of `cap` bytes.
    pub fn new(reader: R, cap: usize) -> Self {
        Self { reader, cap, buf: Vec::new() }
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
        let reader = tokio::io::BufReader::with_capacity(7, input);
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
        assert_eq!(out, [Line::Complete(b"before".to_vec()), Line::Oversize { bytes: 1000 }, Line::Complete(b"after".to_vec())]);
    }

    #[tokio::test]
    async fn an_oversize_last_line_without_newline_is_reported() {
        let out = read_all(&[b'y'; 100], 10).await;
        assert_eq!(out, [Line::Oversize { bytes: 100 }]);
    }

    #[tokio::test]
    async fn a_line_exactly_at_the_cap_is_kept() {
        let out = read_all(b"0123456789\n", 10).await;
        assert_eq!(out, [Line::Complete(b"0123456789".to_vec())]);
    }
}
