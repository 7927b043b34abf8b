//! The relay: `amp-permission-delegate relay`, run on the far side of a container, ssh or prefix
//! launcher, where amp runs and the SDK's socket cannot be reached.
//!
//! It reads [`ToRelay::Start`] from stdin, makes the run's 0700 directory there (the settings file,
//! and when tool calls are delegated the link to itself, the channel file and the socket, laid
//! out as on the SDK's machine), and writes [`FromRelay::Ready`]. Each helper that connects sends
//! its one request line; the relay writes it as [`FromRelay::Request`], and answers the helper
//! with the [`ToRelay::Reply`] the SDK sends for it. When stdin ends, or on SIGTERM, SIGINT or
//! SIGHUP, it removes the directory and exits: the helpers still waiting reject (their connection
//! closes). It starts no program and reads nothing of its environment.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::wire::{FromRelay, Reply, ToRelay, EXIT_REJECT, MAX_INPUT, SETTINGS_FILE};

/// The largest start line (the run's settings; MCP servers and rules can be long).
const MAX_START: u64 = 16 * 1024 * 1024;

/// The relay's stdout, shared by the threads that forward requests.
type Output = Arc<Mutex<Box<dyn Write + Send>>>;
/// The helpers waiting for a verdict, by the relay's number for them.
type Waiting = Arc<Mutex<HashMap<u64, mpsc::Sender<i32>>>>;

/// Runs the relay on this process's stdin and stdout (see the module docs); `helper` is this
/// program, which the settings delegate to. Returns the exit status (0 once stdin ended).
pub fn main(helper: &Path) -> i32 {
    block_stop_signals();
    let output: Output = Arc::new(Mutex::new(Box::new(io::stdout())));
    let mut input = BufReader::new(io::stdin().lock());
    let (dir, listener) = match start(&mut input, helper) {
        Ok(started) => started,
        Err(reason) => {
            write(&output, &FromRelay::Failed { reason });
            return 1;
        }
    };
    let dir = Arc::new(dir);
    let on_signal = dir.clone();
    std::thread::spawn(move || {
        wait_for_stop_signal();
        let _ = std::fs::remove_dir_all(&*on_signal);
        std::process::exit(0);
    });
    write(
        &output,
        &FromRelay::Ready {
            dir: (*dir).clone(),
        },
    );
    let waiting: Waiting = Arc::default();
    if let Some(listener) = listener {
        let (output, waiting) = (output.clone(), waiting.clone());
        std::thread::spawn(move || accept(&listener, &output, &waiting));
    }
    answer_helpers(input, &waiting);
    let _ = std::fs::remove_dir_all(&*dir);
    0
}

/// Reads the start line and lays the directory out; the error says why in words.
fn start(
    input: &mut impl BufRead,
    helper: &Path,
) -> Result<(PathBuf, Option<UnixListener>), String> {
    let mut line = Vec::new();
    input
        .take(MAX_START)
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("cannot read the start line: {e}"))?;
    let Ok(ToRelay::Start {
        settings,
        delegate,
        secret,
    }) = serde_json::from_slice::<ToRelay>(&line)
    else {
        return Err("the first line is not a start message".into());
    };
    let settings = match settings {
        Value::Object(map) => Some(Value::Object(map)),
        Value::Null => None,
        _ => return Err("the settings are not a JSON object".into()),
    };
    let laid_out = || -> io::Result<(tempfile::TempDir, Option<UnixListener>)> {
        let dir = super::private_dir()?;
        let listener = if delegate {
            Some(super::lay_out(dir.path(), helper, &secret)?)
        } else {
            None
        };
        super::write_private(
            &dir.path().join(SETTINGS_FILE),
            &super::settings_bytes(settings, dir.path(), delegate)?,
        )?;
        Ok((dir, listener))
    };
    // Until it is ready the directory removes itself on error; afterwards the relay removes it.
    let (dir, listener) =
        laid_out().map_err(|e| format!("cannot lay out the run's directory: {e}"))?;
    Ok((dir.keep(), listener))
}

/// Routes the SDK's verdicts to the waiting helpers until stdin ends.
fn answer_helpers(input: impl BufRead, waiting: &Waiting) {
    for line in input.split(b'\n') {
        let Ok(line) = line else { return };
        if let Ok(ToRelay::Reply { conn, exit }) = serde_json::from_slice::<ToRelay>(&line) {
            if let Some(helper) = lock(waiting).remove(&conn) {
                let _ = helper.send(exit);
            }
        }
    }
}

fn accept(listener: &UnixListener, output: &Output, waiting: &Waiting) {
    for (conn, stream) in (1u64..).zip(listener.incoming()) {
        let Ok(stream) = stream else { continue };
        let (output, waiting) = (output.clone(), waiting.clone());
        std::thread::spawn(move || serve(conn, stream, &output, &waiting));
    }
}

/// One helper: its line goes to the SDK, the SDK's verdict back to it.
fn serve(conn: u64, stream: UnixStream, output: &Output, waiting: &Waiting) {
    // The helper writes its one line at once: a peer that holds the connection silent is dropped.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut line = Vec::new();
    let limit = (MAX_INPUT + 64 * 1024) as u64;
    let read = BufReader::new((&stream).take(limit)).read_until(b'\n', &mut line);
    let exit = match (read, serde_json::from_slice::<Value>(&line)) {
        (Ok(_), Ok(request)) => {
            let (tx, rx) = mpsc::channel();
            lock(waiting).insert(conn, tx);
            write(output, &FromRelay::Request { conn, request });
            rx.recv().unwrap_or(EXIT_REJECT)
        }
        _ => EXIT_REJECT,
    };
    let mut answer = serde_json::to_vec(&Reply { exit }).expect("a reply serializes");
    answer.push(b'\n');
    let _ = (&stream).write_all(&answer);
}

fn write(output: &Output, message: &FromRelay) {
    let mut line = serde_json::to_vec(message).expect("a relay message serializes");
    line.push(b'\n');
    let mut out = lock(output);
    // Nobody to tell when the SDK is gone: stdin ends next, and the relay with it.
    let _ = out.write_all(&line).and_then(|()| out.flush());
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The signals that stop a relay (the launcher's stop sends SIGTERM), blocked in every thread so
/// that one thread takes them with `sigwait` and removes the directory first.
fn stop_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset and sigaddset only write the set they are given.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

fn block_stop_signals() {
    let set = stop_signals();
    // SAFETY: pthread_sigmask only reads the set; threads started later inherit the mask.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

fn wait_for_stop_signal() {
    let set = stop_signals();
    let mut signal = 0;
    // SAFETY: sigwait reads the set and writes the signal number it took.
    unsafe { libc::sigwait(&set, &mut signal) };
}
