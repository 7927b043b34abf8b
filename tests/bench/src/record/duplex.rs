//! A child driven over stdin/stdout, with every line logged as a session entry.

use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::process::GroupGuard;
use crate::BenchError;

/// One line of a `.session.jsonl` file.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Seconds since spawn.
    pub t: f64,
    /// `send`, `recv` or `stderr`.
    pub dir: &'static str,
    /// For send/recv: the line itself when it is JSON (kept byte for byte), else the line as a JSON
    /// string. For stderr: the line as a JSON string.
    pub msg: String,
}

impl Entry {
    fn new(t: f64, dir: &'static str, line: &str) -> Entry {
        let is_json =
            dir != "stderr" && serde_json::from_str::<&serde_json::value::RawValue>(line).is_ok();
        let msg = if is_json {
            line.to_string()
        } else {
            serde_json::Value::String(line.to_string()).to_string()
        };
        Entry { t, dir, msg }
    }

    /// The entry as one JSON line: `{"t":..,"dir":..,"msg":..}`.
    pub fn to_line(&self) -> String {
        format!(
            "{{\"t\":{},\"dir\":\"{}\",\"msg\":{}}}",
            (self.t * 1000.0).round() / 1000.0,
            self.dir,
            self.msg
        )
    }
}

enum Incoming {
    Stdout(f64, String),
    Stderr(f64, String),
}

/// A running two-way child.
pub struct Duplex {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::UnboundedReceiver<Incoming>,
    started: Instant,
    guard: Option<GroupGuard>,
    what: String,
    /// Every line sent, received and printed on stderr so far.
    pub log: Vec<Entry>,
    /// Everything printed on stderr.
    pub stderr: String,
    /// Seconds from spawn to the first stdout line.
    pub first_stdout: Option<f64>,
}

impl Duplex {
    /// Spawns `cmd` (from `Sandbox::command`) with piped stdio.
    pub fn spawn(mut cmd: Command, what: &str) -> Result<Duplex, BenchError> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| BenchError::io(format!("spawning {what}"), e))?;
        let guard = GroupGuard::new(&child);
        let (tx, rx) = mpsc::unbounded_channel();
        if let Some(out) = child.stdout.take() {
            tokio::spawn(forward_lines(out, started, tx.clone(), Incoming::Stdout));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(forward_lines(err, started, tx, Incoming::Stderr));
        }
        let stdin = child.stdin.take();
        Ok(Duplex {
            child,
            stdin,
            rx,
            started,
            guard,
            what: what.into(),
            log: Vec::new(),
            stderr: String::new(),
            first_stdout: None,
        })
    }

    /// Writes one line to the child's stdin and logs it.
    pub async fn send(&mut self, line: &str) -> Result<(), BenchError> {
        let t = self.started.elapsed().as_secs_f64();
        self.log.push(Entry::new(t, "send", line));
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| BenchError::Protocol("stdin already closed".into()))?;
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        stdin
            .write_all(&bytes)
            .await
            .map_err(|e| BenchError::io(format!("writing to {}", self.what), e))?;
        stdin
            .flush()
            .await
            .map_err(|e| BenchError::io(format!("writing to {}", self.what), e))
    }

    /// The next stdout line before `deadline` (logged), or `None` once stdout is closed.
    pub async fn next_line(&mut self, deadline: Instant) -> Result<Option<String>, BenchError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.rx.recv()).await {
                Err(_) => {
                    return Err(BenchError::Timeout {
                        what: self.what.clone(),
                        seconds: left.as_secs(),
                    });
                }
                Ok(None) => return Ok(None),
                Ok(Some(Incoming::Stderr(t, line))) => {
                    self.stderr.push_str(&line);
                    self.stderr.push('\n');
                    self.log.push(Entry::new(t, "stderr", &line));
                }
                Ok(Some(Incoming::Stdout(t, line))) => {
                    self.first_stdout.get_or_insert(t);
                    self.log.push(Entry::new(t, "recv", &line));
                    return Ok(Some(line));
                }
            }
        }
    }

    /// Closes stdin, waits (until `deadline`) for the child to exit while logging what it still prints,
    /// then kills its process group. Returns the exit status and seconds since spawn.
    pub async fn finish(&mut self, deadline: Instant) -> Result<(ExitStatus, f64), BenchError> {
        drop(self.stdin.take());
        while self.next_line(deadline).await?.is_some() {}
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100));
        let status = match tokio::time::timeout(left, self.child.wait()).await {
            Ok(status) => {
                status.map_err(|e| BenchError::io(format!("waiting for {}", self.what), e))?
            }
            Err(_) => {
                drop(self.guard.take());
                return Err(BenchError::Timeout {
                    what: self.what.clone(),
                    seconds: left.as_secs(),
                });
            }
        };
        let wall = self.started.elapsed().as_secs_f64();
        drop(self.guard.take());
        Ok((status, wall))
    }
}

async fn forward_lines(
    stream: impl tokio::io::AsyncRead + Unpin,
    started: Instant,
    tx: mpsc::UnboundedSender<Incoming>,
    wrap: fn(f64, String) -> Incoming,
) {
    use tokio::io::AsyncBufReadExt;
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    while matches!(reader.read_until(b'\n', &mut buf).await, Ok(n) if n > 0) {
        let t = started.elapsed().as_secs_f64();
        let line = String::from_utf8_lossy(buf.strip_suffix(b"\n").unwrap_or(&buf)).into_owned();
        let _ = tx.send(wrap(t, line));
        buf.clear();
    }
}

impl std::fmt::Debug for Duplex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Duplex").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_are_kept_byte_for_byte_and_other_lines_become_strings() {
        assert_eq!(
            Entry::new(0.5, "recv", r#"{"b": 1,"a":2}"#).to_line(),
            r#"{"t":0.5,"dir":"recv","msg":{"b": 1,"a":2}}"#
        );
        assert_eq!(
            Entry::new(1.0, "stderr", r#"{"x":1}"#).to_line(),
            r#"{"t":1,"dir":"stderr","msg":"{\"x\":1}"}"#
        );
        assert_eq!(Entry::new(0.0, "recv", "plain").msg, r#""plain""#);
    }
}
