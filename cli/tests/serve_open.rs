//! `agent-api serve` prints the inspector's address; with `--open`, with the token in its fragment
//! (never in a query string that reaches a log), and without a display it says to open it by hand.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// The lines `serve` prints up to its inspector's address (then it is killed).
fn first_lines(args: &[&str]) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args(["serve", "--port", "0", "--store", "memory"])
        .args(args)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        let done = line.starts_with("agent-api: inspector: ") && !args.contains(&"--open")
            || line.contains("no display");
        lines.push(line);
        if done {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

#[test]
fn serve_prints_the_inspector_address_and_with_open_the_token_in_its_fragment() {
    let plain = first_lines(&["--token", "s3cret"]);
    let address = plain
        .iter()
        .find_map(|l| l.strip_prefix("agent-api: listening on "))
        .expect("the address")
        .to_string();
    assert!(
        plain.contains(&format!("agent-api: inspector: {address}/ui/")),
        "{plain:#?}"
    );
    assert!(
        !plain.iter().any(|l| l.contains("s3cret")),
        "no token printed unless asked: {plain:#?}"
    );

    let opened = first_lines(&["--token", "s3cret", "--open"]);
    let address = opened
        .iter()
        .find_map(|l| l.strip_prefix("agent-api: listening on "))
        .expect("the address")
        .to_string();
    assert!(
        opened.contains(&format!("agent-api: inspector: {address}/ui/#token=s3cret")),
        "{opened:#?}"
    );
    assert!(
        opened
            .iter()
            .any(|l| l.contains("no display: open the address above in a browser")),
        "{opened:#?}"
    );
}
