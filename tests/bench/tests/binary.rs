//! The `agent_bench` binary: `serve` prints the bound address and answers there, logging to `--log`;
//! `scenarios` lists the scenario table.

use std::process::Stdio;
use std::time::Duration;

use agent_bench::process::GroupGuard;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

#[tokio::test]
async fn serve_prints_its_address_and_logs_requests() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent_bench"));
    cmd.args(["serve", "--port", "0", "--log"])
        .arg(&log)
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    agent_bench::process::isolate(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let _guard = GroupGuard::new(&child);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let addr = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not an address: {url}"));
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");

    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"HEAD /s/text/ HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let logged = std::fs::read_to_string(&log).unwrap();
    let entry: serde_json::Value = serde_json::from_str(logged.lines().next().unwrap()).unwrap();
    assert_eq!(
        (entry["method"].as_str(), entry["scenario"].as_str()),
        (Some("HEAD"), Some("text"))
    );
}

#[test]
fn scenarios_lists_every_scenario() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agent_bench"))
        .arg("scenarios")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for s in agent_bench::scenario::SCENARIOS {
        assert!(
            text.lines().any(|l| l.starts_with(s.name)),
            "{} missing",
            s.name
        );
    }
}

#[test]
fn unknown_subcommand_fails_with_usage() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agent_bench"))
        .arg("nope")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage:"));
}
