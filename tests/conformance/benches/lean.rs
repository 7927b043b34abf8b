//! What one run costs over reading its lines: a small executable prints a 100,000-line native
//! log (built from a recorded one), once read bare (lines + `serde_json::Value`, the floor) and
//! once through the library (the backend's converter, the transcript, the byte budget, the
//! wrapper view), with the consumer keeping up or pausing 1 ms every 1,000 events, on a
//! current-thread runtime and on a multi-thread one (the consumer either on the thread that
//! blocks on the runtime or, as an orchestrator's per-run task, on a worker).
//!
//! `cargo bench -p agent_api_conformance --bench lean` (targets: peak RSS ≤ floor + 4 MiB,
//! CPU ≤ 4× floor, wall ≤ 3× floor). Each measurement runs in a fresh process of this binary, so
//! that its peak RSS and CPU time are its own. Last, the Codex log again with one 256 MiB line in
//! its middle (the library skips it at its 16 MiB line cap; the floor parses it).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_api::kit::replay::{RecordingFormat, Replay};
use agent_api::kit::{start_run, CommandSpec, RunSettings, Transport};
use agent_api_conformance::logs::build_log;
use futures::StreamExt;

const LINES: usize = 100_000;
const PRINTER: &str = env!("CARGO_BIN_EXE_print_log");

fn floor(log: &Path) -> usize {
    let mut child = Command::new(PRINTER)
        .arg(log)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let count = reader
        .split(b'\n')
        .map(|l| serde_json::from_slice::<serde_json::Value>(&l.unwrap()).unwrap())
        .filter(|v| v.is_object())
        .count();
    child.wait().unwrap();
    count
}

fn library(log: &Path, backend: &str, pause: bool, runtime: &str) -> usize {
    let as_task = runtime == "multi-task";
    let runtime = match runtime {
        "current" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap(),
    };
    let (log, backend) = (log.to_path_buf(), backend.to_string());
    let consumer = async move {
        let protocol = match backend.as_str() {
            "codex" => agent_api_codex::CodexBackend::new(Default::default())
                .replay_protocol(RecordingFormat::NativeStdout),
            _ => agent_api_claude_code::ClaudeCodeBackend::default()
                .replay_protocol(RecordingFormat::NativeStdout),
        }
        .unwrap();
        let settings = RunSettings::new(agent_api::AgentKind::from_static("lean"));
        let transport =
            Transport::spawn(&CommandSpec::new(PRINTER).arg(&log), settings.line_cap).unwrap();
        let (mut events, completion) = start_run(settings, transport, protocol).into_wrapper();
        let mut count = 0;
        while events.next().await.is_some() {
            count += 1;
            if pause && count % 1000 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let _ = completion.await;
        count
    };
    if as_task {
        // As an orchestrator's per-run task would consume it: on a worker, beside the run.
        runtime
            .block_on(runtime.spawn(consumer))
            .expect("the consumer task finished")
    } else {
        runtime.block_on(consumer)
    }
}

struct Measure {
    wall: Duration,
    cpu: Duration,
    peak_rss_kib: i64,
    anon_kib: i64,
}

/// A `/proc/self/status` figure in KiB (`VmHWM`, `RssAnon`, …).
fn status_kib(field: &str) -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"));
    line.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap()
}

/// This process's own peak RSS (`VmHWM`). Not `ru_maxrss`: Linux folds the parent's resident
/// set at fork into a child's, which would hide the difference being measured.
fn peak_rss_kib() -> i64 {
    status_kib("VmHWM:")
}

/// Runs this binary as `--lean-child ARGS…` and measures it.
// The child is reaped by `wait4` (which also reports its CPU time), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn measure(args: &[&str]) -> Measure {
    let start = Instant::now();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("--lean-child")
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut report = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut report).unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain data filled by the kernel; the pid is our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert!(
        pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the measured run failed"
    );
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    let field = |i: usize| {
        report
            .split_whitespace()
            .nth(i)
            .and_then(|n| n.parse().ok())
            .expect("the child reports its memory")
    };
    Measure {
        wall,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
        peak_rss_kib: field(1),
        anon_kib: field(2),
    }
}

fn median(mut runs: Vec<Measure>) -> Measure {
    runs.sort_by_key(|m| m.cpu);
    runs.swap_remove(runs.len() / 2)
}

