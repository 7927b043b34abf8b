//! The launcher seam (`agent_api::kit::launch`) with real processes: the explicit environment and
//! no secret on any argv through a prefix and bwrap, and the far-side protocol through a prefix
//! that really detaches (its agent is out of reach of the local process group, the run marker and
//! the subreaper), so only the far-side stop can end it: cancel, timeout, drop and a killed
//! connection each leave no agent process.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use agent_api::kit::{start_run, CommandSpec, RunSettings, Transport};
use agent_api::request::{Bwrap, Launcher};
use agent_api::{AgentError, AgentKind, RunHandle};
use agent_api_conformance::fake::FakeProtocol;
use futures::StreamExt;
use tokio::io::AsyncReadExt;

const FAKE: &str = env!("CARGO_BIN_EXE_fake_agent_cli");

/// A prefix that detaches like a remote client: the far side runs in a new session, without the
/// run marker, as a child the local process group does not hold.
fn detaching_prefix() -> Launcher {
    Launcher::Prefix(
        [
            "env",
            "-u",
            agent_api::kit::process::RUN_MARKER_VAR,
            "setsid",
            "-w",
        ]
        .map(OsString::from)
        .to_vec(),
    )
}

/// A prefix that passes its argv on unchanged through a shell.
fn shell_prefix() -> Launcher {
    Launcher::Prefix(
        ["sh", "-c", "exec \"$@\"", "prefix"]
            .map(OsString::from)
            .to_vec(),
    )
}

/// `bwrap` (installed by `tests/run.sh`); its absence fails the test loudly.
use agent_api_conformance::launchers::bwrap_launcher as bwrap;

fn token() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "launch-test-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// The pids of the processes whose argv holds `needle`, this test excluded.
fn processes_with(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let zombie = std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        });
        if pid != me && !zombie && String::from_utf8_lossy(&cmdline).contains(needle) {
            found.push(pid);
        }
    }
    found
}

async fn none_left(needle: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if processes_with(needle).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn settings() -> RunSettings {
    let mut settings = RunSettings::new(AgentKind::from_static("fake"));
    settings.tools_structured = true;
    settings.cancel_grace = Duration::from_millis(200);
    settings.term_grace = Duration::from_millis(500);
    settings
}

/// Starts the fake CLI hanging (after one line) through `launcher`; `tag` marks its argv.
fn start_hang(launcher: Launcher, tag: &str, settings: RunSettings) -> RunHandle {
    let spec = CommandSpec::new(FAKE)
        .args(["hang", tag])
        .with_launcher(launcher);
    let transport = Transport::spawn(&spec, settings.line_cap).expect("spawns");
    start_run(settings, transport, Box::new(FakeProtocol::default()))
}

/// Waits until the agent is running on the far side (its first line came).
async fn first_event(
    events: &mut (impl futures::Stream<Item = agent_api::UniversalEvent> + Unpin),
    tag: &str,
) {
    while let Some(event) = events.next().await {
        if format!("{event:?}").contains("about to hang") {
            return;
        }
    }
    panic!("the agent {tag} never spoke");
}

#[tokio::test]
async fn a_detached_far_agent_is_stopped_on_cancel() {
    let tag = token();
    let handle = start_hang(detaching_prefix(), &tag, settings());
    let control = handle.control();
    let (mut events, completion) = handle.into_universal();
    first_event(&mut events, &tag).await;
    assert!(!processes_with(&tag).is_empty());
    control.cancel();
    while events.next().await.is_some() {}
    assert!(matches!(completion.await, Err(AgentError::Cancelled)));
    // The far stop is awaited before the completion: nothing is left at once.
    assert_eq!(
        processes_with(&tag),
        Vec::<i32>::new(),
        "an agent process outlived the cancelled run"
    );
}

#[tokio::test]
async fn a_detached_far_agent_is_stopped_on_timeout() {
    let tag = token();
    let mut settings = settings();
    settings.timeout = Some(Duration::from_millis(800));
    let handle = start_hang(detaching_prefix(), &tag, settings);
    let (mut events, completion) = handle.into_universal();
    while events.next().await.is_some() {}
    assert!(matches!(completion.await, Err(AgentError::Timeout { .. })));
    assert_eq!(
        processes_with(&tag),
        Vec::<i32>::new(),
        "an agent process outlived the timed-out run"
    );
}

#[tokio::test]
async fn a_detached_far_agent_is_stopped_when_the_run_is_dropped() {
    let tag = token();
    let handle = start_hang(detaching_prefix(), &tag, settings());
    let (mut events, completion) = handle.into_universal();
    first_event(&mut events, &tag).await;
    drop(events);
    drop(completion);
    assert!(
        none_left(&tag).await,
        "an agent process outlived the dropped run: {:?}",
        processes_with(&tag)
    );
}

#[tokio::test]
async fn a_detached_far_agent_is_stopped_when_the_connection_dies() {
    let tag = token();
    let handle = start_hang(detaching_prefix(), &tag, settings());
    let (mut events, completion) = handle.into_universal();
    first_event(&mut events, &tag).await;
    // The local client: this process's child (the far side was reparented elsewhere or is deeper).
    let me = std::process::id().to_string();
    let client = processes_with(&tag)
        .into_iter()
        .find(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1))
                == Some(me.as_str())
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.starts_with(b"setsid"))
        })
        .expect("the local client runs");
    // SAFETY: kill(2) only sends a signal, to the client this test found.
    unsafe { libc::kill(client, libc::SIGKILL) };
    while events.next().await.is_some() {}
    assert!(matches!(
        completion.await,
        Err(AgentError::ProcessExited { .. })
    ));
    assert_eq!(
        processes_with(&tag),
        Vec::<i32>::new(),
        "an agent process outlived the dead connection"
    );
}

