//! Amp's permission checks, routed to the caller: a run's settings delegate every tool call to
//! the `amp-permission-delegate` helper, and the helper asks this run over a private channel
//! (see [`wire`] and `spec/amp-delegate.md`).
//!
//! [`DelegateChannel`] owns that channel: a 0700 temporary directory holding the link to the
//! helper, the channel file (socket path and a per-run secret, 0600), the settings file and the
//! socket. Each request the helper forwards becomes a [`DelegateRequest`]; the run answers it
//! with [`Replies::answer`], and the helper exits with that status. Dropping the channel (the
//! run ended) rejects whatever is still waiting and removes the directory.

pub mod wire;

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_api::kit::driver::{LineSource, SourceItem};
use agent_api::kit::lines::Line;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use wire::{Channel, Reply, Request, CHANNEL_FILE, DELEGATE_LINK, EXIT_REJECT, MAX_INPUT};

/// The `type` of the line a delegated request becomes in the run's native stream.
pub const REQUEST_TYPE: &str = "agent_api.amp_delegate";
/// Whether `line` is a delegated request: an object whose first key is `type`, with the value
/// [`REQUEST_TYPE`] (whitespace allowed between the tokens, as in hand-written transcripts).
pub fn is_request_line(line: &[u8]) -> bool {
    fn token<'a>(rest: &'a [u8], token: &[u8]) -> Option<&'a [u8]> {
        rest.trim_ascii_start().strip_prefix(token)
    }
    let rest = token(line, b"{").and_then(|r| token(r, b"\"type\"")).and_then(|r| token(r, b":"));
    rest.and_then(|r| token(r, b"\"agent_api.amp_delegate\"")).is_some()
}
/// The `type` of the run's answer, as a recorded two-way session keeps it (`dir: send`).
pub const REPLY_TYPE: &str = "agent_api.amp_delegate_reply";

/// One tool call amp asked the helper about.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DelegateRequest {
    /// This run's id for it (answer with it).
    pub id: String,
    /// The tool (`AGENT_TOOL_NAME`).
    pub tool: String,
    /// The tool's arguments.
    pub input: Value,
}

/// A request's native line, `type` first (see [`REQUEST_PREFIX`]).
#[derive(serde::Serialize)]
struct RequestLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    tool: &'a str,
    input: &'a Value,
}

impl DelegateRequest {
    /// The native line it becomes (see [`REQUEST_TYPE`]), without its newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let line = RequestLine { kind: REQUEST_TYPE, id: &self.id, tool: &self.tool, input: &self.input };
        serde_json::to_vec(&line).expect("a request line serializes")
    }
}

/// The waiting helpers of a run, by request id.
#[derive(Debug, Clone, Default)]
pub struct Replies(Arc<Mutex<HashMap<String, oneshot::Sender<i32>>>>);

impl Replies {
    /// Whether request `id` came through this channel and still waits.
    pub fn is_waiting(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    /// Answers request `id` with the helper's exit status; false when nothing waits for it.
    pub fn answer(&self, id: &str, exit: i32) -> bool {
        self.lock().remove(id).is_some_and(|tx| tx.send(exit).is_ok())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<i32>>> {
        // A panic elsewhere cannot leave the map half-updated: take it as it is.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A run's private permission channel (see the module docs).
#[derive(Debug)]
pub struct DelegateChannel {
    dir: tempfile::TempDir,
    replies: Replies,
    requests: Option<mpsc::UnboundedReceiver<DelegateRequest>>,
    listener: tokio::task::JoinHandle<()>,
}

impl DelegateChannel {
    /// Opens the channel for a run whose helper is `helper` (needs a tokio runtime).
    pub fn open(helper: &Path) -> io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("agent-api-amp-").tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        std::os::unix::fs::symlink(helper, dir.path().join(DELEGATE_LINK))?;
        let socket = dir.path().join("socket");
        let listener = UnixListener::bind(&socket)?;
        let secret = uuid::Uuid::new_v4().simple().to_string() + &uuid::Uuid::new_v4().simple().to_string();
        write_private(&dir.path().join(CHANNEL_FILE), &serde_json::to_vec(&Channel { socket, secret: secret.clone() })?)?;
        let replies = Replies::default();
        let (tx, rx) = mpsc::unbounded_channel();
        let listener = tokio::spawn(accept(listener, secret, replies.clone(), tx));
        Ok(Self { dir, replies, requests: Some(rx), listener })
    }

    /// The program the settings delegate to (the link in the channel directory).
    pub fn program(&self) -> PathBuf {
        self.dir.path().join(DELEGATE_LINK)
    }

    /// Writes the run's settings file: `base`'s settings, its `amp.permissions` rules, then one
    /// rule delegating every other tool call to [`DelegateChannel::program`].
    pub fn write_settings(&self, base: Option<Value>) -> io::Result<PathBuf> {
        let settings = delegating_settings(base, &self.program());
        let path = self.dir.path().join("settings.json");
        write_private(&path, &serde_json::to_vec_pretty(&settings)?)?;
        Ok(path)
    }

    /// The waiting helpers, to answer them.
    pub fn replies(&self) -> Replies {
        self.replies.clone()
    }

    /// The next request a helper forwarded (`None` once the requests went to
    /// [`DelegateChannel::side_lines`]).
    pub async fn next_request(&mut self) -> Option<DelegateRequest> {
        self.requests.as_mut()?.recv().await
    }

    /// The requests as native lines for the run's transport
    /// ([`agent_api::kit::Transport::with_side_lines`]); they end when the channel is dropped.
    pub fn side_lines(&mut self) -> LineSource {
        let Some(rx) = self.requests.take() else { return futures::stream::empty().boxed() };
        tokio_stream_of(rx).map(|request| Ok(SourceItem::Line(Line::Complete(request.to_bytes())))).boxed()
    }
}

impl Drop for DelegateChannel {
    fn drop(&mut self) {
        self.listener.abort();
        // Waiting helpers get their reject when their sender drops with the map.
        self.replies.lock().clear();
    }
}

fn tokio_stream_of<T: Send + 'static>(rx: mpsc::UnboundedReceiver<T>) -> futures::stream::BoxStream<'static, T> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) }).boxed()
}

