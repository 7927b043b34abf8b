//! The launcher test infrastructure itself (`tests/launchers/setup.sh`): the containers and the sshd are up,
//! and the process listings the launcher tests rely on do find a tagged process (so an empty listing after a
//! run means something). Fails with the setup script's reason when a part could not be set up.

use std::process::Command;
use std::time::{Duration, Instant};

use agent_api_conformance::launchers::{local_processes_carrying, tag, Infra};

fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn a_tagged_process_in_a_container_is_listed_until_it_ends() {
    let docker = Infra::load()
        .and_then(|i| i.docker())
        .unwrap_or_else(|e| panic!("{e}"));
    let container = &docker.containers[0];
    let (name, value) = tag();
    let entry = format!("{name}={value}");
    let status = Command::new("docker")
        .args(["exec", "-d", "-e", &entry, container, "sleep", "30"])
        .status()
        .unwrap();
    assert!(status.success());
    let mut found = Vec::new();
    assert!(wait_until(|| {
        found = docker.processes_carrying(container, &entry).unwrap();
        !found.is_empty()
    }));
    assert!(found[0].ends_with("sleep 30"), "{found:?}");
    assert!(docker
        .stray_processes(container)
        .unwrap()
        .iter()
        .any(|p| p.ends_with("sleep 30")));
    let pid = found[0].split_whitespace().next().unwrap();
    assert!(Command::new("docker")
        .args(["exec", container, "kill", "-KILL", pid])
        .status()
        .unwrap()
        .success());
    assert!(wait_until(|| docker
        .processes_carrying(container, &entry)
        .unwrap()
        .is_empty()));
}

#[test]
fn a_tagged_process_on_the_ssh_host_is_listed_until_it_ends() {
    let ssh = Infra::load()
        .and_then(|i| i.ssh())
        .unwrap_or_else(|e| panic!("{e}"));
    let (name, value) = tag();
    let entry = format!("{name}={value}");
    // The far side's `sleep` outlives its ssh client: the very orphan the launchers must prevent.
    let mut client = Command::new("ssh")
        .arg("-F")
        .arg(&ssh.config)
        .args([&ssh.host, "env", &entry, "sleep", "30"])
        .spawn()
        .unwrap();
    let mut found = Vec::new();
    assert!(wait_until(|| {
        found = local_processes_carrying(&entry);
        !found.is_empty()
    }));
    client.kill().unwrap();
    client.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let left = local_processes_carrying(&entry);
    assert!(left.iter().any(|p| p.ends_with("sleep 30")), "{left:?}");
    for p in left {
        let pid: i32 = p.split_whitespace().next().unwrap().parse().unwrap();
        // SAFETY: kill has no memory preconditions; pid is a process this test made.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(wait_until(|| local_processes_carrying(&entry).is_empty()));
}
