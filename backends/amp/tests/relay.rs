//! The relay (`amp-permission-delegate relay`) on its own, driven over its stdio as the SDK drives
//! it through a far launcher: the run's directory it lays out, a helper's request passed both
//! ways, and the directory removed whether its stdin ends or it is stopped with SIGTERM.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use agent_api_amp::delegate::wire::{self, FromRelay, ToRelay};
use serde_json::{json, Value};

struct Relay {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Relay {
    fn spawn() -> Relay {
        let mut child = Command::new(env!("CARGO_BIN_EXE_amp-permission-delegate"))
            .arg(wire::RELAY_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the helper starts");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Relay {
            child,
            stdin,
            stdout,
        }
    }

    /// Starts it with `settings`; returns the directory it made.
    fn start(settings: Value, delegate: bool) -> (Relay, PathBuf) {
        let mut relay = Relay::spawn();
        relay.send(&ToRelay::Start {
            settings,
            delegate,
            secret: "s3cret".into(),
        });
        match relay.next() {
            FromRelay::Ready { dir } => (relay, dir),
            other => panic!("not ready: {other:?}"),
        }
    }

    fn send(&mut self, message: &ToRelay) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin
            .write_all(&[serde_json::to_vec(message).unwrap(), b"\n".to_vec()].concat())
            .unwrap();
        stdin.flush().unwrap();
    }

    fn next(&mut self) -> FromRelay {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    fn exit_code(&mut self) -> Option<i32> {
        self.child.wait().unwrap().code()
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

/// A helper asking through `dir`'s channel, on a thread (it blocks until answered).
fn ask(dir: &Path, tool: &'static str) -> std::thread::JoinHandle<i32> {
    let program = dir.join(wire::DELEGATE_LINK);
    std::thread::spawn(move || wire::ask_sdk(&program, tool, &br#"{"cmd":"ls"}"#[..]))
}

#[test]
fn a_relay_lays_out_the_run_and_passes_each_request_and_verdict() {
    let (mut relay, dir) = Relay::start(json!({ "amp.mode": "smart" }), true);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(
        (
            mode(&dir.join(wire::SETTINGS_FILE)),
            mode(&dir.join(wire::CHANNEL_FILE))
        ),
        (0o600, 0o600)
    );
    let settings: Value =
        serde_json::from_slice(&std::fs::read(dir.join(wire::SETTINGS_FILE)).unwrap()).unwrap();
    assert_eq!(settings["amp.mode"], "smart");
    let delegate = dir.join(wire::DELEGATE_LINK);
    assert_eq!(
        settings["amp.permissions"],
        json!([{ "tool": "*", "action": "delegate", "to": delegate.to_string_lossy() }])
    );
    assert_eq!(
        std::fs::canonicalize(&delegate).unwrap(),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_amp-permission-delegate")).unwrap()
    );

    for verdict in [wire::EXIT_ALLOW, wire::EXIT_REJECT] {
        let helper = ask(&dir, "Bash");
        let FromRelay::Request { conn, request } = relay.next() else {
            panic!("not a request")
        };
        assert_eq!(
            (&request["secret"], &request["tool"], &request["input"]),
            (&json!("s3cret"), &json!("Bash"), &json!({ "cmd": "ls" }))
        );
        relay.send(&ToRelay::Reply {
            conn,
            exit: verdict,
        });
        assert_eq!(helper.join().unwrap(), verdict);
    }

    let waiting = ask(&dir, "Edit");
    assert!(matches!(relay.next(), FromRelay::Request { .. }));
    relay.stdin.take();
    assert_eq!(
        relay.exit_code(),
        Some(0),
        "a relay whose stdin ended exits"
    );
    assert_eq!(
        waiting.join().unwrap(),
        wire::EXIT_REJECT,
        "a helper still waiting rejects"
    );
    assert!(!dir.exists(), "the run's directory is removed");
}

#[test]
fn a_relay_stopped_with_sigterm_removes_the_run_directory() {
    let (mut relay, dir) = Relay::start(Value::Null, true);
    let waiting = ask(&dir, "Bash");
    assert!(matches!(relay.next(), FromRelay::Request { .. }));
    // SAFETY: kill has no memory preconditions; the pid is this test's own child.
    unsafe { libc::kill(relay.child.id() as i32, libc::SIGTERM) };
    relay.exit_code();
    assert_eq!(waiting.join().unwrap(), wire::EXIT_REJECT);
    assert!(!dir.exists(), "the run's directory is removed");
}

#[test]
fn without_delegation_a_relay_writes_only_the_settings() {
    let (mut relay, dir) = Relay::start(json!({ "amp.dangerouslyAllowAll": true }), false);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [wire::SETTINGS_FILE]);
    let settings: Value =
        serde_json::from_slice(&std::fs::read(dir.join(wire::SETTINGS_FILE)).unwrap()).unwrap();
    assert_eq!(settings, json!({ "amp.dangerouslyAllowAll": true }));
    relay.stdin.take();
    assert_eq!(relay.exit_code(), Some(0));
    assert!(!dir.exists());
}

#[test]
fn a_bad_start_line_is_reported_and_leaves_nothing() {
    for start in [
        &b"not json\n"[..],
        br#"{"type":"start","settings":[1],"delegate":true,"secret":"s"}"#,
    ] {
        let mut relay = Relay::spawn();
        let stdin = relay.stdin.as_mut().unwrap();
        stdin.write_all(start).unwrap();
        stdin.write_all(b"\n").unwrap();
        let FromRelay::Failed { reason } = relay.next() else {
            panic!("not a failure")
        };
        assert!(!reason.is_empty());
        assert_eq!(relay.exit_code(), Some(1));
    }
}