/// Writes a file only its owner may read.
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(bytes)
}

/// `base` (an object, or nothing) with the delegate rule appended to its `amp.permissions`.
pub fn delegating_settings(base: Option<Value>, program: &Path) -> Value {
    let mut settings = match base {
        Some(Value::Object(map)) => Value::Object(map),
        _ => json!({}),
    };
    let rule = json!({ "tool": "*", "action": "delegate", "to": program.to_string_lossy() });
    match settings.get_mut("amp.permissions").and_then(Value::as_array_mut) {
        Some(rules) => rules.push(rule),
        None => settings["amp.permissions"] = json!([rule]),
    }
    settings
}

async fn accept(listener: UnixListener, secret: String, replies: Replies, tx: mpsc::UnboundedSender<DelegateRequest>) {
    let secret: Arc<str> = secret.into();
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(serve(stream, secret.clone(), replies.clone(), tx.clone()));
    }
}

/// One helper's request: check its secret, hand it to the run, and write the verdict back.
async fn serve(stream: UnixStream, secret: Arc<str>, replies: Replies, tx: mpsc::UnboundedSender<DelegateRequest>) {
    let (read, mut write) = stream.into_split();
    let mut line = Vec::new();
    let limit = (MAX_INPUT + 64 * 1024) as u64;
    // The helper writes its one line at once: a peer that holds the connection silent is dropped.
    let mut reader = BufReader::new(read.take(limit));
    let read_line = reader.read_until(b'\n', &mut line);
    if !matches!(tokio::time::timeout(std::time::Duration::from_secs(10), read_line).await, Ok(Ok(_))) {
        return;
    }
    let exit = match serde_json::from_slice::<Request>(&line) {
        Ok(request) if same(request.secret.as_bytes(), secret.as_bytes()) => {
            let id = format!("amp_perm_{}", uuid::Uuid::new_v4().simple());
            let (reply_tx, reply_rx) = oneshot::channel();
            replies.lock().insert(id.clone(), reply_tx);
            let sent = tx.send(DelegateRequest { id, tool: request.tool, input: request.input }).is_ok();
            if sent {
                reply_rx.await.unwrap_or(EXIT_REJECT)
            } else {
                EXIT_REJECT
            }
        }
        _ => EXIT_REJECT,
    };
    let mut answer = serde_json::to_vec(&Reply { exit }).expect("a reply serializes");
    answer.push(b'\n');
    let _ = write.write_all(&answer).await;
}

/// Compares secrets in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_keep_the_callers_rules_before_the_delegate_rule() {
        let base = json!({ "amp.permissions": [{ "tool": "Read", "action": "allow" }], "amp.mode": "x" });
        let settings = delegating_settings(Some(base), Path::new("/d/delegate"));
        let rules = settings["amp.permissions"].as_array().unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0]["tool"], "Read");
        assert_eq!(rules[1], json!({ "tool": "*", "action": "delegate", "to": "/d/delegate" }));
        assert_eq!(settings["amp.mode"], "x");
    }

    #[test]
    fn request_lines_start_with_their_type() {
        let request = DelegateRequest { id: "a".into(), tool: "Bash".into(), input: json!({ "cmd": "ls" }) };
        let line = request.to_bytes();
        assert!(is_request_line(&line), "{}", String::from_utf8_lossy(&line));
        assert!(is_request_line(br#" { "type" : "agent_api.amp_delegate", "id": "x"}"#));
        assert!(!is_request_line(br#"{"id":"x","type":"agent_api.amp_delegate"}"#));
        assert!(!is_request_line(br#"{"type":"assistant"}"#));
    }

    #[tokio::test]
    async fn a_helper_with_the_secret_gets_the_runs_answer_and_one_without_is_rejected_unheard() {
        let mut channel = DelegateChannel::open(Path::new("/bin/true")).unwrap();
        let program = channel.program();
        let asking = tokio::task::spawn_blocking(move || wire::ask_sdk(&program, "Bash", &br#"{"cmd":"ls"}"#[..]));
        let request = channel.next_request().await.unwrap();
        assert_eq!((request.tool.as_str(), &request.input), ("Bash", &json!({ "cmd": "ls" })));
        assert!(channel.replies().answer(&request.id, wire::EXIT_ALLOW));
        assert_eq!(asking.await.unwrap(), wire::EXIT_ALLOW);

        let channel_file: Channel = serde_json::from_slice(&std::fs::read(channel.dir.path().join(CHANNEL_FILE)).unwrap()).unwrap();
        let mut stream = tokio::net::UnixStream::connect(&channel_file.socket).await.unwrap();
        let forged = serde_json::to_vec(&Request { secret: "guess".into(), tool: "Bash".into(), input: json!({}) }).unwrap();
        stream.write_all(&[forged, b"\n".to_vec()].concat()).await.unwrap();
        let mut answer = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stream, &mut answer).await.unwrap();
        assert_eq!(serde_json::from_str::<Reply>(answer.trim()).unwrap().exit, EXIT_REJECT);
        let nothing = tokio::time::timeout(std::time::Duration::from_millis(200), channel.next_request()).await;
        assert!(nothing.is_err(), "a request without the secret never reaches the run");
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