/// Spawns `env`'s view of the agent's environment through `launcher` and returns it, checking
/// while the agent lives that the secret is on no process's argv.
async fn agent_environment(launcher: Launcher, secret: &str) -> Vec<String> {
    std::env::set_var("LAUNCH_TEST_DECLARED", secret);
    std::env::set_var("LAUNCH_TEST_UNDECLARED", "undeclared-value");
    let cwd = tempfile::tempdir().unwrap();
    // The agent prints its environment, then waits on stdin so its argv can be inspected.
    let spec = CommandSpec::new("/bin/sh")
        .args(["-c", "env; read _"])
        .reads_env(["LAUNCH_TEST_DECLARED"])
        .env("FROM_REQUEST", "request-value")
        .cwd(cwd.path())
        .with_stdin()
        .with_launcher(launcher);
    let mut child = agent_api::kit::process::spawn(&spec).expect("spawns");
    let mut stdout = child.child.stdout.take().unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(&out).contains("FROM_REQUEST=") && Instant::now() < deadline {
        let n = tokio::time::timeout(Duration::from_secs(10), stdout.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the agent's output ended early");
        out.extend_from_slice(&buf[..n]);
    }
    assert_eq!(
        processes_with(secret),
        Vec::<i32>::new(),
        "the secret is on an argv"
    );
    drop(child);
    String::from_utf8_lossy(&out)
        .lines()
        .map(str::to_string)
        .collect()
}

fn assert_explicit(env: &[String], secret: &str) {
    assert!(
        env.contains(&format!("LAUNCH_TEST_DECLARED={secret}")),
        "{env:?}"
    );
    assert!(
        env.contains(&"FROM_REQUEST=request-value".to_string()),
        "{env:?}"
    );
    assert!(
        !env.iter()
            .any(|line| line.starts_with("LAUNCH_TEST_UNDECLARED=")),
        "an undeclared variable passed: {env:?}"
    );
    assert!(
        env.iter().any(|line| line.starts_with("PATH=")),
        "the launcher's own PATH is missing: {env:?}"
    );
}

#[tokio::test]
async fn through_a_prefix_the_agent_gets_exactly_its_declared_env_and_no_secret_is_on_an_argv() {
    let secret = token();
    let env = agent_environment(shell_prefix(), &secret).await;
    assert_explicit(&env, &secret);
}

#[tokio::test]
async fn through_bwrap_the_agent_gets_exactly_its_declared_env_and_no_secret_is_on_an_argv() {
    let secret = token();
    let env = agent_environment(bwrap(), &secret).await;
    assert_explicit(&env, &secret);
}

/// Arguments a shell would mangle if any layer joined them into a string unquoted.
fn hostile_args() -> Vec<OsString> {
    use std::os::unix::ffi::OsStringExt;
    let mut args: Vec<OsString> = [
        "two words",
        "it's",
        "\"double\"",
        "$(touch /tmp/launch-test-pwned)",
        "`touch /tmp/launch-test-pwned`",
        "line\nbreak",
        "*",
        "-n",
        "",
        "$HOME ; exit 3 | &",
        "back\\slash",
    ]
    .map(OsString::from)
    .to_vec();
    args.push(OsString::from_vec(vec![
        b'n', b'o', 0xff, 0xfe, b'u', b't', b'f',
    ]));
    args
}

/// What the agent received, NUL-separated, when started with `args` through `launcher`.
async fn received_argv(launcher: Launcher, args: &[OsString]) -> Vec<OsString> {
    use std::os::unix::ffi::OsStringExt;
    let spec = CommandSpec::new("/bin/sh")
        .args(["-c", "printf '%s\\0' \"$@\"", "agent"])
        .args(args.iter().cloned())
        .with_launcher(launcher);
    let mut child = agent_api::kit::process::spawn(&spec).expect("spawns");
    let mut out = Vec::new();
    let mut stdout = child.child.stdout.take().unwrap();
    tokio::time::timeout(Duration::from_secs(10), stdout.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let _ = child.child.wait().await;
    out.split(|b| *b == 0)
        .map(|a| OsString::from_vec(a.to_vec()))
        .take(args.len())
        .collect()
}

#[tokio::test]
async fn hostile_arguments_reach_the_agent_unchanged_through_a_prefix_and_bwrap() {
    let args = hostile_args();
    for launcher in [shell_prefix(), detaching_prefix(), bwrap()] {
        assert_eq!(
            received_argv(launcher.clone(), &args).await,
            args,
            "through {launcher}"
        );
    }
    assert!(
        !std::path::Path::new("/tmp/launch-test-pwned").exists(),
        "an argument ran as a command"
    );
}

#[tokio::test]
async fn a_joined_command_line_splits_back_into_the_same_hostile_argv() {
    let args = hostile_args();
    let line = agent_api::kit::launch::shell_join(&args).unwrap();
    let mut script = OsString::from("printf '%s\\0' ");
    script.push(&line);
    let out = tokio::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(&script)
        .output()
        .await
        .unwrap();
    use std::os::unix::ffi::OsStringExt;
    let back: Vec<OsString> = out
        .stdout
        .split(|b| *b == 0)
        .map(|a| OsString::from_vec(a.to_vec()))
        .take(args.len())
        .collect();
    assert_eq!(back, args);
    assert!(
        !std::path::Path::new("/tmp/launch-test-pwned").exists(),
        "an argument ran as a command"
    );
}

#[test]
fn an_argument_with_a_nul_byte_is_a_typed_error_naming_it() {
    let args = [OsString::from("ok"), OsString::from("nul\0inside")];
    assert!(matches!(
        agent_api::kit::launch::shell_join(&args),
        Err(AgentError::UnquotableArgument { index: 1 })
    ));
}

/// What a connection from inside `launcher` to a listener on this machine's loopback gives.
async fn connects_through(launcher: Launcher) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe =
        format!("(echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused");
    let spec = CommandSpec::new("bash")
        .args(["-c", probe.as_str()])
        .with_launcher(launcher);
    let mut child = agent_api::kit::process::spawn(&spec).expect("spawns");
    let mut out = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        child.child.stdout.take().unwrap().read_to_string(&mut out),
    )
    .await
    .unwrap()
    .unwrap();
    out.trim().to_string()
}

