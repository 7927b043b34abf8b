//! The full pipeline (native line → protocol → transcript → projection → bounded wrapper events)
//! against a bare line read + `serde_json::Value` parse of the same 100k-event native log.
//!
//! `cargo bench -p agent_api_conformance --bench pipeline` (target: ratio ≤ 1.5×).

use std::io::BufRead;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_api::kit::replay::{replay, ReplayOptions};
use agent_api_scripted::wire::AgentLine;
use agent_api_scripted::ScriptedBackend;
use futures::StreamExt;

/// A scripted-agent log of `events` lines: turns of streamed text, reasoning and tool calls.
fn native_log(events: usize) -> Vec<u8> {
    let mut lines = vec![AgentLine::Session {
        id: "bench".into(),
        model: "m".into(),
    }];
    let mut turn = 0;
    while lines.len() < events - 1 {
        turn += 1;
        let msg = format!("msg_{turn}");
        for i in 0..16 {
            lines.push(AgentLine::TextDelta {
                message_id: msg.clone(),
                text: format!("word{i} of a streamed answer, "),
            });
        }
        lines.push(AgentLine::MessageDone {
            message_id: msg.clone(),
            text: "the whole answer".into(),
        });
        let call = format!("call_{turn}");
        lines.push(AgentLine::ToolCall {
            call_id: call.clone(),
            name: "shell".into(),
            message_id: msg,
            input: serde_json::json!({"command": "ls -la"}),
        });
        lines.push(AgentLine::ToolResult {
            call_id: call,
            exit_code: 0,
            stdout: "total 0\n".into(),
            denied: false,
        });
    }
    lines.truncate(events - 1);
    lines.push(AgentLine::Done {
        status: "success".into(),
        input_tokens: 1,
        output_tokens: 1,
    });
    let mut out = Vec::new();
    for line in lines {
        serde_json::to_writer(&mut out, &line).unwrap();
        out.push(b'\n');
    }
    out
}

/// The log is shared, not copied: a copy of 8 MiB per round would be the bench's cost, not the
/// pipeline's (the bare parse reads it in place).
async fn full_pipeline(log: Arc<[u8]>) -> usize {
    let backend = ScriptedBackend::new();
    let handle = replay(
        &backend,
        std::io::Cursor::new(log),
        ReplayOptions::default(),
    )
    .await
    .unwrap();
    let (events, completion) = handle.into_wrapper();
    let count = events.count().await;
    completion.await.unwrap();
    count
}

fn bare_parse(log: &[u8]) -> usize {
    std::io::Cursor::new(log)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap())
        .filter(|v| v.is_object())
        .count()
}

/// CPU time of this process so far (every thread): on a shared machine the wall clock of a
/// two-thread pipeline depends on what else runs, its CPU time much less.
fn cpu_time() -> Duration {
    // SAFETY: rusage is plain data filled by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("pipeline benchmark: run it with `cargo bench -p agent_api_conformance --bench pipeline`");
        return;
    }
    let log: Arc<[u8]> = native_log(100_000).into();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // Fewer rounds for instruction counts under callgrind, where one round is deterministic.
    let rounds = std::env::var("PIPELINE_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7);
    let mut full = Vec::new();
    let mut bare = Vec::new();
    let (mut full_cpu, mut bare_cpu) = (Vec::new(), Vec::new());
    let mut wrapper_events = 0;
    for _ in 0..rounds {
        let (start, cpu) = (Instant::now(), cpu_time());
        assert_eq!(bare_parse(&log), 100_000);
        bare.push(start.elapsed());
        bare_cpu.push(cpu_time() - cpu);
        let (start, cpu) = (Instant::now(), cpu_time());
        wrapper_events = runtime.block_on(full_pipeline(log.clone()));
        full.push(start.elapsed());
        full_cpu.push(cpu_time() - cpu);
    }
    let (full, bare) = (median(full), median(bare));
    let (full_cpu, bare_cpu) = (median(full_cpu), median(bare_cpu));
    println!(
        "native log: 100000 lines, {} bytes; wrapper events out: {wrapper_events}",
        log.len()
    );
    println!(
        "bare line read + serde_json::Value parse: {:>8.1} ms (median of {rounds})",
        bare.as_secs_f64() * 1e3
    );
    println!(
        "full pipeline:                            {:>8.1} ms (median of {rounds})",
        full.as_secs_f64() * 1e3
    );
    println!(
        "ratio full / bare: {:.2}x (target <= 1.5x)",
        full.as_secs_f64() / bare.as_secs_f64()
    );
    println!(
        "cpu: bare {:.1} ms, full pipeline {:.1} ms (all threads); cpu ratio full / bare: {:.2}x",
        bare_cpu.as_secs_f64() * 1e3,
        full_cpu.as_secs_f64() * 1e3,
        full_cpu.as_secs_f64() / bare_cpu.as_secs_f64()
    );
}
