//! 50 concurrent runs of the fake CLI spread over the 5 containers of `tests/launchers/setup.sh`
//! (`docker exec`), against the same 50 runs as local children: every run completes, and no process of
//! any run is left in a container afterwards.
//!
//! `cargo bench -p agent_api_conformance --bench containers` prints
//! `container runs: 50/50 ok, wall <s>, overhead vs local <x>x` (the containers' wall time over the local
//! one). Needs the setup script; without it, it fails saying so.

use std::path::{Path, PathBuf};
use std::time::Instant;

use agent_api::kit::{start_run, CommandSpec, RunSettings, Transport};
use agent_api::request::{Container, Engine, Launcher};
use agent_api::AgentKind;
use agent_api_conformance::fake::FakeProtocol;
use agent_api_conformance::launchers::{tag, Infra};
use futures::StreamExt;

const RUNS: usize = 50;
const LINES: &str = "2000";

/// 50 runs at once of `program` through `launcher_of(i)`; returns why each run that did not
/// complete failed (empty when all did) and the wall time.
async fn batch(
    program: &Path,
    tag_entry: &(String, String),
    launcher_of: impl Fn(usize) -> Launcher,
) -> (Vec<String>, f64) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..RUNS)
        .map(|i| {
            let spec = CommandSpec::new(program)
                .args(["text", LINES])
                .env(&tag_entry.0, &tag_entry.1)
                .with_launcher(launcher_of(i));
            tokio::spawn(async move {
                let settings = RunSettings::new(AgentKind::from_static("fake"));
                let transport = Transport::spawn(&spec, settings.line_cap).expect("spawns");
                let (mut events, completion) =
                    start_run(settings, transport, Box::new(FakeProtocol::default()))
                        .into_universal();
                let mut deltas = 0;
                while let Some(event) = events.next().await {
                    deltas += usize::from(matches!(
                        event.body,
                        agent_api::universal::UniversalEventBody::ItemDelta(_)
                    ));
                }
                match completion.await {
                    Err(error) => Err(format!("run {i}: {error} (after {deltas} deltas)")),
                    Ok(_) if deltas != 2000 => Err(format!("run {i}: {deltas} deltas of 2000")),
                    Ok(_) => Ok(()),
                }
            })
        })
        .collect();
    let failures = futures::future::join_all(tasks)
        .await
        .into_iter()
        .filter_map(|joined| match joined {
            Ok(Ok(())) => None,
            Ok(Err(why)) => Some(why),
            Err(panic) => Some(format!("a run's task panicked: {panic}")),
        })
        .collect();
    (failures, started.elapsed().as_secs_f64())
}

/// The fake CLI copied into the sandbox folder, which every container mounts at the same path.
fn shared_fake_cli(sandboxes: &Path) -> PathBuf {
    let dir = sandboxes.join("bench-bin");
    std::fs::create_dir_all(&dir).unwrap();
    let target = dir.join("fake_agent_cli");
    std::fs::copy(env!("CARGO_BIN_EXE_fake_agent_cli"), &target).unwrap();
    target
}

#[tokio::main]
async fn main() {
    let infra = Infra::load().unwrap_or_else(|e| panic!("{e}"));
    let docker = infra.docker().unwrap_or_else(|e| panic!("{e}"));
    let program = shared_fake_cli(&infra.sandboxes());
    let tag_entry = tag();
    let (local_failed, local_wall) = batch(&program, &tag_entry, |_| Launcher::Local).await;
    assert!(
        local_failed.is_empty(),
        "local runs failed: {local_failed:#?}"
    );
    let containers = docker.containers.clone();
    let (failed, wall) = batch(&program, &tag_entry, |i| {
        Launcher::Container(Container::exec(
            Engine::Docker,
            containers[i % containers.len()].clone(),
        ))
    })
    .await;
    let entry = format!("{}={}", tag_entry.0, tag_entry.1);
    let left: Vec<String> = containers
        .iter()
        .flat_map(|c| docker.processes_carrying(c, &entry).unwrap())
        .collect();
    let ok = RUNS - failed.len();
    println!(
        "container runs: {ok}/{RUNS} ok, wall {wall:.2}s, overhead vs local {:.1}x",
        wall / local_wall
    );
    println!(
        "(local: {RUNS}/{RUNS} ok, wall {local_wall:.2}s; {LINES} lines per run; {} containers)",
        containers.len()
    );
    assert!(
        left.is_empty(),
        "processes left in the containers: {left:?}"
    );
    assert!(failed.is_empty(), "container runs failed: {failed:#?}");
}
