//! Amp's permission checks, routed to the caller: a run's settings delegate every tool call to
//! the `amp-permission-delegate` helper, and the helper asks this run over a private channel
//! (see [`wire`] and `spec/amp-delegate.md`).
//!
//! [`DelegateChannel`] owns that channel: a 0700 temporary directory holding the link to the
//! helper, the channel file (socket path and a per-run secret, 0600), the settings file and the
//! socket. Each request the helper forwards becomes a [`DelegateRequest`]; the run answers it
//! with [`Replies::answer`], and the helper exits with that status. Dropping the channel (the
//! run ended) rejects whatever is still waiting and removes the directory.
//!
//! Where amp runs on the far side of a launcher (prefix, container, ssh) the directory is made
//! there by the helper run as a [`relay`], which passes each request over its stdio; the SDK's
//! side of it is the private `far` module. Requests then reach the run the same way.

mod far;
pub mod relay;
pub mod wire;

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_api::kit::lines::Line;
use agent_api::kit::{LineSource, SourceItem};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use agent_api::request::Launcher;
use agent_api::AgentError;
use wire::{
    Channel, Reply, Request, CHANNEL_FILE, DELEGATE_LINK, EXIT_REJECT, MAX_INPUT, SETTINGS_FILE,
    SOCKET_FILE,
};

/// The `type` of the line a delegated request becomes in the run's native stream.
pub const REQUEST_TYPE: &str = "agent_api.amp_delegate";
/// Whether `line` is a delegated request: an object whose first key is `type`, with the value
/// [`REQUEST_TYPE`] (whitespace allowed between the tokens, as in hand-written transcripts).
pub fn is_request_line(line: &[u8]) -> bool {
    fn token<'a>(rest: &'a [u8], token: &[u8]) -> Option<&'a [u8]> {
        rest.trim_ascii_start().strip_prefix(token)
    }
    let rest = token(line, b"{")
        .and_then(|r| token(r, b"\"type\""))
        .and_then(|r| token(r, b":"));
    rest.and_then(|r| token(r, b"\"agent_api.amp_delegate\""))
        .is_some()
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
        let line = RequestLine {
            kind: REQUEST_TYPE,
            id: &self.id,
            tool: &self.tool,
            input: &self.input,
        };
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
        self.lock()
            .remove(id)
            .is_some_and(|tx| tx.send(exit).is_ok())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<i32>>> {
        // A panic elsewhere cannot leave the map half-updated: take it as it is.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A run's private permission channel (see the module docs).
#[derive(Debug)]
pub struct DelegateChannel {
    place: Place,
    replies: Replies,
    requests: Option<mpsc::UnboundedReceiver<DelegateRequest>>,
    listener: tokio::task::JoinHandle<()>,
}

/// Where the run's directory is.
#[derive(Debug)]
enum Place {
    /// On this machine (a local or bwrap launcher).
    Here(tempfile::TempDir),
    /// On the far side of the run's launcher, kept by a relay.
    Far(Box<far::Relay>),
}

impl DelegateChannel {
    /// Opens the channel on this machine for a run whose helper is `helper`, and writes the run's
    /// settings: `settings`, its `amp.permissions` rules, then one rule delegating every other tool
    /// call to [`DelegateChannel::program`] (needs a tokio runtime).
    pub fn open(helper: &Path, settings: Option<Value>) -> io::Result<Self> {
        let dir = private_dir()?;
        let secret = new_secret();
        let listener = lay_out(dir.path(), helper, &secret)?;
        write_private(
            &dir.path().join(SETTINGS_FILE),
            &settings_bytes(settings, dir.path(), true)?,
        )?;
        listener.set_nonblocking(true)?;
        let listener = UnixListener::from_std(listener)?;
        let replies = Replies::default();
        let (tx, rx) = mpsc::unbounded_channel();
        let listener = tokio::spawn(accept(listener, secret, replies.clone(), tx));
        Ok(Self {
            place: Place::Here(dir),
            replies,
            requests: Some(rx),
            listener,
        })
    }

    /// Opens the channel on the far side of `launcher` (a container, ssh or prefix launcher): starts
    /// `helper` there as a relay (`amp-permission-delegate relay`), which makes the run's directory
    /// there (in `tmpdir` when the run sets the agent's `TMPDIR`, else in the far side's own),
    /// writes `settings` (with the delegate rule when `delegate`) and passes each helper's request
    /// on over its stdio. Fails with [`AgentError::Spawn`] when the relay cannot start.
    pub async fn open_far(
        launcher: &Launcher,
        helper: &Path,
        tmpdir: Option<&str>,
        settings: Value,
        delegate: bool,
    ) -> Result<Self, AgentError> {
        let secret = new_secret();
        let start = wire::ToRelay::Start {
            settings,
            delegate,
            secret: secret.clone(),
        };
        let (relay, requests) = far::Relay::start(launcher, helper, tmpdir, start).await?;
        let replies = Replies::default();
        let (tx, rx) = mpsc::unbounded_channel();
        let listener = tokio::spawn(far::pass_requests(
            requests,
            relay.writer(),
            secret,
            replies.clone(),
            tx,
        ));
        Ok(Self {
            place: Place::Far(Box::new(relay)),
            replies,
            requests: Some(rx),
            listener,
        })
    }

    /// The run's directory, where its agent sees it.
    pub fn dir(&self) -> &Path {
        match &self.place {
            Place::Here(dir) => dir.path(),
            Place::Far(relay) => relay.dir(),
        }
    }

    /// The program the settings delegate to (the link in the channel directory).
    pub fn program(&self) -> PathBuf {
        self.dir().join(DELEGATE_LINK)
    }

    /// The run's settings file (for `--settings-file`).
    pub fn settings_file(&self) -> PathBuf {
        self.dir().join(SETTINGS_FILE)
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
        let Some(rx) = self.requests.take() else {
            return futures::stream::empty().boxed();
        };
        tokio_stream_of(rx)
            .map(|request| Ok(SourceItem::Line(Line::Complete(request.to_bytes()))))
            .boxed()
    }
}

impl Drop for DelegateChannel {
    fn drop(&mut self) {
        self.listener.abort();
        // Waiting helpers get their reject when their sender drops with the map.
        self.replies.lock().clear();
        if let Place::Far(relay) = &mut self.place {
            relay.close();
        }
    }
}

/// A fresh 0700 directory for a run (`agent-api-amp-…` in the temporary directory).
pub(crate) fn private_dir() -> io::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("agent-api-amp-")
        .tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}

