//! Latency from a child writing a line to the consumer holding its event, against a bare tokio
//! line reader (+ JSON parse) on the same child output, measured in the same run.
//!
//! `cargo bench -p agent_api_conformance --bench latency` prints p50/p99 of both, at a steady rate
//! (one line every 200 µs) and in bursts (200 lines, then 20 ms), 10,000 lines each, and
//! `latency p99 ratio: <x>x` (the worse of the two patterns; target ≤ 1.2×).
//!
//! The bare reader and the SDK run in alternation, `PAIRS` times per pattern, and each pattern's
//! ratio is the median of the pairs' p99 ratios: a p99 is set by the few slowest lines, which on a
//! shared machine are whatever else ran at that moment, so a pair measured back to back is compared
//! with itself and one unlucky run does not decide the verdict.
//!
//! `LATENCY_ONLY=sdk` (or `bare`) runs one side only and prints no ratio: for a profiler or `strace -c`
//! to see that side alone.

use std::time::{SystemTime, UNIX_EPOCH};

use agent_api::kit::{start_run, CommandSpec, RunSettings, Transport};
use agent_api::universal::UniversalEventBody;
use agent_api::AgentKind;
use agent_api_conformance::fake::FakeProtocol;
use futures::StreamExt;
use tokio::io::AsyncBufReadExt;

const LINES: &str = "10000";
/// Bare/SDK pairs per pattern (`LATENCY_PAIRS` overrides).
const PAIRS: usize = 5;

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Microseconds from the stamp in `text` (`"<ns> "`) to now.
fn since(text: &str) -> Option<f64> {
    let sent: u128 = text.trim().parse().ok()?;
    Some(now_ns().saturating_sub(sent) as f64 / 1000.0)
}

fn args(burst: &str, pause_us: &str) -> Vec<String> {
    ["timed", LINES, burst, pause_us].map(String::from).to_vec()
}

async fn bare(args: Vec<String>) -> Vec<f64> {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_fake_agent_cli"))
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut out = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        out.extend(value["text"].as_str().and_then(since));
    }
    child.wait().await.unwrap();
    out
}

async fn sdk(args: Vec<String>) -> Vec<f64> {
    let settings = RunSettings::new(AgentKind::from_static("fake"));
    let transport = Transport::spawn(
        &CommandSpec::new(env!("CARGO_BIN_EXE_fake_agent_cli")).args(&args),
        settings.line_cap,
    )
    .unwrap();
    let (mut events, completion) =
        start_run(settings, transport, Box::new(FakeProtocol::default())).into_universal();
    let mut out = Vec::new();
    while let Some(event) = events.next().await {
        if let UniversalEventBody::ItemDelta(d) = &event.body {
            out.extend(since(&d.delta));
        }
    }
    assert!(completion.await.is_ok());
    out
}

/// Runs a consumer as a task of the runtime, as an orchestrator's per-run task would be (not on
/// the thread that blocks on the runtime, which every wake-up would have to cross to).
fn consume(
    runtime: &tokio::runtime::Runtime,
    consumer: impl std::future::Future<Output = Vec<f64>> + Send + 'static,
) -> Vec<f64> {
    runtime
        .block_on(runtime.spawn(consumer))
        .expect("the consumer task finished")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(name: &str, mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&samples, 0.5), percentile(&samples, 0.99));
    println!(
        "{name}: {} lines, p50 {p50:.0} µs, p99 {p99:.0} µs",
        samples.len()
    );
    p99
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!(
            "latency benchmark: run it with `cargo bench -p agent_api_conformance --bench latency`"
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pairs = std::env::var("LATENCY_PAIRS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(PAIRS);
    let only = std::env::var("LATENCY_ONLY").ok();
    let mut worst: f64 = 0.0;
    for (pattern, burst, pause) in [("steady", "1", "200"), ("bursts", "200", "20000")] {
        let args = args(burst, pause);
        if let Some(side) = only.as_deref() {
            let samples = match side {
                "sdk" => consume(&runtime, sdk(args)),
                "bare" => consume(&runtime, bare(args)),
                other => panic!("LATENCY_ONLY is `sdk` or `bare`, not `{other}`"),
            };
            report(&format!("{pattern} {side}"), samples);
            continue;
        }
        let mut ratios: Vec<f64> = (1..=pairs)
            .map(|pair| {
                let base = report(
                    &format!("{pattern} #{pair} bare"),
                    consume(&runtime, bare(args.clone())),
                );
                let full = report(
                    &format!("{pattern} #{pair} sdk"),
                    consume(&runtime, sdk(args.clone())),
                );
                full / base
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        let median = ratios[ratios.len() / 2];
        println!("{pattern}: p99 ratio per pair {ratios:.2?}, median {median:.2}x");
        worst = worst.max(median);
    }
    if only.is_none() {
        println!("latency p99 ratio: {worst:.2}x");
    }
}
