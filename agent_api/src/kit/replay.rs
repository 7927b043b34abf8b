//! Replaying a recorded native log through a backend's own protocol.
//!
//! Two formats are read, detected from the first line (`spec/recordings.md`):
//! plain native stdout (one native JSON message a line) and the two-way session format
//! (`{"t": …, "dir": "send"|"recv"|"event"|"stderr", "msg": …}` a line).

use std::path::Path;

use futures::StreamExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, BufReader};

use super::driver::{start_run, LineSource, RunSettings, SourceItem, Transport};
use super::lines::{BoundedLineReader, Line, DEFAULT_LINE_CAP};
use super::protocol::Protocol;
use super::transport::read_lines;
use crate::contract::backend::AgentBackend;
use crate::contract::handle::RunHandle;
use crate::vocabulary::error::{AgentError, StoreShape};

/// The format of a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordingFormat {
    /// The exact lines a one-way CLI wrote to stdout.
    NativeStdout,
    /// A two-way session: what the client sent, what the agent answered, stderr.
    Session,
}

impl RecordingFormat {
    /// The error of an agent (`agent`, its kind's id) that has no converter for this format.
    pub fn not_replayable_by(self, agent: &str) -> AgentError {
        AgentError::Replay {
            reason: format!("{agent} cannot replay {self} recordings"),
        }
    }
}

/// In words: `native stdout`, `session`.
impl std::fmt::Display for RecordingFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NativeStdout => "native stdout",
            Self::Session => "session",
        })
    }
}

/// A backend whose agent's recorded output can be replayed: the converter a recording is fed
/// through. Every built-in backend implements it; a caller's own backend may, and then replays as
/// they do ([`replay`], `agent-api replay`).
pub trait Replay: AgentBackend {
    /// The converter that turns a recorded native log of this agent into events.
    fn replay_protocol(&self, format: RecordingFormat) -> Result<Box<dyn Protocol>, AgentError>;

    /// What `first_line` shows the file to be, when it is a file of this agent's own session
    /// store rather than a recording of its output (a replay refuses it,
    /// [`AgentError::StoredSessionFile`]). The default: no store of its own to tell apart.
    fn store_shape(&self, first_line: &[u8]) -> Option<StoreShape> {
        let _ = first_line;
        None
    }
}

/// How to replay.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ReplayOptions {
    /// Fill `raw` in universal events.
    pub include_raw: bool,
    /// The recorded process's exit code, when known (for example from `<scenario>.meta.json`).
    pub exit_code: Option<i32>,
    /// The recorded process's stderr, when it was kept apart from the log (as in `meta.json`).
    pub stderr: Option<String>,
    /// Other backends whose stores' files are refused too, beside the replaying backend's own
    /// ([`Replay::store_shape`]): a file of another agent's store is no recording either.
    pub other_stores: Vec<std::sync::Arc<dyn Replay>>,
}

impl std::fmt::Debug for ReplayOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let others: Vec<String> = self
            .other_stores
            .iter()
            .map(|b| b.info().kind.to_string())
            .collect();
        f.debug_struct("ReplayOptions")
            .field("include_raw", &self.include_raw)
            .field("exit_code", &self.exit_code)
            .field("stderr", &self.stderr.as_ref().map(String::len))
            .field("other_stores", &others)
            .finish()
    }
}

impl ReplayOptions {
    /// Sets `include_raw`.
    pub fn include_raw(mut self, include_raw: bool) -> Self {
        self.include_raw = include_raw;
        self
    }

    /// Sets the recorded exit code.
    pub fn exit_code(mut self, exit_code: Option<i32>) -> Self {
        self.exit_code = exit_code;
        self
    }

    /// The exit code and stderr of the `<scenario>.meta.json` beside a recording, when there is one.
    pub fn beside(recording: &Path) -> Self {
        let meta = recorded_meta(recording);
        let exit_code = meta
            .as_ref()
            .and_then(|m| m.get("exit_code")?.as_i64())
            .map(|c| c as i32);
        let stderr = meta
            .as_ref()
            .and_then(|m| m.get("stderr")?.as_str().map(str::to_string));
        Self::default().exit_code(exit_code).stderr(stderr)
    }

    /// Sets the recorded stderr.
    pub fn stderr(mut self, stderr: Option<String>) -> Self {
        self.stderr = stderr;
        self
    }

    /// Refuses the files of `backends`' stores too ([`ReplayOptions::other_stores`]).
    pub fn refusing_stores_of(mut self, backends: Vec<std::sync::Arc<dyn Replay>>) -> Self {
        self.other_stores = backends;
        self
    }
}

#[derive(Deserialize)]
struct SessionLine<'a> {
    dir: &'a str,
    #[serde(borrow)]
    msg: &'a RawValue,
}

/// Which format a first line belongs to.
pub fn detect_format(first_line: &[u8]) -> RecordingFormat {
    match serde_json::from_slice::<SessionLine<'_>>(first_line) {
        Ok(line) if matches!(line.dir, "send" | "recv" | "event" | "stderr") => {
            RecordingFormat::Session
        }
        _ => RecordingFormat::NativeStdout,
    }
}

fn session_item(line: Line) -> SourceItem {
    let bytes = match line {
        Line::Complete(bytes) => bytes,
        oversize => return SourceItem::Line(oversize),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return SourceItem::Line(Line::Complete(bytes));
    }
    match serde_json::from_slice::<SessionLine<'_>>(&bytes) {
        Ok(SessionLine {
            dir: "recv" | "event",
            msg,
        }) => SourceItem::Line(Line::Complete(msg.get().as_bytes().to_vec())),
        Ok(SessionLine { dir: "send", msg }) => match serde_json::from_str(msg.get()) {
            Ok(value) => SourceItem::Sent(value),
            Err(e) => SourceItem::Malformed(format!("recorded send is not JSON: {e}")),
        },
        Ok(SessionLine { dir: "stderr", msg }) => {
            SourceItem::Stderr(serde_json::from_str::<String>(msg.get()).unwrap_or_default())
        }
        Ok(SessionLine { dir, .. }) => SourceItem::Malformed(format!(
            "unknown session direction {:?}",
            crate::guards::bounds::utf8_prefix(dir, 32)
        )),
        Err(e) => SourceItem::Malformed(format!("not a session line: {e}")),
    }
}

