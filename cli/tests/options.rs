//! `--option KEY=VALUE`: a backend's own options from the command line, typed through its options
//! struct (issue 39), on `run` and `chat`; and `run` without a terminal finishing every scripted
//! scenario, declining what it cannot ask and saying so.

use std::process::Output;

use piped::agent_api_fed as agent_api_with_stdin;

mod piped;

fn agent_api(args: &[&str]) -> Output {
    agent_api_with_stdin(args, "")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_scripted_tour_runs_to_its_end_without_a_terminal_declining_and_saying_so() {
    let output = agent_api(&[
        "run",
        "--agent",
        "scripted",
        "--format",
        "pretty",
        "--option",
        "backend.scripted.scenario=tour",
        "--option",
        "backend.scripted.delay_ms=0",
        "hi",
    ]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("The command printed: hi"),
        "the tour played to its last message: {stdout}"
    );
    assert!(
        stderr.contains("no terminal to ask; denying"),
        "the permission is declined aloud: {stderr}"
    );
    assert!(
        stderr.contains("no terminal to ask; declining the question"),
        "the question is declined aloud: {stderr}"
    );
}

#[test]
fn every_scripted_scenario_finishes_without_a_terminal() {
    for scenario in [
        "text",
        "reasoning",
        "permission",
        "question",
        "tour",
        "slow",
        "echo",
    ] {
        let option = format!("backend.scripted.scenario={scenario}");
        let output = agent_api(&[
            "run",
            "--agent",
            "scripted",
            "--option",
            &option,
            "--option",
            "backend.scripted.delay_ms=0",
            "hi",
        ]);
        assert!(
            output.status.success(),
            "{scenario}: {}",
            text(&output.stderr)
        );
    }
}

#[test]
fn an_option_value_is_typed_by_the_backends_options_struct() {
    // A number where the struct takes one, the text as it is where it takes a string.
    let output = agent_api(&[
        "run",
        "--agent",
        "scripted",
        "--option",
        "backend.scripted.delay_ms=zero",
        "hi",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("backend.scripted.delay_ms") && stderr.contains("invalid"),
        "{stderr}"
    );
    let output = agent_api(&[
        "run",
        "--agent",
        "scripted",
        "--option",
        "backend.scripted.scenario=echo",
        "--option",
        "delay_ms=0",
        "42",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("42"));
}

#[test]
fn an_unknown_option_is_refused_with_the_valid_ones() {
    let output = agent_api(&[
        "run",
        "--agent",
        "scripted",
        "--option",
        "backend.scripted.scenaro=tour",
        "hi",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("backend.scripted.scenaro"), "{stderr}");
    assert!(
        stderr.contains("backend.scripted.scenario")
            && stderr.contains("backend.scripted.delay_ms"),
        "{stderr}"
    );
    let output = agent_api(&[
        "run",
        "--agent",
        "scripted",
        "--option",
        "no-equals-sign",
        "hi",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("KEY=VALUE"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn chat_takes_options_too() {
    let output = agent_api_with_stdin(
        &[
            "chat",
            "--agent",
            "scripted",
            "--option",
            "backend.scripted.scenario=echo",
            "--option",
            "backend.scripted.delay_ms=0",
        ],
        "first line\nsecond line\n",
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("first line") && stdout.contains("second line"),
        "{stdout}"
    );
    let output = agent_api_with_stdin(
        &[
            "chat",
            "--agent",
            "scripted",
            "--option",
            "backend.scripted.bogus=1",
        ],
        "hi\n",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("backend.scripted.scenario"),
        "{}",
        text(&output.stderr)
    );
}

/// A chat shows the conversation (each line as `you> ...`, then the answer) and its bookkeeping
/// once, at the end; the scripted agent's sessions, which live in this process only, get no
/// `--resume` line (issue 39).
#[test]
fn chat_shows_the_conversation_and_its_bookkeeping_once() {
    let output = agent_api_with_stdin(
        &[
            "chat",
            "--agent",
            "scripted",
            "--format",
            "pretty",
            "--option",
            "scenario=echo",
            "--option",
            "delay_ms=0",
        ],
        "first line\nsecond line\n",
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('·')).collect();
    assert_eq!(
        lines,
        [
            "you> first line",
            "first line",
            "you> second line",
            "second line"
        ],
        "{stdout}"
    );
    let stderr = text(&output.stderr);
    assert_eq!(
        stderr.matches("agent-api: ").count(),
        1,
        "one line of bookkeeping: {stderr}"
    );
    assert!(
        stderr.contains("chat ended after 2 completed turn(s)") && !stderr.contains("session:"),
        "{stderr}"
    );
    let run = agent_api(&["run", "--agent", "scripted", "hi"]);
    assert!(
        !text(&run.stderr).contains("session:"),
        "{}",
        text(&run.stderr)
    );
}