/// 256 random bits, as hex.
fn new_secret() -> String {
    uuid::Uuid::new_v4().simple().to_string() + &uuid::Uuid::new_v4().simple().to_string()
}

/// Lays out the channel in a run's directory `dir`: the link to `helper`, the channel file naming
/// the socket and `secret`, and the socket, listening. Used here and by the far side's relay.
pub(crate) fn lay_out(
    dir: &Path,
    helper: &Path,
    secret: &str,
) -> io::Result<std::os::unix::net::UnixListener> {
    std::os::unix::fs::symlink(helper, dir.join(DELEGATE_LINK))?;
    let socket = dir.join(SOCKET_FILE);
    let listener = std::os::unix::net::UnixListener::bind(&socket)?;
    write_private(
        &dir.join(CHANNEL_FILE),
        &serde_json::to_vec(&Channel {
            socket,
            secret: secret.to_string(),
        })?,
    )?;
    Ok(listener)
}

/// The settings file's bytes for a run whose directory is `dir`: `base`, with the delegate rule
/// when `delegate`.
pub(crate) fn settings_bytes(
    base: Option<Value>,
    dir: &Path,
    delegate: bool,
) -> io::Result<Vec<u8>> {
    let settings = if delegate {
        delegating_settings(base, &dir.join(DELEGATE_LINK))
    } else {
        base.unwrap_or_else(|| json!({}))
    };
    Ok(serde_json::to_vec_pretty(&settings)?)
}

fn tokio_stream_of<T: Send + 'static>(
    rx: mpsc::UnboundedReceiver<T>,
) -> futures::stream::BoxStream<'static, T> {
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
    .boxed()
}

/// Writes a file only its owner may read.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

/// `base` (an object, or nothing) with the delegate rule appended to its `amp.permissions`.
pub fn delegating_settings(base: Option<Value>, program: &Path) -> Value {
    let mut settings = match base {
        Some(Value::Object(map)) => Value::Object(map),
        _ => json!({}),
    };
    let rule = json!({ "tool": "*", "action": "delegate", "to": program.to_string_lossy() });
    match settings
        .get_mut("amp.permissions")
        .and_then(Value::as_array_mut)
    {
        Some(rules) => rules.push(rule),
        None => settings["amp.permissions"] = json!([rule]),
    }
    settings
}

async fn accept(
    listener: UnixListener,
    secret: String,
    replies: Replies,
    tx: mpsc::UnboundedSender<DelegateRequest>,
) {
    let secret: Arc<str> = secret.into();
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(serve(stream, secret.clone(), replies.clone(), tx.clone()));
    }
}