fn bench(name: &str, log: &Path, backend: &str) {
    let rounds = 5;
    let log_arg = log.to_str().unwrap();
    let floor = median(
        (0..rounds)
            .map(|_| measure(&["floor", backend, log_arg, "-"]))
            .collect(),
    );
    let cases = [
        ("consumer keeps up, multi-thread runtime, consumer on the blocking thread", "library", "multi"),
        ("consumer pauses 1 ms every 1,000 events, multi-thread runtime, consumer on the blocking thread", "paused", "multi"),
        ("consumer keeps up, multi-thread runtime, consumer a task", "library", "multi-task"),
        ("consumer pauses 1 ms every 1,000 events, multi-thread runtime, consumer a task", "paused", "multi-task"),
        ("consumer keeps up, current-thread runtime", "library", "current"),
        ("consumer pauses 1 ms every 1,000 events, current-thread runtime", "paused", "current"),
    ];
    for (label, mode, runtime) in cases {
        let run = median(
            (0..rounds)
                .map(|_| measure(&[mode, backend, log_arg, runtime]))
                .collect(),
        );
        println!(
            "lean: cpu {:.2}x floor, wall {:.2}x floor, peak rss {:.1} MiB (floor {:.1} MiB), anonymous {:.1} MiB at the end (floor {:.1} MiB)  [{name}, {label}; cpu {:.0} ms, wall {:.0} ms; floor cpu {:.0} ms, wall {:.0} ms]",
            run.cpu.as_secs_f64() / floor.cpu.as_secs_f64(),
            run.wall.as_secs_f64() / floor.wall.as_secs_f64(),
            run.peak_rss_kib as f64 / 1024.0,
            floor.peak_rss_kib as f64 / 1024.0,
            run.anon_kib as f64 / 1024.0,
            floor.anon_kib as f64 / 1024.0,
            run.cpu.as_secs_f64() * 1e3,
            run.wall.as_secs_f64() * 1e3,
            floor.cpu.as_secs_f64() * 1e3,
            floor.wall.as_secs_f64() * 1e3,
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--lean-child") {
        let (mode, backend, log, runtime) = (
            &args[at + 1],
            &args[at + 2],
            PathBuf::from(&args[at + 3]),
            &args[at + 4],
        );
        let count = match mode.as_str() {
            "floor" => floor(&log),
            "library" => library(&log, backend, false, runtime),
            _ => library(&log, backend, true, runtime),
        };
        // Anonymous memory at the end, beside the peak: most of the peak's difference is the
        // library's code pages (file-backed, shared by every run of the process).
        println!("{count} {} {}", peak_rss_kib(), status_kib("RssAnon:"));
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        println!("lean benchmark: run it with `cargo bench -p agent_api_conformance --bench lean`");
        return;
    }
    let fixtures = agent_bench::fixtures_dir();
    let dir = tempfile::tempdir().unwrap();
    let codex = dir.path().join("codex.jsonl");
    std::fs::write(
        &codex,
        build_log(
            &fixtures.join("codex/exec/shell_bypass.stdout.jsonl"),
            2,
            &["item_"],
            LINES,
        ),
    )
    .unwrap();
    let claude = dir.path().join("claude.jsonl");
    let claude_log = build_log(
        &fixtures.join("claude_code/print/bash_partial.stdout.jsonl"),
        1,
        &["msg_mock_", "toolu_mock_"],
        LINES,
    );
    std::fs::write(&claude, claude_log).unwrap();
    for (name, path, backend) in [
        ("codex exec", &codex, "codex"),
        ("claude code stream-json", &claude, "claude"),
    ] {
        let bytes = std::fs::metadata(path).unwrap().len();
        println!("{name}: {LINES} lines, {:.1} MB", bytes as f64 / 1e6);
        bench(name, path, backend);
    }
    huge_line(&codex);
}

/// The Codex log with one 256 MiB agent message in its middle: the floor parses it, the library
/// skips it at its line cap, reading it through without holding more than the cap.
fn huge_line(codex: &Path) {
    let text = std::fs::read(codex).unwrap();
    let lines: Vec<&[u8]> = text
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let (before, after) = lines.split_at(lines.len() / 2);
    let path = codex.with_extension("huge.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut write = |bytes: &[u8]| std::io::Write::write_all(&mut out, bytes).unwrap();
    for line in before {
        write(line);
        write(b"\n");
    }
    write(br#"{"type":"item.completed","item":{"id":"item_huge","type":"agent_message","text":""#);
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..256 {
        write(&chunk);
    }
    write(b"\"}}\n");
    for line in after {
        write(line);
        write(b"\n");
    }
    drop(out);
    let log_arg = path.to_str().unwrap();
    let rounds = 3;
    let floor = median(
        (0..rounds)
            .map(|_| measure(&["floor", "codex", log_arg, "-"]))
            .collect(),
    );
    for (label, mode) in [
        ("consumer keeps up", "library"),
        ("consumer pauses 1 ms every 1,000 events", "paused"),
    ] {
        let run = median(
            (0..rounds)
                .map(|_| measure(&[mode, "codex", log_arg, "multi"]))
                .collect(),
        );
        println!(
            "lean, one 256 MiB line: peak rss {:.1} MiB, anonymous {:.1} MiB at the end (the floor, which holds the line and its parse: {:.1} MiB)  [codex exec, {label}, multi-thread runtime; cpu {:.0} ms, wall {:.0} ms]",
            run.peak_rss_kib as f64 / 1024.0,
            run.anon_kib as f64 / 1024.0,
            floor.peak_rss_kib as f64 / 1024.0,
            run.cpu.as_secs_f64() * 1e3,
            run.wall.as_secs_f64() * 1e3,
        );
    }
}
