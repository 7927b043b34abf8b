//! The generic `acp` kind leaves no agent process behind, however a run or a session ends and
//! whenever that happens: many short runs of the fake ACP agent (`fake_acp_agent`, with a child of
//! its own: the zombies of an agent's children were what was left behind), each stopped at
//! a random point (cancelled, its handle dropped, its `run` future dropped before it returned, a
//! session dropped or closed, or left to finish), while this test keeps both cores busy. After
//! each round, once every completion has resolved (a dropped run is given a bounded while),
//! no process that this test spawned is left: no child of this process (zombies included), and no
//! process carrying this process's owner mark (`AGENT_API_OWNER`).
//!
//! Its own binary, so that no other test's agents are counted. Cost: about 13 s on 2 cores (its own
//! load included).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_api::{AgentBackend, RunRequest};
use agent_api_acp::{AcpBackend, AcpConfig, AcpOptions};
use futures::StreamExt;

/// Runs per round, and rounds.
const RUNS: usize = 12;
const ROUNDS: usize = 5;

/// The fake agent behind a shell that first starts a child of its own (`sleep`), as a real agent
/// starts helpers and tool shells: what is left behind is more than the agent itself.
fn request(prompt: &str, cwd: &std::path::Path) -> RunRequest {
    let options = AcpOptions::default().command([
        "/bin/sh",
        "-c",
        "sleep 600 & exec \"$0\"",
        env!("CARGO_BIN_EXE_fake_acp_agent"),
    ]);
    RunRequest::new(prompt)
        .with_working_dir(cwd)
        .with_options(&options)
        .with_timeout(Duration::from_secs(60))
}

/// The processes this test spawned that still exist: children of this process (a zombie is one
/// until it is reaped), and processes carrying this process's owner mark.
fn left_behind() -> Vec<String> {
    let me = std::process::id() as i32;
    let owner = agent_api::kit::process::owner_token();
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let comm = stat[stat.find('(').map_or(0, |o| o + 1)..close].to_string();
        let mut rest = stat[close + 1..].split_whitespace();
        let state = rest.next().unwrap_or("?").to_string();
        let ppid: i32 = rest.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let marked = agent_bench::process::process_env(pid, agent_api::kit::process::OWNER_VAR)
            .is_some_and(|value| value == owner);
        // Threads of this process are not under /proc directly; anything else whose parent
        // is this process is a child it spawned.
        if ppid == me || marked {
            left.push(format!("{pid} {comm} state {state} ppid {ppid}"));
        }
    }
    left
}

/// How one run ends.
#[derive(Debug, Clone, Copy)]
enum Ending {
    /// `RunControl::cancel` after the delay.
    Cancel,
    /// The run's handle dropped after the delay, its completion never awaited.
    DropHandle,
    /// The `run` future dropped after the delay (it may not have returned yet).
    DropRunFuture,
    /// A warm session opened and dropped after the delay.
    DropSession,
    /// A warm session, a turn sent, then `close` after the delay.
    CloseSession,
    /// Left to finish (a short turn).
    Finish,
}

const ENDINGS: [Ending; 6] = [
    Ending::Cancel,
    Ending::DropHandle,
    Ending::DropRunFuture,
    Ending::DropSession,
    Ending::CloseSession,
    Ending::Finish,
];

/// A small pseudo-random sequence (xorshift), seeded per round so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

async fn one_run(ending: Ending, delay: Duration, dir: std::path::PathBuf) {
    let backend = AcpBackend::new(AcpConfig::default());
    match ending {
        Ending::Cancel => {
            let handle = backend.run(request("slow", &dir)).await.unwrap();
            let control = handle.control();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                control.cancel();
            });
            let (mut events, completion) = handle.into_universal();
            while events.next().await.is_some() {}
            let _ = completion.await;
        }
        Ending::DropHandle => {
            let handle = backend.run(request("slow", &dir)).await.unwrap();
            let (mut events, completion) = handle.into_universal();
            let _ =
                tokio::time::timeout(delay, async { while events.next().await.is_some() {} }).await;
            drop((events, completion));
        }
        Ending::DropRunFuture => {
            let _ = tokio::time::timeout(delay, backend.run(request("slow", &dir))).await;
        }
        Ending::DropSession => {
            let session =
                tokio::time::timeout(delay, backend.open_session(request("", &dir))).await;
            if let Ok(Ok(mut session)) = session {
                if let Ok(handle) = session.send("slow").await {
                    tokio::time::sleep(delay).await;
                    drop(handle);
                }
                drop(session);
            }
        }
        Ending::CloseSession => {
            let mut session = backend.open_session(request("", &dir)).await.unwrap();
            let handle = session.send("slow").await.unwrap();
            tokio::time::sleep(delay).await;
            drop(handle);
            let _ = session.close().await;
        }
        Ending::Finish => {
            let handle = backend.run(request("max", &dir)).await.unwrap();
            let (mut events, completion) = handle.into_universal();
            while events.next().await.is_some() {}
            let _ = completion.await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_and_sessions_stopped_at_random_points_under_load_leave_no_agent_process() {
    assert_eq!(left_behind(), Vec::<String>::new(), "nothing before");
    // The test's own load: a busy thread per core, for as long as the test runs.
    let busy = Arc::new(AtomicBool::new(true));
    let burners: Vec<_> = (0..2)
        .map(|_| {
            let busy = busy.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while busy.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        let seed = 0x9e37_79b9_7f4a_7c15_u64 ^ (round as u64 + 1);
        let mut rng = Rng(seed);
        let runs: Vec<_> = (0..RUNS)
            .map(|_| {
                let ending = ENDINGS[(rng.next() % ENDINGS.len() as u64) as usize];
                // From at once to a few of the agent's words (it says one each 100 ms).
                let delay = Duration::from_millis(rng.next() % 400);
                tokio::spawn(one_run(ending, delay, dir.path().to_path_buf()))
            })
            .collect();
        for run in runs {
            run.await.unwrap();
        }
        // Dropped runs stop in the background: give them a bounded while.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut left = left_behind();
        while !left.is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            left = left_behind();
        }
        if !left.is_empty() {
            failures.push(format!("round {round} (seed {seed:#x}): {left:?}"));
        }
    }
    busy.store(false, Ordering::Relaxed);
    for burner in burners {
        burner.join().unwrap();
    }
    assert!(
        failures.is_empty(),
        "agent processes were left behind: {failures:#?}"
    );
}
