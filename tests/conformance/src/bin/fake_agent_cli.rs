//! A misbehaving agent CLI for fault tests: it prints what its first argument asks for.
//!
//! Modes: `crash` (some lines, then exit 3 mid-stream), `hang` (a line, then sleeps forever),
//! `hang-with-child` (starts a grandchild that sleeps, then hangs), `big-line MIB` (one line of
//! MIB mebibytes between two good lines), `invalid-utf8`, `flood GIB BIG_MIB` (GIB gibibytes of
//! lines, one of them BIG_MIB long), `echo-stdin` (echoes each stdin line back in a JSON
//! envelope), `ignore-term` (ignores SIGTERM and hangs), `numbered N PROGRESS` (N numbered lines of
//! about 1 KiB, each written through, the bytes written so far kept in the file PROGRESS),
//! `close-stdout` (reports its pid, closes stdout and lives on), `ignore-stdin N` (N lines, then
//! hangs without ever reading stdin)),
//! `setsid-child` (starts a grandchild in a new session, as Claude Code does for its tool shells, then
//! hangs), `setsid-orphan` (the same grandchild, then exits at once, leaving it behind),
//! `stderr-flood MIB` (MIB mebibytes on stderr while stdout stays idle, then one line
//! and exit 4),
//! `close-stdin N` (closes its stdin, then N lines slowly while the SDK may still write),
//! `text N` (N lines, then a clean exit), `timed N BURST PAUSE_US` (N lines stamped with the time
//! they were written, in bursts of BURST lines PAUSE_US microseconds apart), `pipe-holder` (starts a grandchild that inherits stdout
//! and stderr, reports its pid, then exits at once while the grandchild holds the pipes open), `echo-secrets` (prints its environment and argv to
//! stderr and inside stdout lines, then fails). The last four first report their own pid, the
//! process group's id, as a `pid` line.

use std::io::{BufRead, Write};

fn good(out: &mut impl Write, text: &str) {
    writeln!(
        out,
        "{{\"type\":\"text\",\"text\":{}}}",
        serde_json::to_string(text).unwrap()
    )
    .unwrap();
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // A backend builds its own argv; the mode then comes from the environment it passes on.
    if let Ok(mode) = std::env::var("FAKE_AGENT_MODE") {
        args.insert(0, mode);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let number = |i: usize, default| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    match args.first().map(String::as_str) {
        Some("crash") => {
            good(&mut out, "before the crash");
            out.flush().unwrap();
            eprintln!("fatal: secret-token-123 went wrong");
            std::process::exit(3);
        }
        Some("hang") => {
            good(&mut out, "about to hang");
            out.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
        Some("hang-with-child") => hang_with_child(&mut out),
        Some(mode @ ("setsid-child" | "setsid-orphan")) => {
            setsid_child(&mut out, mode == "setsid-child")
        }
        Some("ignore-term") => {
            // SAFETY: setting a signal disposition is process-global and done before any thread.
            unsafe {
                libc_ignore_sigterm();
            }
            good(&mut out, "ignoring SIGTERM");
            out.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
        Some("big-line") => big_line(&mut out, number(1, 20)),
        Some("invalid-utf8") => {
            good(&mut out, "before");
            out.write_all(b"{\"type\":\"text\",\"text\":\"bad \xff\xfe bytes\"}\n")
                .unwrap();
            out.write_all(b"\xc3\x28 not json either\n").unwrap();
            good(&mut out, "after");
        }
        Some("flood") => flood(&mut out, number(1, 1) as u64, number(2, 256)),
        Some("echo-stdin") => echo_stdin(&mut out),
        Some("numbered") => numbered(number(1, 1000), args.get(2).expect("a progress file")),
        Some("close-stdout") => {
            drop(out);
            close_stdout_and_live_on();
        }
        Some("ignore-stdin") => {
            for i in 0..number(1, 100) {
                good(&mut out, &format!("line {i}"));
            }
            out.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
        Some("stderr-flood") => {
            report_own_pid(&mut out);
            stderr_flood(args.get(1).and_then(|s| s.parse().ok()).unwrap_or(64));
            good(&mut out, "after the flood");
            out.flush().unwrap();
            // A failure, so that the run reports the (bounded) stderr it kept.
            std::process::exit(4);
        }
        Some("close-stdin") => {
            report_own_pid(&mut out);
            close_stdin_and_talk(
                &mut out,
                args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20),
            );
        }
        Some("text") => {
            report_own_pid(&mut out);
            for i in 0..args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3) {
                good(&mut out, &format!("line {i} "));
            }
        }
        Some("pipe-holder") => {
            // Left running on purpose: it holds the pipes after this process exits.
            #[allow(clippy::zombie_processes)]
            let child = std::process::Command::new("sleep")
                .arg("3600")
                .spawn()
                .unwrap();
            writeln!(out, "{{\"type\":\"pid\",\"pid\":{}}}", child.id()).unwrap();
            good(&mut out, "done");
        }
        Some("echo-secrets") => echo_secrets(&mut out),
        Some("timed") => timed(
            args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000),
            args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1),
            args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100),
        ),
        _ => {
            eprintln!(
                "usage: fake_agent_cli crash|hang|hang-with-child|setsid-child|setsid-orphan|ignore-term|big-line MIB|invalid-utf8|flood GIB BIG_MIB|echo-stdin"
            );
            std::process::exit(2);
        }
    }
    out.flush().unwrap();
}

