//! Bounded capture of an agent's stderr: the first 20 and the last 50 lines, with secrets masked
//! (an agent that dumps its environment or argv on failure must not put its keys in an event).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncRead, BufReader};

use super::lines::{BoundedLineReader, Line};
use crate::vocabulary::universal::StderrOutput;

/// Lines kept from the start of stderr.
pub const HEAD_LINES: usize = 20;
/// Lines kept from the end of stderr.
pub const TAIL_LINES: usize = 50;
/// Longest stderr line kept, in bytes; longer ones are cut.
pub const MAX_LINE_BYTES: usize = 2048;
/// Stderr lines an [`crate::AgentError::ProcessExited`] carries: the last ones.
pub const ERROR_LINES: usize = 5;
/// Longest stderr line an error carries, in bytes.
pub const ERROR_LINE_BYTES: usize = 300;

/// An agent's stderr stream and the secret values the run handed the agent, masked in what is kept.
pub struct StderrSource {
    stream: Pin<Box<dyn AsyncRead + Send>>,
    secrets: Arc<[String]>,
}

impl StderrSource {
    /// `stream`, with `secrets` (see [`crate::kit::secrets::secret_values`]) to mask.
    pub fn new(stream: Pin<Box<dyn AsyncRead + Send>>, secrets: Vec<String>) -> Self {
        Self {
            stream,
            secrets: secrets.into(),
        }
    }
}

impl std::fmt::Debug for StderrSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StderrSource")
            .field("secrets", &self.secrets.len())
            .finish_non_exhaustive()
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
        let text = kept_line(line, &self.secrets);
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
            StderrOutput {
                head: Some(all.join("\n")),
                tail: None,
                truncated,
                total_lines: Some(self.total),
            }
        }
    }

    /// Reads `source` to its end; with `live`, each line also goes there as it comes (cut and
    /// masked like the capture), for a protocol that reads stderr (see
    /// [`crate::kit::Protocol::on_stderr`]). A live line that finds the channel full is dropped
    /// from it (the capture keeps it): live lines are hints, and the agent never waits on them.
    pub async fn read_from(
        source: StderrSource,
        live: Option<tokio::sync::mpsc::Sender<String>>,
    ) -> StderrCapture {
        let mut capture = StderrCapture {
            secrets: source.secrets,
            ..StderrCapture::default()
        };
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

    /// The last non-blank lines, at most [`ERROR_LINES`] of them, each cut to [`ERROR_LINE_BYTES`]
    /// and masked as every kept line is: what a process-exit error says.
    pub fn last_lines(&self) -> Vec<String> {
        let kept = self
            .head
            .iter()
            .chain(self.tail.iter())
            .rev()
            .filter(|line| !line.trim().is_empty())
            .take(ERROR_LINES);
        let mut lines: Vec<String> = kept
            .map(|line| {
                crate::guards::bounds::utf8_prefix(line.trim_end(), ERROR_LINE_BYTES).to_string()
            })
            .collect();
        lines.reverse();
        lines
    }

    /// The line pushed last, as kept (cut and masked).
    pub(crate) fn last(&self) -> &str {
        self.tail
            .back()
            .or(self.head.last())
            .map(String::as_str)
            .unwrap_or_default()
    }
}

/// A line as stderr lines are kept: cut to [`MAX_LINE_BYTES`], the known secret shapes and
/// `secrets` masked.
fn kept_line(line: &[u8], secrets: &[String]) -> String {
    let cut = String::from_utf8_lossy(&line[..line.len().min(MAX_LINE_BYTES)]);
    crate::guards::secrets::redact_with(&cut, secrets).into_owned()
}

/// The log a run follows for its protocol ([`crate::kit::Ctx::follow_log`]): where its
/// lines go, what to mask in them, and the task reading it.
#[derive(Debug)]
pub(crate) struct LogFollower {
    live: tokio::sync::mpsc::Sender<String>,
    secrets: Arc<[String]>,
    task: Option<tokio::task::AbortHandle>,
}

impl LogFollower {
    /// A follower feeding `live`, the protocol's stderr feed, masking what `source` masks.
    pub(crate) fn new(live: tokio::sync::mpsc::Sender<String>, source: &StderrSource) -> Self {
        Self {
            live,
            secrets: source.secrets.clone(),
            task: None,
        }
    }

