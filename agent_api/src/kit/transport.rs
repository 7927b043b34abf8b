//! Where a run's native lines come from and its input goes to: a spawned process, an agent
//! running in this process, or a recording.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::stream::{BoxStream, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::lines::{BoundedLineReader, Line, LineChunk, Lines};
use super::process::{spawn, CommandSpec, ProcessGroupChild};
use super::stderr::StderrSource;
use crate::vocabulary::error::AgentError;

/// One item from a transport's output.
#[derive(Debug)]
#[non_exhaustive]
pub enum SourceItem {
    /// A line the agent wrote.
    Line(Line),
    /// Several whole lines the agent wrote, read at once (see [`LineChunk`]).
    Lines(LineChunk),
    /// A message the client sent, from a recording.
    Sent(Value),
    /// A stderr line, from a recording.
    Stderr(String),
    /// A recording line that is not in the recording format; becomes `agent.unparsed`.
    Malformed(String),
}

/// A stream of output items.
pub type LineSource = BoxStream<'static, std::io::Result<SourceItem>>;

pub(super) enum Lifecycle {
    Process(Box<ProcessGroupChild>),
    Task(JoinHandle<i32>),
    /// No process: a recording, with the exit code it recorded (if known).
    Recorded(Option<i32>),
    Finished,
}

/// Where a run's native lines come from and its input goes to: a spawned process, an agent
/// running in this process, or a recording.
pub struct Transport {
    pub(super) source: LineSource,
    pub(super) stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    pub(super) stderr: Option<super::stderr::StderrSource>,
    pub(super) lifecycle: Lifecycle,
}

/// The agent's ends of an in-process transport.
pub struct AgentPipes {
    /// Write native lines here (the agent's stdout).
    pub stdout: tokio::io::DuplexStream,
    /// Read client messages here (the agent's stdin).
    pub stdin: BufReader<tokio::io::DuplexStream>,
}

impl Transport {
    /// Spawns the agent CLI (see [`super::process::spawn`]).
    pub fn spawn(spec: &CommandSpec, line_cap: usize) -> Result<Self, AgentError> {
        let mut process = spawn(spec)?;
        let secrets = spec.secret_values();
        let stdout = process.child.stdout.take().expect("stdout is piped");
        let stderr = process.child.stderr.take().expect("stderr is piped");
        let stdin = process
            .child
            .stdin
            .take()
            .map(|s| Box::pin(s) as Pin<Box<dyn AsyncWrite + Send>>);
        let stderr = Some(StderrSource::new(Box::pin(stderr), secrets));
        Ok(Self {
            source: line_source(stdout, line_cap),
            stdin,
            stderr,
            lifecycle: Lifecycle::Process(Box::new(process)),
        })
    }

    /// Runs `agent` as a task of this process, talking through in-memory pipes. Its return
    /// value is the run's exit code. Cancel and drop abort the task.
    pub fn in_process<F, Fut>(line_cap: usize, agent: F) -> Self
    where
        F: FnOnce(AgentPipes) -> Fut,
        Fut: Future<Output = i32> + Send + 'static,
    {
        let (agent_out, client_in) = tokio::io::duplex(64 * 1024);
        let (client_out, agent_in) = tokio::io::duplex(64 * 1024);
        let task = tokio::spawn(agent(AgentPipes {
            stdout: agent_out,
            stdin: BufReader::new(agent_in),
        }));
        Self {
            source: line_source(client_in, line_cap),
            stdin: Some(Box::pin(client_out)),
            stderr: None,
            lifecycle: Lifecycle::Task(task),
        }
    }

    /// Adds native lines that do not come from the agent's stdout (a backend's private side
    /// channel, such as a permission delegate the CLI calls back): they reach the protocol
    /// interleaved with the agent's lines. The output still ends when the agent's stdout does;
    /// `side` is dropped then.
    pub fn with_side_lines(mut self, side: LineSource) -> Self {
        let primary = std::mem::replace(&mut self.source, futures::stream::empty().boxed());
        // `None` marks the end of the agent's stdout: the merged stream stops there.
        let primary = primary
            .map(Some)
            .chain(futures::stream::once(async { None }));
        let merged = futures::stream::select(primary, side.map(Some));
        self.source = merged
            .take_while(|item| std::future::ready(item.is_some()))
            .filter_map(std::future::ready)
            .boxed();
        self
    }

