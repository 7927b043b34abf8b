//! The SDK's side of a relay: the helper started as `amp-permission-delegate relay` through the
//! run's launcher (a container, ssh or prefix), which keeps the run's directory on the far side and
//! passes each helper's request over its stdio ([`ToRelay`], [`FromRelay`]).
//!
//! Closing it closes the relay's stdin (it removes the directory and exits), waits briefly for
//! that, then stops whatever is left of it here and on the far side.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_api::kit::lines::{BoundedLineReader, Line};
use agent_api::kit::process::ProcessGroupChild;
use agent_api::kit::CommandSpec;
use agent_api::request::Launcher;
use agent_api::AgentError;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, Mutex};

use super::wire::{FromRelay, Request, ToRelay, MAX_INPUT, RELAY_ARG};
use super::{decide, DelegateRequest, Replies};

/// How long the relay may take to connect and lay the directory out (ssh may be slow to connect).
const READY_WITHIN: Duration = Duration::from_secs(60);
/// How long a closed relay gets to remove its directory before it is stopped.
const CLOSE_GRACE: Duration = Duration::from_secs(3);
/// The longest line a relay writes: a request with its tool input, and room for the framing.
const LINE_CAP: usize = MAX_INPUT + 128 * 1024;

/// The relay's stdin, shared by the tasks that answer its requests; `None` once closed.
#[derive(Clone)]
pub(super) struct RelayWriter(Arc<Mutex<Option<ChildStdin>>>);

impl RelayWriter {
    async fn send(&self, message: &ToRelay) {
        let mut line = serde_json::to_vec(message).expect("a relay message serializes");
        line.push(b'\n');
        if let Some(stdin) = self.0.lock().await.as_mut() {
            // A relay that is gone rejects its helpers itself: nothing else to do.
            let _ = stdin.write_all(&line).await;
        }
    }
}

/// A running relay and the run's directory on its side.
pub(super) struct Relay {
    child: Option<ProcessGroupChild>,
    writer: RelayWriter,
    dir: PathBuf,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// Starts `helper` as a relay through `launcher` (with `TMPDIR` set to `tmpdir` when given),
    /// sends it `start` and waits until its directory is ready; returns it and its request lines.
    pub(super) async fn start(
        launcher: &Launcher,
        helper: &Path,
        tmpdir: Option<&str>,
        start: ToRelay,
    ) -> Result<(Relay, BoundedLineReader<BufReader<ChildStdout>>), AgentError> {
        let not_started = |why: String| AgentError::Spawn {
            program: helper.to_path_buf(),
            source: std::io::Error::other(format!(
                "the permission relay did not start on the far side: {why}"
            )),
        };
        let mut spec = CommandSpec::new(helper)
            .arg(RELAY_ARG)
            .with_stdin()
            .with_launcher(launcher.clone());
        if let Some(dir) = tmpdir {
            spec = spec.env("TMPDIR", dir);
        }
        let mut child = agent_api::kit::process::spawn(&spec)?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) = (
            child.child.stdin.take(),
            child.child.stdout.take(),
            child.child.stderr.take(),
        ) else {
            return Err(not_started("its pipes are missing".into()));
        };
        let first_stderr_line = tokio::spawn(async move {
            let mut text = Vec::new();
            let _ = stderr.take(64 * 1024).read_to_end(&mut text).await;
            let line = String::from_utf8_lossy(&text)
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or_default()
                .to_string();
            line.chars().take(200).collect::<String>()
        });
        let mut start = serde_json::to_vec(&start).map_err(std::io::Error::from)?;
        start.push(b'\n');
        stdin
            .write_all(&start)
            .await
            .map_err(|e| not_started(format!("cannot write to it: {e}")))?;
        let mut lines = BoundedLineReader::new(BufReader::new(stdout), LINE_CAP);
        let ready = tokio::time::timeout(READY_WITHIN, lines.next_line()).await;
        let dir = match ready {
            Ok(Ok(Some(Line::Complete(line)))) => {
                match serde_json::from_slice::<FromRelay>(&line) {
                    Ok(FromRelay::Ready { dir }) => dir,
                    Ok(FromRelay::Failed { reason }) => return Err(not_started(reason)),
                    _ => return Err(not_started("its first line is not a ready message".into())),
                }
            }
            Err(_) => {
                return Err(not_started(format!(
                    "it was not ready within {} s",
                    READY_WITHIN.as_secs()
                )))
            }
            Ok(_) => {
                drop(child);
                let said = first_stderr_line.await.unwrap_or_default();
                let hint = format!(
                    "it ended before it was ready (is `{}` installed there?)",
                    helper.display()
                );
                return Err(not_started(if said.is_empty() {
                    hint
                } else {
                    format!("{hint}: {said}")
                }));
            }
        };
        let writer = RelayWriter(Arc::new(Mutex::new(Some(stdin))));
        Ok((
            Relay {
                child: Some(child),
                writer,
                dir,
            },
            lines,
        ))
    }

    /// The run's directory on the far side.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the answers go.
    pub(super) fn writer(&self) -> RelayWriter {
        self.writer.clone()
    }

    /// Closes the relay's stdin, then, on a thread of its own, gives it [`CLOSE_GRACE`] to remove
    /// the directory and exit before stopping what is left (so a drop never blocks).
    pub(super) fn close(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // A writer holding the lock is mid-answer; then the stop below ends the relay instead.
        if let Ok(mut stdin) = self.writer.0.try_lock() {
            stdin.take();
        }
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            while started.elapsed() < CLOSE_GRACE && matches!(child.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            drop(child);
        });
    }
}

/// Reads the relay's requests and answers each once the run decides it (see [`decide`]).
pub(super) async fn pass_requests(
    mut lines: BoundedLineReader<BufReader<ChildStdout>>,
    writer: RelayWriter,
    secret: String,
    replies: Replies,
    tx: mpsc::UnboundedSender<DelegateRequest>,
) {
    let secret: Arc<str> = secret.into();
    while let Ok(Some(line)) = lines.next_line().await {
        let Line::Complete(line) = line else { continue };
        let Ok(FromRelay::Request { conn, request }) = serde_json::from_slice::<FromRelay>(&line)
        else {
            continue;
        };
        let (secret, replies, tx, writer) =
            (secret.clone(), replies.clone(), tx.clone(), writer.clone());
        tokio::spawn(async move {
            let exit = decide(
                serde_json::from_value::<Request>(request).ok(),
                &secret,
                &replies,
                &tx,
            )
            .await;
            writer.send(&ToRelay::Reply { conn, exit }).await;
        });
    }
}
