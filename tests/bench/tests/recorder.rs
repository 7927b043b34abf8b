//! The recorder reproduces a fixture of each interface: a fresh recording has the same event-type
//! sequence (see `agent_bench::record::compare`) as the shared fixture of the same scenario, or, for Qwen
//! (which has no shared fixture), as the recording committed under `tests/bench/recorded/`. Its files follow
//! the shared formats, with machine paths made neutral.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_bench::record::{self, compare};
use agent_bench::{e2e_enabled_or_explain, Interface, ModelServer};
use common::fixtures_dir;
use serde_json::Value;

/// (interface, our scenario, reference file).
fn reference(interface: Interface) -> (&'static str, PathBuf) {
    let shared = |p: &str| fixtures_dir().join(p);
    match interface {
        Interface::ClaudePrint => (
            "shell",
            shared("claude_code/print/bash_allowed.stdout.jsonl"),
        ),
        Interface::ClaudeControl => ("shell", shared("claude_code/control/allow.session.jsonl")),
        Interface::CodexExec => ("text", shared("codex/exec/text_quiet.stdout.jsonl")),
        Interface::CodexAppServer => ("text", shared("codex/app_server/text.session.jsonl")),
        Interface::OpenCodeRun => (
            "text",
            shared("opencode/run/text_no_disable_env.stdout.jsonl"),
        ),
        Interface::GeminiHeadless => (
            "text",
            shared("gemini/headless/text_no_relaunch.stdout.jsonl"),
        ),
        Interface::QwenPrint => (
            "text",
            record::default_out_dir(interface).join("text.stdout.jsonl"),
        ),
        Interface::QwenControl => (
            "shell",
            record::default_out_dir(interface).join("shell.session.jsonl"),
        ),
        Interface::QwenAcp => (
            "shell",
            record::default_out_dir(interface).join("shell.session.jsonl"),
        ),
        other => panic!("no reference for {other}"),
    }
}

/// Notifications about the machine rather than the run: Codex's `configWarning` says whether
/// bubblewrap is installed, which differs between the machine that made a fixture and this one
/// (`tests/run.sh` installs bubblewrap for the launcher tests).
const MACHINE_NOTICES: &[&str] = &["recv:configWarning"];

fn event_types(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let types = if path.to_string_lossy().ends_with(".session.jsonl") {
        compare::session_event_types(&text)
    } else {
        compare::stdout_event_types(&text)
    };
    types
        .into_iter()
        .filter(|t| !MACHINE_NOTICES.contains(&t.as_str()))
        .collect()
}

/// For two-way sessions the order between what the client sends and what the agent pushes on its own
/// depends on timing, so each direction is compared on its own. A JSON-RPC agent may push one more
/// notification (Qwen's late usage update) after it answered the last request and before the recorder
/// stops reading: what it received is compared up to that last answer, which ends the turn.
fn by_direction(types: &[String]) -> (Vec<&String>, Vec<&String>) {
    let (sent, mut received): (Vec<&String>, Vec<&String>) =
        types.iter().partition(|t| t.starts_with("send:"));
    if let Some(last) = received.iter().rposition(|t| t.as_str() == "recv:response") {
        received.truncate(last + 1);
    }
    (sent, received)
}

async fn reproduces(interface: Interface) {
    let Some(_path) = e2e_enabled_or_explain(interface.cli()) else {
        return;
    };
    let (scenario, reference) = reference(interface);
    let server = ModelServer::start(None).await.unwrap();
    let out = tempfile::tempdir().unwrap();
    let rec = record::record(
        &server,
        interface,
        scenario,
        out.path(),
        Duration::from_secs(180),
    )
    .await
    .unwrap();
    assert_eq!(
        rec.exit_code,
        0,
        "{interface}: {}",
        std::fs::read_to_string(&rec.meta).unwrap()
    );

    let ours = event_types(&rec.transcript);
    let theirs = event_types(&reference);
    if interface.is_one_way() {
        assert_eq!(
            ours,
            theirs,
            "{interface}: event types differ from {}",
            reference.display()
        );
    } else {
        assert_eq!(
            by_direction(&ours),
            by_direction(&theirs),
            "{interface}: differs from {}",
            reference.display()
        );
    }

    let transcript = std::fs::read_to_string(&rec.transcript).unwrap();
    let sandbox_root = rec.sandbox.home.parent().unwrap().display().to_string();
    assert!(
        !transcript.contains(&sandbox_root),
        "{interface}: machine path left in the transcript"
    );
    assert!(
        !transcript.contains(&server.addr().port().to_string()) || server.addr().port() == 8080
    );
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(&rec.meta).unwrap()).unwrap();
    for key in [
        "cli",
        "cli_version",
        "interface",
        "scenario",
        "argv",
        "env",
        "cwd",
        "exit_code",
        "wall_s",
        "stderr",
    ] {
        assert!(meta.get(key).is_some(), "{interface}: meta lacks {key}");
    }
    assert_eq!(meta["cwd"], format!("/home/dev/work/{scenario}"));
    assert_eq!(meta["env"]["HOME"], "/home/dev");
}

#[tokio::test]
async fn recorder_reproduces_claude_code_print() {
    reproduces(Interface::ClaudePrint).await;
}

#[tokio::test]
async fn recorder_reproduces_claude_code_control() {
    reproduces(Interface::ClaudeControl).await;
}

#[tokio::test]
async fn recorder_reproduces_codex_exec() {
    reproduces(Interface::CodexExec).await;
}

#[tokio::test]
async fn recorder_reproduces_codex_app_server() {
    reproduces(Interface::CodexAppServer).await;
}

#[tokio::test]
async fn recorder_reproduces_opencode_run() {
    reproduces(Interface::OpenCodeRun).await;
}

#[tokio::test]
async fn recorder_reproduces_gemini_headless() {
    reproduces(Interface::GeminiHeadless).await;
}

#[tokio::test]
async fn recorder_reproduces_qwen_print() {
    reproduces(Interface::QwenPrint).await;
}

#[tokio::test]
async fn recorder_reproduces_qwen_control() {
    reproduces(Interface::QwenControl).await;
}

#[tokio::test]
async fn recorder_reproduces_qwen_acp() {
    reproduces(Interface::QwenAcp).await;
}

#[test]
fn committed_recordings_are_neutral_and_well_formed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("recorded");
    let mut seen = 0;
    for interface in Interface::ALL {
        let dir = record::default_out_dir(interface);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !text.contains("/root/") && !text.contains("agent_api/sandboxes"),
                "{}",
                path.display()
            );
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".meta.json") {
                let meta: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(meta["interface"], interface.name(), "{name}");
            } else {
                for line in text.lines() {
                    let v: Value = serde_json::from_str(line)
                        .unwrap_or_else(|e| panic!("{name}: {e}: {line}"));
                    if name.ends_with(".session.jsonl") {
                        assert!(
                            v["t"].is_number() && v["dir"].is_string() && v.get("msg").is_some(),
                            "{name}"
                        );
                    }
                }
            }
            seen += 1;
        }
    }
    assert!(
        seen >= 2 * Interface::ALL.len(),
        "only {seen} files under {}",
        root.display()
    );
}