#[tokio::test]
async fn bwrap_shares_the_network_or_not_as_the_caller_chooses() {
    bwrap();
    assert_eq!(
        connects_through(Launcher::Sandbox(Bwrap::new().with_network(true))).await,
        "connected"
    );
    assert_eq!(
        connects_through(Launcher::Sandbox(Bwrap::new().with_network(false))).await,
        "refused"
    );
}

#[tokio::test]
async fn bwrap_keeps_everything_but_the_runs_own_directories_read_only() {
    let cwd = tempfile::tempdir().unwrap();
    // Beside the working directory, on the real filesystem (not the sandbox's own /tmp).
    let outside = tempfile::tempdir_in(std::env::var("HOME").unwrap()).unwrap();
    let script = "echo in > inside.txt; echo out > \"$1/outside.txt\" 2>/dev/null; echo done";
    let spec = CommandSpec::new("sh")
        .args(["-c", script, "agent"])
        .arg(outside.path())
        .cwd(cwd.path())
        .env("HOME", cwd.path().to_str().unwrap())
        .with_launcher(bwrap());
    let mut child = agent_api::kit::process::spawn(&spec).expect("spawns");
    let mut out = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        child.child.stdout.take().unwrap().read_to_string(&mut out),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(out.trim(), "done");
    assert_eq!(
        std::fs::read_to_string(cwd.path().join("inside.txt")).unwrap(),
        "in\n"
    );
    assert!(
        !outside.path().join("outside.txt").exists(),
        "the sandbox wrote outside its directories"
    );
}

