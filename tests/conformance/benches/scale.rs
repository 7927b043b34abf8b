//! 500 concurrent runs of the fake CLI, each streaming a session of `LINES` lines: every run
//! completes with exactly one completion, no process of any run's group is left, and the SDK's
//! memory per run is small.
//!
//! `cargo bench -p agent_api_conformance --bench scale` prints `per-run overhead: <n> KiB` (peak RSS
//! of the process driving the runs through the SDK, minus the peak of a process that spawns the same
//! children and reads their stdout with a bare tokio line reader, divided by the number of runs;
//! target ≤ 256 KiB) and the wall time. Each phase runs in its own process so the peaks are separate.

use std::time::{Duration, Instant};

use agent_api::kit::{start_run, CommandSpec, RunSettings, Transport};
use agent_api::AgentKind;
use agent_api_conformance::fake::FakeProtocol;
use futures::StreamExt;
use tokio::io::AsyncBufReadExt;

const RUNS: usize = 500;
const LINES: &str = "400";

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn spec() -> CommandSpec {
    CommandSpec::new(env!("CARGO_BIN_EXE_fake_agent_cli")).args(["text", LINES])
}

/// The children alone: spawned, their stdout read line by line and dropped.
async fn baseline() -> usize {
    let tasks: Vec<_> = (0..RUNS)
        .map(|_| {
            tokio::spawn(async {
                let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_fake_agent_cli"))
                    .args(["text", LINES])
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
                while let Ok(Some(_)) = lines.next_line().await {}
                child.wait().await.unwrap().success()
            })
        })
        .collect();
    futures::future::join_all(tasks)
        .await
        .into_iter()
        .filter(|ok| matches!(ok, Ok(true)))
        .count()
}

/// The same children through the SDK: returns the runs that completed and the process groups left.
async fn through_the_sdk() -> (usize, usize) {
    let tasks: Vec<_> = (0..RUNS)
        .map(|_| {
            tokio::spawn(async {
                let settings = RunSettings::new(AgentKind::from_static("fake"));
                let transport = Transport::spawn(&spec(), settings.line_cap).unwrap();
                let (mut events, completion) =
                    start_run(settings, transport, Box::new(FakeProtocol::default()))
                        .into_universal();
                let mut pid = None;
                while let Some(event) = events.next().await {
                    pid = pid.or_else(|| reported_pid(&event));
                }
                (
                    completion.await.is_ok(),
                    pid.expect("the fake CLI reports its pid"),
                )
            })
        })
        .collect();
    let results: Vec<(bool, i32)> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let mut left = 0;
    for (_, pid) in &results {
        if !agent_bench::process::group_gone_within(*pid, Duration::from_secs(5)).await {
            left += 1;
        }
    }
    (results.iter().filter(|(ok, _)| *ok).count(), left)
}

fn reported_pid(event: &agent_api::UniversalEvent) -> Option<i32> {
    let item = event.completed_item()?;
    item.content.iter().find_map(|part| match part {
        agent_api::universal::ContentPart::Status {
            label,
            detail: Some(detail),
        } if label == "pid" => serde_json::from_str::<serde_json::Value>(detail).ok()?["pid"]
            .as_i64()
            .map(|p| p as i32),
        _ => None,
    })
}

/// Runs one phase in a fresh process of this bench; returns its output line.
fn phase(name: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--bench", "--phase", name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "phase {name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!(
            "scale benchmark: run it with `cargo bench -p agent_api_conformance --bench scale`"
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    match args
        .iter()
        .position(|a| a == "--phase")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
    {
        Some("baseline") => {
            let ok = runtime.block_on(baseline());
            println!("{} {ok}", peak_rss_kib());
        }
        Some("sdk") => {
            let started = Instant::now();
            let (ok, left) = runtime.block_on(through_the_sdk());
            println!(
                "{} {ok} {left} {:.2}",
                peak_rss_kib(),
                started.elapsed().as_secs_f64()
            );
        }
        _ => {
            let base: Vec<u64> = phase("baseline")
                .split(' ')
                .map(|v| v.parse().unwrap())
                .collect();
            let sdk: Vec<String> = phase("sdk").split(' ').map(str::to_string).collect();
            let sdk_peak: u64 = sdk[0].parse().unwrap();
            println!("runs: {RUNS} concurrent, {LINES} lines each");
            println!(
                "baseline: peak RSS {} KiB, {} of {RUNS} children read to the end",
                base[0], base[1]
            );
            println!("sdk: peak RSS {sdk_peak} KiB, {} of {RUNS} runs completed Ok, {} process groups left", sdk[1], sdk[2]);
            println!("wall time: {} s", sdk[3]);
            println!(
                "per-run overhead: {} KiB",
                sdk_peak.saturating_sub(base[0]) / RUNS as u64
            );
        }
    }
}