    /// A transport that only replays `source` (no process, input discarded); `exit_code` is
    /// what the recorded process exited with, when known.
    pub fn replay(source: LineSource, exit_code: Option<i32>) -> Self {
        Self {
            source,
            stdin: None,
            stderr: None,
            lifecycle: Lifecycle::Recorded(exit_code),
        }
    }
}

/// Reads `reader` as bounded lines.
pub fn line_source(reader: impl AsyncRead + Send + Unpin + 'static, cap: usize) -> LineSource {
    read_lines(BoundedLineReader::new(
        BufReader::with_capacity(64 * 1024, reader),
        cap,
    ))
}

/// The items of `lines`: the lines that wait together as one chunk, others one by one.
pub(super) fn read_lines(
    lines: BoundedLineReader<impl tokio::io::AsyncBufRead + Send + Unpin + 'static>,
) -> LineSource {
    futures::stream::unfold(lines, |mut lines| async move {
        match lines.next_lines().await {
            Ok(Some(Lines::Chunk(chunk))) => Some((Ok(SourceItem::Lines(chunk)), lines)),
            Ok(Some(Lines::One(line))) => Some((Ok(SourceItem::Line(line)), lines)),
            Ok(None) => None,
            Err(e) => Some((Err(e), lines)),
        }
    })
    .boxed()
}

pub(super) async fn wait_exit(lifecycle: &mut Lifecycle) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match lifecycle {
        Lifecycle::Process(p) => match p.child.wait().await {
            Ok(status) => (status.code(), status.signal()),
            Err(_) => (None, None),
        },
        Lifecycle::Task(task) => {
            let result = task.await;
            *lifecycle = Lifecycle::Finished;
            match result {
                Ok(code) => (Some(code), None),
                Err(_) => (None, Some(libc::SIGKILL)),
            }
        }
        Lifecycle::Recorded(code) => {
            let code = *code;
            *lifecycle = Lifecycle::Finished;
            (code, None)
        }
        Lifecycle::Finished => std::future::pending().await,
    }
}

/// The queue of replies to the agent's stdin, bounded in bytes: an agent that stops reading
/// its stdin cannot make the run hold its replies without limit.
pub(super) struct StdinQueue {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    queued: Arc<AtomicUsize>,
    limit: usize,
}

impl StdinQueue {
    /// Starts the task that writes queued lines to `writer`, at most `limit` bytes waiting.
    pub(super) fn spawn(mut writer: Pin<Box<dyn AsyncWrite + Send>>, limit: usize) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let queued = Arc::new(AtomicUsize::new(0));
        let written = queued.clone();
        tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if writer.write_all(&line).await.is_err() || writer.flush().await.is_err() {
                    break;
                }
                written.fetch_sub(line.len(), Ordering::AcqRel);
            }
            let _ = writer.shutdown().await;
        });
        Self { tx, queued, limit }
    }

    /// Queues `line`; refuses it (typed) when the agent has left `limit` bytes unread.
    pub(super) fn push(&self, line: Vec<u8>) -> Result<(), AgentError> {
        let waiting = self.queued.load(Ordering::Acquire);
        if waiting > 0 && waiting.saturating_add(line.len()) > self.limit {
            return Err(AgentError::InputBlocked {
                queued_bytes: waiting as u64,
            });
        }
        self.queued.fetch_add(line.len(), Ordering::AcqRel);
        // A closed writer (the agent's stdin is gone) drops what is queued, as a pipe would.
        let _ = self.tx.send(line);
        Ok(())
    }
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for AgentPipes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentPipes").finish_non_exhaustive()
    }
}