/// With the caller's real `HOME` (`--home inherit`), the home is read-only in the sandbox but
/// for the agent's declared state: a dotfile (`~/.bashrc`'s stand-in) is not written, the
/// declared state folder is.
#[tokio::test]
async fn bwrap_keeps_the_real_home_read_only_but_the_agents_own_state() {
    let cwd = tempfile::tempdir().unwrap();
    let home = std::env::var("HOME").unwrap();
    // The agent's declared state folder, and the dotfile it must not plant, both in the real home.
    let state = tempfile::tempdir_in(&home).unwrap();
    let state_name = state
        .path()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let planted = std::path::Path::new(&home).join(format!(".agent_api_planted_{state_name}"));
    let script = "echo x > \"$HOME/$1\" 2>/dev/null; echo s > \"$HOME/$2/state.txt\"; echo done";
    let spec = CommandSpec::new("sh")
        .args(["-c", script, "agent"])
        .arg(planted.file_name().unwrap())
        .arg(&state_name)
        .cwd(cwd.path())
        .env("HOME", &home)
        .home_state([state_name.as_str()])
        .with_launcher(bwrap());
    let mut child = agent_api::kit::process::spawn(&spec).expect("spawns");
    let mut out = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        child.child.stdout.take().unwrap().read_to_string(&mut out),
    )
    .await
    .unwrap()
    .unwrap();
    let planted_exists = planted.exists();
    let _ = std::fs::remove_file(&planted);
    assert_eq!(out.trim(), "done");
    assert!(
        !planted_exists,
        "the sandboxed agent wrote a dotfile in the real home"
    );
    assert_eq!(
        std::fs::read_to_string(state.path().join("state.txt")).unwrap(),
        "s\n",
        "its declared state stays writable"
    );
}

