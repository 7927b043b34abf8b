//! Each backend's own converter at full speed: a 100,000-line log built from one of its
//! recordings, replayed in memory through the backend's protocol, the transcript, the byte budget
//! and the wrapper view, against a bare parse of the same lines into `serde_json::Value`.
//!
//! `cargo bench -p agent_api_conformance --bench throughput`. No child process and one thread
//! (a current-thread runtime), so the CPU time is the converter's and the library's own. Prints,
//! per backend, `throughput <backend>: <n> lines/s, <x>x bare parse` (the median of 5 rounds).

use std::time::Duration;

use agent_api::kit::replay::{replay, Replay, ReplayOptions};
use agent_api_conformance::logs::build_log;
use futures::StreamExt;

const LINES: usize = 100_000;
const ROUNDS: usize = 5;

/// One backend's log: which recording, how many head lines to keep once, which id prefixes to
/// make unique per repetition.
struct Subject {
    name: &'static str,
    backend: Box<dyn Replay>,
    recording: &'static str,
    head: usize,
    ids: &'static [&'static str],
}

fn subjects() -> Vec<Subject> {
    use agent_api_acp::AcpConfig;
    use agent_api_gemini::GeminiBackend;
    vec![
        Subject {
            name: "claude code (stream-json)",
            backend: Box::new(agent_api_claude_code::ClaudeCodeBackend::default()),
            recording: "claude_code/print/bash_partial.stdout.jsonl",
            head: 1,
            ids: &["msg_mock_", "toolu_mock_"],
        },
        Subject {
            name: "codex (exec --json)",
            backend: Box::new(agent_api_codex::CodexBackend::new(Default::default())),
            recording: "codex/exec/shell_bypass.stdout.jsonl",
            head: 2,
            ids: &["item_"],
        },
        Subject {
            name: "opencode (run --format json)",
            backend: Box::new(agent_api_opencode::OpenCodeBackend::new(Default::default())),
            recording: "opencode/run/shell.stdout.jsonl",
            head: 1,
            ids: &["prt_", "msg_", "call_"],
        },
        Subject {
            name: "gemini (stream-json)",
            backend: Box::new(GeminiBackend::new(AcpConfig::default())),
            recording: "gemini/headless/bash_default.stdout.jsonl",
            head: 2,
            ids: &["run_shell_command__"],
        },
        Subject {
            name: "gemini (acp session)",
            backend: Box::new(GeminiBackend::new(AcpConfig::default())),
            recording: "gemini/acp/bash_allow.session.jsonl",
            head: 4,
            ids: &["run_shell_command__"],
        },
        Subject {
            name: "amp (stream-json)",
            backend: Box::new(agent_api_amp::AmpBackend::new(Default::default())),
            recording: "amp/shell.stdout.jsonl",
            head: 1,
            ids: &["msg_", "toolu_"],
        },
    ]
}

/// CPU time of this process so far (user + system); one thread does all the work here.
fn cpu_now() -> Duration {
    // SAFETY: rusage is plain data filled by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn timed(f: impl FnOnce() -> usize) -> (Duration, usize) {
    let start = cpu_now();
    let count = f();
    (cpu_now() - start, count)
}

fn bare(log: &[u8]) -> usize {
    log.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .count()
}

fn library(runtime: &tokio::runtime::Runtime, backend: &dyn Replay, log: &[u8]) -> usize {
    runtime.block_on(async {
        let reader = std::io::Cursor::new(log.to_vec());
        let handle = replay(backend, reader, ReplayOptions::default().exit_code(Some(0)))
            .await
            .expect("the log replays");
        let (events, completion) = handle.into_wrapper();
        let count = events.count().await;
        let _ = completion.await;
        count
    })
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("throughput benchmark: run it with `cargo bench -p agent_api_conformance --bench throughput`");
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let fixtures = agent_bench::fixtures_dir();
    for subject in subjects() {
        let log = build_log(
            &fixtures.join(subject.recording),
            subject.head,
            subject.ids,
            LINES,
        );
        let mut bare_runs = Vec::new();
        let mut library_runs = Vec::new();
        let mut events = 0;
        for _ in 0..ROUNDS {
            bare_runs.push(timed(|| bare(&log)).0);
            let (cpu, count) = timed(|| library(&runtime, subject.backend.as_ref(), &log));
            library_runs.push(cpu);
            events = count;
        }
        let (bare_cpu, library_cpu) = (median(bare_runs), median(library_runs));
        println!(
            "throughput {}: {:.0} lines/s, {:.1} MB/s, {:.2}x bare parse  [{LINES} lines, {:.1} MB, {events} wrapper events; cpu {:.0} ms, bare {:.0} ms]",
            subject.name,
            LINES as f64 / library_cpu.as_secs_f64(),
            log.len() as f64 / 1e6 / library_cpu.as_secs_f64(),
            library_cpu.as_secs_f64() / bare_cpu.as_secs_f64(),
            log.len() as f64 / 1e6,
            library_cpu.as_secs_f64() * 1e3,
            bare_cpu.as_secs_f64() * 1e3,
        );
    }
}