/// Starts a grandchild that sleeps, reports its pid, then hangs as long as it lives: only
/// killing the whole group ends both.
fn hang_with_child(out: &mut impl Write) {
    let mut child = std::process::Command::new("sleep")
        .arg("3600")
        .spawn()
        .unwrap();
    writeln!(out, "{{\"type\":\"pid\",\"pid\":{}}}", child.id()).unwrap();
    out.flush().unwrap();
    let _ = child.wait();
}

/// Starts a grandchild in a new session (as Claude Code does for its tool shells) and reports
/// its pid; then waits for it (`wait`) or exits soon, leaving it behind.
fn setsid_child(out: &mut impl Write, wait: bool) {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new("sleep");
    command
        .arg("3600")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: setsid(2) is async-signal-safe; it leaves the agent's group and session.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    // Never waited for in `setsid-orphan`: leaving it behind is the point of that mode.
    #[allow(clippy::zombie_processes)]
    let mut child = command.spawn().unwrap();
    writeln!(out, "{{\"type\":\"pid\",\"pid\":{}}}", child.id()).unwrap();
    out.flush().unwrap();
    if wait {
        let _ = child.wait();
    } else {
        // Long enough for a test to see the grandchild in its own session before the run ends.
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// One line of `mib` mebibytes between two good lines.
fn big_line(out: &mut impl Write, mib: usize) {
    good(out, "before");
    let chunk = "x".repeat(1024 * 1024);
    write!(out, "{{\"type\":\"text\",\"text\":\"").unwrap();
    for _ in 0..mib {
        out.write_all(chunk.as_bytes()).unwrap();
    }
    writeln!(out, "\"}}").unwrap();
    good(out, "after");
}

/// `gib` gibibytes of 4 KB lines, one of them `big_mib` mebibytes long halfway through.
fn flood(out: &mut impl Write, gib: u64, big_mib: usize) {
    let line = format!("{{\"type\":\"text\",\"text\":\"{}\"}}\n", "y".repeat(4000));
    let total = gib * 1024 * 1024 * 1024;
    let mut written: u64 = 0;
    let mut big_done = false;
    while written < total {
        if !big_done && written >= total / 2 {
            big_done = true;
            let chunk = "z".repeat(1024 * 1024);
            write!(out, "{{\"type\":\"text\",\"text\":\"").unwrap();
            for _ in 0..big_mib {
                out.write_all(chunk.as_bytes()).unwrap();
            }
            writeln!(out, "\"}}").unwrap();
            written += (big_mib * 1024 * 1024) as u64;
        }
        out.write_all(line.as_bytes()).unwrap();
        written += line.len() as u64;
    }
    good(out, "flood done");
}

/// Echoes each stdin line back in a JSON envelope, flushed at once.
fn echo_stdin(out: &mut impl Write) {
    out.flush().unwrap();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        writeln!(
            out,
            "{{\"type\":\"echo\",\"line\":{}}}",
            serde_json::to_string(&line).unwrap()
        )
        .unwrap();
        out.flush().unwrap();
    }
}

/// Writes `n` lines in bursts of `burst`, `pause_us` microseconds apart, each carrying the wall-clock
/// nanoseconds at which it was written (for the latency benchmark).
fn timed(n: usize, burst: usize, pause_us: u64) {
    let mut stdout = std::io::stdout().lock();
    for i in 0..n {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        stdout
            .write_all(format!("{{\"type\":\"text\",\"text\":\"{now} \"}}\n").as_bytes())
            .unwrap();
        stdout.flush().unwrap();
        if (i + 1) % burst.max(1) == 0 {
            std::thread::sleep(std::time::Duration::from_micros(pause_us));
        }
    }
}

/// Reports this process's pid: the agent's process group has the same id.
fn report_own_pid(out: &mut impl Write) {
    writeln!(out, "{{\"type\":\"pid\",\"pid\":{}}}", std::process::id()).unwrap();
    out.flush().unwrap();
}

/// Writes `mib` mebibytes of stderr lines; a reader that waits on stdout alone would deadlock here.
fn stderr_flood(mib: usize) {
    let mut err = std::io::stderr().lock();
    let line = format!("{}\n", "e".repeat(1023));
    for _ in 0..mib * 1024 {
        err.write_all(line.as_bytes()).unwrap();
    }
    err.flush().unwrap();
}

/// Closes stdin, then writes `n` lines slowly, so the SDK's replies meet a closed pipe.
fn close_stdin_and_talk(out: &mut impl Write, n: usize) {
    // SAFETY: closing our own stdin; nothing reads it afterwards.
    unsafe {
        libc::close(0);
    }
    for i in 0..n {
        good(out, &format!("{i} "));
        out.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Echoes the environment and argv to stderr and inside stdout lines (unparseable and JSON),
/// as a CLI that dumps its configuration on failure would; then exits 1.
fn echo_secrets(out: &mut impl Write) -> ! {
    let dump: Vec<String> = std::env::vars()
        .map(|(k, v)| format!("{k}={v}"))
        .chain(std::env::args().map(|a| format!("argv {a}")))
        .collect();
    for entry in &dump {
        eprintln!("config: {entry}");
        writeln!(out, "not json: {entry}").unwrap();
        writeln!(
            out,
            "{{\"type\":\"config\",\"entry\":{}}}",
            serde_json::to_string(entry).unwrap()
        )
        .unwrap();
    }
    out.flush().unwrap();
    std::process::exit(1)
}

/// Reports its pid, closes stdout and lives on: only a grace period and a kill end it.
fn close_stdout_and_live_on() -> ! {
    println!("{{\"type\":\"pid\",\"pid\":{}}}", std::process::id());
    // SAFETY: closing our own stdout; nothing writes to it afterwards.
    unsafe {
        libc::close(1);
    }
    std::thread::sleep(std::time::Duration::from_secs(3600));
    std::process::exit(0)
}

/// Writes `n` numbered lines straight to the pipe, recording the bytes written after each one.
fn numbered(n: usize, progress: &str) {
    let mut stdout = std::io::stdout().lock();
    let padding = "p".repeat(1000);
    let mut written = 0usize;
    for i in 0..n {
        let line = format!("{{\"type\":\"text\",\"text\":\"{i:08} {padding}\"}}\n");
        stdout.write_all(line.as_bytes()).unwrap();
        stdout.flush().unwrap();
        written += line.len();
        std::fs::write(progress, written.to_string()).unwrap();
    }
}

unsafe fn libc_ignore_sigterm() {
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
}