/// One helper's request: check its secret, hand it to the run, and write the verdict back.
async fn serve(
    stream: UnixStream,
    secret: Arc<str>,
    replies: Replies,
    tx: mpsc::UnboundedSender<DelegateRequest>,
) {
    let (read, mut write) = stream.into_split();
    let mut line = Vec::new();
    let limit = (MAX_INPUT + 64 * 1024) as u64;
    // The helper writes its one line at once: a peer that holds the connection silent is dropped.
    let mut reader = BufReader::new(read.take(limit));
    let read_line = reader.read_until(b'\n', &mut line);
    if !matches!(
        tokio::time::timeout(std::time::Duration::from_secs(10), read_line).await,
        Ok(Ok(_))
    ) {
        return;
    }
    let exit = decide(
        serde_json::from_slice::<Request>(&line).ok(),
        &secret,
        &replies,
        &tx,
    )
    .await;
    let mut answer = serde_json::to_vec(&Reply { exit }).expect("a reply serializes");
    answer.push(b'\n');
    let _ = write.write_all(&answer).await;
}

/// Hands a helper's request (`None`: it was not one) to the run when it carries the run's secret,
/// and waits for the verdict: the helper's exit status. Anything else rejects unheard.
async fn decide(
    request: Option<Request>,
    secret: &str,
    replies: &Replies,
    tx: &mpsc::UnboundedSender<DelegateRequest>,
) -> i32 {
    let Some(request) = request.filter(|r| same(r.secret.as_bytes(), secret.as_bytes())) else {
        return EXIT_REJECT;
    };
    let id = format!("amp_perm_{}", uuid::Uuid::new_v4().simple());
    let (reply_tx, reply_rx) = oneshot::channel();
    replies.lock().insert(id.clone(), reply_tx);
    if tx
        .send(DelegateRequest {
            id,
            tool: request.tool,
            input: request.input,
        })
        .is_err()
    {
        return EXIT_REJECT;
    }
    reply_rx.await.unwrap_or(EXIT_REJECT)
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
        let base =
            json!({ "amp.permissions": [{ "tool": "Read", "action": "allow" }], "amp.mode": "x" });
        let settings = delegating_settings(Some(base), Path::new("/d/delegate"));
        let rules = settings["amp.permissions"].as_array().unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0]["tool"], "Read");
        assert_eq!(
            rules[1],
            json!({ "tool": "*", "action": "delegate", "to": "/d/delegate" })
        );
        assert_eq!(settings["amp.mode"], "x");
    }

    #[test]
    fn request_lines_start_with_their_type() {
        let request = DelegateRequest {
            id: "a".into(),
            tool: "Bash".into(),
            input: json!({ "cmd": "ls" }),
        };
        let line = request.to_bytes();
        assert!(is_request_line(&line), "{}", String::from_utf8_lossy(&line));
        assert!(is_request_line(
            br#" { "type" : "agent_api.amp_delegate", "id": "x"}"#
        ));
        assert!(!is_request_line(
            br#"{"id":"x","type":"agent_api.amp_delegate"}"#
        ));
        assert!(!is_request_line(br#"{"type":"assistant"}"#));
    }

    #[tokio::test]
    async fn a_helper_with_the_secret_gets_the_runs_answer_and_one_without_is_rejected_unheard() {
        let mut channel = DelegateChannel::open(Path::new("/bin/true"), None).unwrap();
        let program = channel.program();
        let asking = tokio::task::spawn_blocking(move || {
            wire::ask_sdk(&program, "Bash", &br#"{"cmd":"ls"}"#[..])
        });
        let request = channel.next_request().await.unwrap();
        assert_eq!(
            (request.tool.as_str(), &request.input),
            ("Bash", &json!({ "cmd": "ls" }))
        );
        assert!(channel.replies().answer(&request.id, wire::EXIT_ALLOW));
        assert_eq!(asking.await.unwrap(), wire::EXIT_ALLOW);

        let channel_file: Channel =
            serde_json::from_slice(&std::fs::read(channel.dir().join(CHANNEL_FILE)).unwrap())
                .unwrap();
        let mut stream = tokio::net::UnixStream::connect(&channel_file.socket)
            .await
            .unwrap();
        let forged = serde_json::to_vec(&Request {
            secret: "guess".into(),
            tool: "Bash".into(),
            input: json!({}),
        })
        .unwrap();
        stream
            .write_all(&[forged, b"\n".to_vec()].concat())
            .await
            .unwrap();
        let mut answer = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stream, &mut answer)
            .await
            .unwrap();
        assert_eq!(
            serde_json::from_str::<Reply>(answer.trim()).unwrap().exit,
            EXIT_REJECT
        );
        let nothing = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            channel.next_request(),
        )
        .await;
        assert!(
            nothing.is_err(),
            "a request without the secret never reaches the run"
        );
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
