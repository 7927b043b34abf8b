//! Bounded capture of an agent's stderr: the first 20 and the last 50 lines, with secrets masked
//! (an agent that dumps its environment or argv on failure must not put its keys in an event).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncRead, BufReader};

use super::lines::{BoundedLineReader, Line};
use crate::universal::StderrOutput;

/// Lines kept from the start of stderr.
pub const HEAD_LINES: usize = 20;
/// Lines kept from the end of stderr.
pub const TAIL_LINES: usize = 50;
/// Longest stderr line kept, in bytes; longer ones are cut.
pub const MAX_LINE_BYTES: usize = 2048;

/// An agent's stderr stream and the secret values the run handed the agent, masked in what is kept.
pub struct StderrSource {
    stream: Pin<Box<dyn AsyncRead + Send>>,
    secrets: Arc<[String]>,
}

impl StderrSource {
    /// `stream`, with `secrets` (see [`crate::secrets::secret_values`]) to mask.
    pub fn new(stream: Pin<Box<dyn AsyncRead + Send>>, secrets: Vec<String>) -> Self {
        Self { stream, secrets: secrets.into() }
    }
}

impl std::fmt::Debug for StderrSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StderrSource").field("secrets", &self.secrets.len()).finish_non_exhaustive()
    }
}

/// Collects the head and tail of a stream of lines in bounded memory, secrets masked.
#[derive(Debug, Clone, Default)]
pub struct StderrCapture {
    head: Vec<String>,
    tail: VecDeque<String>,
    total: u64,
    secrets: Arc<[String]>,
}

impl StderrCapture {
    /// Adds one line; the known secret shapes and the run's secret values are masked in it.
    pub fn push(&mut self, line: &[u8]) {
        self.total += 1;
        let cut = String::from_utf8_lossy(&line[..line.len().min(MAX_LINE_BYTES)]);
        let text = crate::secrets::redact_with(&cut, &self.secrets).into_owned();
        if self.head.len() < HEAD_LINES {
            self.head.push(text);
            return;
        }
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(text);
    }

    /// Number of lines seen.
    pub fn total_lines(&self) -> u64 {
        self.total
    }

    /// The captured output in the `session.ended` shape: all lines when they fit in head and
    /// tail, else the first 20 and the last 50 with `truncated` set.
    pub fn output(&self) -> StderrOutput {
        let truncated = self.total > (HEAD_LINES + TAIL_LINES) as u64;
        if truncated {
            StderrOutput {
                head: Some(self.head.join("\n")),
                tail: Some(self.tail.iter().cloned().collect::<Vec<_>>().join("\n")),
                truncated,
                total_lines: Some(self.total),
            }
        } else {
            let all: Vec<String> = self.head.iter().chain(self.tail.iter()).cloned().collect();
            StderrOutput { head: Some(all.join("\n")), tail: None, truncated, total_lines: Some(self.total) }
        }
    }

    /// Reads `source` to its end; with `live`, each line also goes there as it comes (cut and
    /// masked like the capture), for a protocol that reads stderr (see
    /// [`crate::kit::Protocol::on_stderr`]). A live line that finds the channel full is dropped
    /// from it (the capture keeps it): live lines are hints, and the agent never waits on them.
    pub async fn read_from(source: StderrSource, live: Option<tokio::sync::mpsc::Sender<String>>) -> StderrCapture {
        let mut capture = StderrCapture { secrets: source.secrets, ..StderrCapture::default() };
        let mut lines = BoundedLineReader::new(BufReader::new(source.stream), MAX_LINE_BYTES);
        while let Ok(Some(line)) = lines.next_line().await {
            match line {
                Line::Complete(bytes) => {
                    capture.push(&bytes);
                    if let Some(live) = &live {
                        let _ = live.try_send(capture.last().to_string());
                    }
                }
                Line::Oversize { .. } => capture.push(b"[stderr line over 2048 bytes skipped]"),
            }
        }
        capture
    }

    /// The line pushed last, as kept (cut and masked).
    pub(crate) fn last(&self) -> &str {
        self.tail.back().or(self.head.last()).map(String::as_str).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn live_lines_come_cut_and_masked_as_they_are_read() {
        let input: &'static [u8] = b"first\nkey sk-live-secret-value here\n";
        let source = StderrSource::new(Box::pin(input), vec!["sk-live-secret-value".into()]);
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let capture = StderrCapture::read_from(source, Some(tx)).await;
        assert_eq!(rx.recv().await.as_deref(), Some("first"));
        let second = rx.recv().await.unwrap();
        assert!(second.starts_with("key ") && !second.contains("sk-live-secret-value"), "{second}");
        assert_eq!(capture.total_lines(), 2);
    }

    #[test]
    fn short_stderr_is_kept_whole_in_head() {
        let mut c = StderrCapture::default();
        for i in 0..30 {
            c.push(format!("line {i}").as_bytes());
        }
        let out = c.output();
        assert!(!out.truncated);
        assert_eq!(out.head.unwrap().lines().count(), 30);
        assert_eq!(out.tail, None);
    }

    #[test]
    fn long_stderr_keeps_first_twenty_and_last_fifty() {
        let mut c = StderrCapture::default();
        for i in 0..1000 {
            c.push(format!("line {i}").as_bytes());
        }
        let out = c.output();
        assert!(out.truncated);
        assert_eq!(out.total_lines, Some(1000));
        let head = out.head.unwrap();
        let tail = out.tail.unwrap();
        assert_eq!(head.lines().next(), Some("line 0"));
        assert_eq!(head.lines().count(), 20);
        assert_eq!(tail.lines().count(), 50);
        assert_eq!(tail.lines().last(), Some("line 999"));
    }
}
