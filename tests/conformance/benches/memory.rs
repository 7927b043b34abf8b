//! Peak memory while a child prints 1 GiB of native lines, one of them 256 MiB long.
//!
//! `cargo bench -p agent_api_conformance --bench memory` (target: peak RSS ≤ 64 MiB, the run completes with
//! one bounded report of the skipped line).

use std::time::Instant;

use agent_api::kit::{start_run, CommandSpec, RunSettings, Transport};
use agent_api::{AgentKind, AgentWrapperEventKind};
use agent_api_conformance::fake::FakeProtocol;
use futures::StreamExt;

/// This process's peak resident set size (VmHWM), in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "memory benchmark: run it with `cargo bench -p agent_api_conformance --bench memory`"
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let before = peak_rss_kib();
    let start = Instant::now();
    let (events, skipped, text_bytes, completion) = runtime.block_on(async {
        let spec =
            CommandSpec::new(env!("CARGO_BIN_EXE_fake_agent_cli")).args(["flood", "1", "256"]);
        let settings = RunSettings::new(AgentKind::from_static("fake"));
        let transport = Transport::spawn(&spec, settings.line_cap).unwrap();
        let handle = start_run(settings, transport, Box::new(FakeProtocol::default()));
        let (mut stream, completion) = handle.into_wrapper();
        let (mut events, mut skipped, mut text_bytes) = (0u64, Vec::new(), 0u64);
        while let Some(event) = stream.next().await {
            events += 1;
            text_bytes += event.text.as_ref().map_or(0, |t| t.len() as u64);
            if event.kind == AgentWrapperEventKind::Status
                && event
                    .message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("native_line_skipped"))
            {
                skipped.push(event.message.unwrap());
            }
        }
        (events, skipped, text_bytes, completion.await)
    });
    let peak = peak_rss_kib();
    println!(
        "child printed 1 GiB (one 256 MiB line) in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    println!(
        "wrapper events: {events}; text streamed: {:.1} MiB; completion ok: {}",
        text_bytes as f64 / 1048576.0,
        completion.is_ok()
    );
    println!(
        "skipped-line reports: {} ({:?})",
        skipped.len(),
        skipped.first()
    );
    println!(
        "peak RSS: {:.1} MiB (before the run: {:.1} MiB; target <= 64 MiB)",
        peak as f64 / 1024.0,
        before as f64 / 1024.0
    );
}