/// A first run in the caller's real home: the agent's declared state folder does not exist yet.
/// It is made (private) and bound writable, so the agent can make what it keeps there (Claude
/// Code's `mkdir ~/.claude/…` failed with EROFS before); the rest of the home stays read-only.
#[tokio::test]
async fn bwrap_makes_a_missing_declared_state_folder_in_the_real_home_writable() {
    use std::os::unix::fs::PermissionsExt;
    let cwd = tempfile::tempdir().unwrap();
    let home = std::env::var("HOME").unwrap();
    // A name no other run has, free again: the folder is removed before the run.
    let taken = tempfile::Builder::new()
        .prefix(".agent_api_state_")
        .tempdir_in(&home)
        .unwrap();
    let state = taken.path().to_path_buf();
    let state_name = state.file_name().unwrap().to_str().unwrap().to_string();
    taken.close().unwrap();
    assert!(
        !state.exists(),
        "the state folder must not exist before the run"
    );
    let script =
        "mkdir -p \"$HOME/$1/projects/p\" && echo s > \"$HOME/$1/projects/p/log\" && echo done";
    let spec = CommandSpec::new("sh")
        .args(["-c", script, "agent"])
        .arg(&state_name)
        .cwd(cwd.path())
        .env("HOME", &home)
        .home_state([state_name.as_str()])
        .with_launcher(bwrap());
    let mut child = agent_api::kit::process::spawn(&spec).expect("spawns");
    let mut out = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        child.child.stdout.take().unwrap().read_to_string(&mut out),
    )
    .await
    .unwrap()
    .unwrap();
    let written = std::fs::read_to_string(state.join("projects/p/log"));
    let mode = std::fs::metadata(&state).map(|m| m.permissions().mode() & 0o777);
    let _ = std::fs::remove_dir_all(&state);
    assert_eq!(out.trim(), "done", "the agent could not make its state");
    assert_eq!(written.unwrap(), "s\n");
    assert_eq!(
        mode.unwrap(),
        0o700,
        "the state folder made for the agent is private"
    );
}

/// A program under `/tmp` (a checkout there), which the sandbox's fresh `/tmp` would hide, is
/// bound in and runs.
#[tokio::test]
async fn bwrap_runs_a_program_that_lives_under_tmp() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let program = dir.path().join("agent.sh");
    std::fs::write(&program, "#!/bin/sh\necho from-tmp\n").unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let spec = CommandSpec::new(&program)
        .cwd(cwd.path())
        .env("HOME", cwd.path().to_str().unwrap())
        .with_launcher(bwrap());
    let mut child = agent_api::kit::process::spawn(&spec).expect("spawns");
    let mut out = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        child.child.stdout.take().unwrap().read_to_string(&mut out),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(out.trim(), "from-tmp");
}

#[tokio::test]
async fn the_gateways_launcher_applies_unless_the_request_sets_one_and_is_checked_before_spawn() {
    use agent_api::{Gateway, RunRequest};
    let mut gateway = Gateway::new().with_launcher(Launcher::Sandbox(Bwrap::new()));
    gateway
        .register(std::sync::Arc::new(
            agent_api_scripted::ScriptedBackend::new(),
        ))
        .unwrap();
    let kind = AgentKind::from_static("scripted");
    // The in-process scripted agent spawns nothing, so it cannot run in a sandbox: typed, before anything runs.
    match gateway.run(&kind, RunRequest::new("hi")).await {
        Err(AgentError::UnsupportedCapability { capability, .. }) => {
            assert_eq!(capability, agent_api::capabilities::LAUNCHER_BWRAP)
        }
        other => panic!("expected UnsupportedCapability, got {:?}", other.err()),
    }
    let local = gateway
        .run(&kind, RunRequest::new("hi").with_launcher(Launcher::Local))
        .await
        .unwrap();
    assert!(local.collect_universal().await.1.is_ok());
    // A backend that can use bwrap, asked for one that is not installed.
    let claude = agent_api_claude_code::ClaudeCodeBackend::new(
        agent_api_claude_code::ClaudeCodeConfig::default(),
    );
    let missing = Launcher::Sandbox(Bwrap::new().with_program("/nonexistent/bwrap"));
    use agent_api::AgentBackend;
    match claude.validate(&RunRequest::new("hi").with_launcher(missing)) {
        Err(AgentError::LauncherUnavailable { program, .. }) => {
            assert_eq!(program, std::path::Path::new("/nonexistent/bwrap"))
        }
        other => panic!("expected LauncherUnavailable, got {other:?}"),
    }
}