/// Reads a recording: detects its format from the first non-empty line and returns the format
/// with a source of its items. A file `store_shape` recognizes from that line as one of an
/// agent's own session store is refused ([`AgentError::StoredSessionFile`]).
pub async fn open_recording(
    reader: impl AsyncRead + Send + Unpin + 'static,
    store_shape: impl Fn(&[u8]) -> Option<StoreShape>,
) -> Result<(RecordingFormat, LineSource), AgentError> {
    let mut lines = BoundedLineReader::new(
        BufReader::with_capacity(64 * 1024, reader),
        DEFAULT_LINE_CAP,
    );
    let mut first = Vec::new();
    let format = loop {
        match lines.next_line().await? {
            Some(Line::Complete(bytes)) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
            Some(line) => {
                if let Some(looks_like) = match &line {
                    Line::Complete(bytes) => store_shape(bytes),
                    Line::Oversize { .. } => None,
                } {
                    return Err(AgentError::StoredSessionFile { looks_like });
                }
                let format = match &line {
                    Line::Complete(bytes) => detect_format(bytes),
                    Line::Oversize { .. } => RecordingFormat::NativeStdout,
                };
                first.push(line);
                break format;
            }
            None => break RecordingFormat::NativeStdout,
        }
    };
    let first = futures::stream::iter(first.into_iter().map(Ok));
    let source: LineSource = match format {
        RecordingFormat::Session => {
            let rest = futures::stream::unfold(lines, |mut lines| async move {
                match lines.next_line().await {
                    Ok(Some(line)) => Some((Ok(line), lines)),
                    Ok(None) => None,
                    Err(e) => Some((Err(e), lines)),
                }
            });
            first.chain(rest).map(|r| r.map(session_item)).boxed()
        }
        RecordingFormat::NativeStdout => first
            .map(|r| r.map(SourceItem::Line))
            .chain(read_lines(lines))
            .boxed(),
    };
    Ok((format, source))
}

/// Replays a recording through `backend`'s protocol, as a run whose events can be read in
/// either view.
pub async fn replay(
    backend: &dyn Replay,
    reader: impl AsyncRead + Send + Unpin + 'static,
    options: ReplayOptions,
) -> Result<RunHandle, AgentError> {
    let others = &options.other_stores;
    let store_shape = |line: &[u8]| {
        std::iter::once(backend)
            .chain(others.iter().map(|b| b.as_ref() as &dyn Replay))
            .find_map(|b| b.store_shape(line))
    };
    let (format, source) = open_recording(reader, store_shape).await?;
    let stderr: Vec<std::io::Result<SourceItem>> = options
        .stderr
        .iter()
        .flat_map(|text| text.lines())
        .map(|line| Ok(SourceItem::Stderr(line.to_string())))
        .collect();
    let source: LineSource = futures::stream::iter(stderr).chain(source).boxed();
    let protocol = backend.replay_protocol(format)?;
    let mut settings = RunSettings::new(backend.info().kind.clone());
    settings.include_raw = options.include_raw;
    settings.tools_structured = backend
        .info()
        .capabilities
        .contains(agent_api_capabilities::TOOLS_STRUCTURED_V1);
    Ok(start_run(
        settings,
        Transport::replay(source, options.exit_code),
        protocol,
    ))
}

/// Replays a file; the exit code comes from a `<scenario>.meta.json` beside it, when present.
pub async fn replay_file(
    backend: &dyn Replay,
    path: &Path,
    include_raw: bool,
) -> Result<RunHandle, AgentError> {
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| AgentError::Replay {
            reason: format!("cannot open {}: {e}", path.display()),
        })?;
    replay(
        backend,
        file,
        ReplayOptions::beside(path).include_raw(include_raw),
    )
    .await
}

/// The `<scenario>.meta.json` next to a fixture, if there is one.
pub fn recorded_meta(path: &Path) -> Option<serde_json::Value> {
    let name = path.file_name()?.to_str()?;
    let stem = name
        .strip_suffix(".stdout.jsonl")
        .or_else(|| name.strip_suffix(".session.jsonl"))?;
    let meta = std::fs::read(path.with_file_name(format!("{stem}.meta.json"))).ok()?;
    serde_json::from_slice(&meta).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_lines_are_detected_and_native_lines_are_not() {
        assert_eq!(
            detect_format(br#"{"t":0.1,"dir":"send","msg":{"type":"x"}}"#),
            RecordingFormat::Session
        );
        assert_eq!(
            detect_format(br#"{"type":"system","subtype":"init"}"#),
            RecordingFormat::NativeStdout
        );
        assert_eq!(detect_format(b"garbage"), RecordingFormat::NativeStdout);
    }

    #[test]
    fn session_items_keep_received_bytes_exactly() {
        let line = br#"{"t":1,"dir":"recv","msg":{"b":1, "a":2}}"#.to_vec();
        match session_item(Line::Complete(line)) {
            SourceItem::Line(Line::Complete(bytes)) => assert_eq!(bytes, br#"{"b":1, "a":2}"#),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            session_item(Line::Complete(b"{\"t\":1}".to_vec())),
            SourceItem::Malformed(_)
        ));
    }
}