    /// Follows `path` from now on (instead of the file followed before).
    pub(crate) fn follow(&mut self, path: std::path::PathBuf) {
        self.stop();
        let task = tokio::spawn(follow_file(path, self.secrets.clone(), self.live.clone()));
        self.task = Some(task.abort_handle());
    }

    /// Stops following (the run ends).
    pub(crate) fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// How often a followed log is looked at.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Most bytes of a followed log read at one look.
const FOLLOW_CHUNK: u64 = 1 << 20;

/// Follows a log file the agent appends to ([`crate::kit::Ctx::follow_log`]): each line
/// added after the call goes to `live`, cut and masked as stderr lines are, as it comes (skipped
/// when `live` is full). A file that does not exist yet is read from its start once it appears;
/// one that shrinks (replaced) from its new start. Ends when `live` closes; the driver aborts it
/// when the run ends.
pub(crate) async fn follow_file(
    path: std::path::PathBuf,
    secrets: Arc<[String]>,
    live: tokio::sync::mpsc::Sender<String>,
) {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut offset = tokio::fs::metadata(&path).await.map_or(0, |m| m.len());
    let mut partial = Vec::new();
    while !live.is_closed() {
        if let Ok(mut file) = tokio::fs::File::open(&path).await {
            let len = file.metadata().await.map_or(0, |m| m.len());
            if len < offset {
                (offset, partial) = (0, Vec::new());
            }
            let mut chunk = Vec::new();
            if len > offset && file.seek(std::io::SeekFrom::Start(offset)).await.is_ok() {
                let _ = (&mut file).take(FOLLOW_CHUNK).read_to_end(&mut chunk).await;
            }
            offset += chunk.len() as u64;
            let mut pieces = chunk.split(|b| *b == b'\n').peekable();
            while let Some(piece) = pieces.next() {
                // A line is kept to its first 2 KiB, however long it grows across looks.
                let room = MAX_LINE_BYTES.saturating_sub(partial.len());
                partial.extend_from_slice(&piece[..piece.len().min(room)]);
                if pieces.peek().is_some() {
                    let _ = live.try_send(kept_line(&std::mem::take(&mut partial), &secrets));
                }
            }
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
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
        assert!(
            second.starts_with("key ") && !second.contains("sk-live-secret-value"),
            "{second}"
        );
        assert_eq!(capture.total_lines(), 2);
    }

    #[tokio::test]
    async fn a_followed_log_gives_the_lines_added_after_the_call_cut_and_masked() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("debug.txt");
        std::fs::write(&path, "an old line from an earlier run\n").unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let follower = tokio::spawn(follow_file(
            path.clone(),
            vec!["sk-live-secret-value".into()].into(),
            tx,
        ));
        tokio::time::sleep(FOLLOW_EVERY * 2).await;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        write!(
            file,
            "[RETRY] Attempt 1 failed\nkey sk-live-secret-value and a line in "
        )
        .unwrap();
        file.flush().unwrap();
        let first = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv())
            .await
            .unwrap();
        assert_eq!(
            first.as_deref(),
            Some("[RETRY] Attempt 1 failed"),
            "only what came after the call"
        );
        writeln!(file, "two writes{}", "x".repeat(3 * MAX_LINE_BYTES)).unwrap();
        let second = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(
            second.starts_with("key ") && second.contains("and a line in two writes"),
            "{second}"
        );
        assert!(
            !second.contains("sk-live-secret-value") && second.len() <= MAX_LINE_BYTES + 16,
            "{}",
            second.len()
        );
        follower.abort();
    }

    #[tokio::test]
    async fn a_followed_log_that_appears_later_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("later.txt");
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let follower = tokio::spawn(follow_file(path.clone(), Vec::new().into(), tx));
        tokio::time::sleep(FOLLOW_EVERY).await;
        std::fs::write(&path, "first line of a new session\n").unwrap();
        let line = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv())
            .await
            .unwrap();
        assert_eq!(line.as_deref(), Some("first line of a new session"));
        follower.abort();
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
