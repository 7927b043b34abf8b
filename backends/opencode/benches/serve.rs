//! `opencode serve` start-up and sharing, on the real pinned opencode against the bench's model
//! server (`cargo bench -p agent_api_opencode --bench serve`): the first run of a backend (which
//! starts the server) against later runs (which reuse it), and 20 concurrent runs on one shared
//! server against 20 runs with a server each. Prints wall times; BENCHMARKS.md keeps the figures.

use std::time::{Duration, Instant};

use agent_api::{AgentBackend, RunRequest};
use agent_api_opencode::{OpenCodeBackend, OpenCodeConfig};
use agent_bench::{e2e_enabled_or_explain, Cli, ModelServer, Sandbox};
use futures::StreamExt;

fn backend(sandbox: &Sandbox) -> OpenCodeBackend {
    // 20 servers starting at once on 2 cores take far longer than one.
    let mut config =
        OpenCodeConfig::with_binary(&sandbox.program).startup_timeout(Duration::from_secs(300));
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    config.working_dir = Some(sandbox.cwd.clone());
    OpenCodeBackend::new(config)
}

async fn one_run(backend: &OpenCodeBackend, prompt: &str) -> Duration {
    let started = Instant::now();
    let handle = backend
        .run(RunRequest::new(prompt).with_timeout(Duration::from_secs(300)))
        .await
        .expect("run starts");
    let (mut events, completion) = handle.into_universal();
    while events.next().await.is_some() {}
    completion.await.expect("run completes");
    started.elapsed()
}

async fn concurrent(backends: &[OpenCodeBackend], runs: usize) -> Duration {
    let started = Instant::now();
    let all = (0..runs).map(|i| one_run(&backends[i % backends.len()], "say hi"));
    futures::future::join_all(all).await;
    started.elapsed()
}

#[tokio::main]
async fn main() {
    // `cargo test --all-targets` runs bench binaries too; this one takes minutes and is no test.
    if !std::env::args().any(|a| a == "--bench") {
        println!("serve benchmark: run it with `cargo bench -p agent_api_opencode --bench serve`");
        return;
    }
    if e2e_enabled_or_explain(Cli::OpenCode).is_none() {
        return;
    }
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::OpenCode, &server, "text").unwrap();

    let shared = backend(&sandbox);
    let first = one_run(&shared, "say hi").await;
    let mut later = Vec::new();
    for _ in 0..5 {
        later.push(one_run(&shared, "say hi").await);
    }
    drop(shared);
    println!(
        "first run (starts its server): {:.2} s",
        first.as_secs_f64()
    );
    println!(
        "later runs (server running): {}",
        later
            .iter()
            .map(|d| format!("{:.2} s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let one_server = concurrent(&[backend(&sandbox)], 20).await;
    println!(
        "20 concurrent runs, one shared server: {:.2} s",
        one_server.as_secs_f64()
    );
    let many: Vec<OpenCodeBackend> = (0..20).map(|_| backend(&sandbox)).collect();
    let twenty_servers = concurrent(&many, 20).await;
    println!(
        "20 concurrent runs, 20 servers: {:.2} s",
        twenty_servers.as_secs_f64()
    );
}
