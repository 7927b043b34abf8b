//! Every recorded ACP session of Gemini CLI 0.61.0 (and of OpenCode 1.18.33, through the generic
//! `acp` kind), and every Gemini headless
//! stdout log, replays conformant, with the final text and outcome of the live run.

use std::path::{Path, PathBuf};

use agent_api::kit::replay::replay_file;
use agent_api::run::Channel;
use agent_api::universal::{DecidedBy, PermissionStatus};
use agent_api::AgentError;
use agent_api_acp::{AcpBackend, AcpConfig};
use agent_api_conformance::{assert_conformant, record, RunRecord};
use agent_api_gemini::GeminiBackend;

fn files(cli: &str, interface: &str) -> Vec<PathBuf> {
    let dir = agent_bench::fixtures_dir().join(cli).join(interface);
    agent_bench::recordings_in(&dir)
}

async fn replay(backend: &dyn agent_api::kit::replay::Replay, path: &Path) -> RunRecord {
    let run = record(
        replay_file(backend, path, true)
            .await
            .expect("replay starts"),
    )
    .await;
    assert_conformant(&run);
    run
}

fn scenario(path: &Path) -> String {
    path.file_name()
        .unwrap()
        .to_string_lossy()
        .split('.')
        .next()
        .unwrap()
        .to_string()
}

fn final_text(run: &RunRecord) -> Option<&str> {
    run.completion.as_ref().ok()?.final_text.as_deref()
}

#[tokio::test]
async fn every_gemini_acp_session_replays_with_the_live_outcome() {
    let backend = GeminiBackend::new(AcpConfig::default());
    for path in files("gemini", "acp") {
        let run = replay(&backend, &path).await;
        let name = scenario(&path);
        let text = final_text(&run).unwrap_or_default();
        match name.as_str() {
            "text" => assert_eq!(text, "Hello from mock"),
            "thinking" => {
                assert_eq!(text, "Hello after thinking");
                assert!(
                    !run.text_on(&Channel::Reasoning).is_empty(),
                    "{:?}",
                    run.types()
                );
            }
            "bash_allow" => {
                assert!(text.starts_with("Tool finished. Response was: {\"output\": \"<untrusted_context>\\nOutput: hi"), "{text}")
            }
            "bash_deny" => assert!(text.contains("was canceled by the user"), "{text}"),
            "cancel" => assert_eq!(text, "Fast reply after cancel (contents=1)"),
            "load_next_minute_a" | "load_same_minute_a" => {
                assert_eq!(text, "echo: user_turns=1 contents=1")
            }
            "load_next_minute_b" => {
                assert_eq!(
                    text, "echo: user_turns=2 contents=3",
                    "the replayed history is not new output"
                );
                assert!(
                    run.status_labels().iter().any(|l| l == "history"),
                    "{:?}",
                    run.status_labels()
                );
            }
            "load_same_minute_b" => {
                assert!(
                    matches!(run.completion, Err(AgentError::SessionNotFound { .. })),
                    "{:?}",
                    run.completion
                )
            }
            "write_fs" => assert_eq!(
                text,
                "Tool finished. Response was: {\"error\": \"[object Object]\"}"
            ),
            "write_fs_emptyread" => assert!(
                text.starts_with("Tool finished. Response was: {\"output\": \"Successfully"),
                "{text}"
            ),
            other => panic!("a recording this test does not know: {other}"),
        }
        if name.starts_with("bash") {
            assert_eq!(run.of_type("permission.requested").count(), 1, "{name}");
            assert_eq!(run.of_type("permission.resolved").count(), 1, "{name}");
            assert_eq!(
                run.completed_items(agent_api::universal::ItemKind::ToolCall)
                    .len(),
                1,
                "{name}"
            );
        }
        if name != "load_same_minute_b" {
            let done = run
                .completion
                .as_ref()
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                done.native_session_id.is_some() && done.usage.is_some(),
                "{name}"
            );
            assert!(
                !run.universal[0].synthetic,
                "{name}: the session starts natively"
            );
        }
    }
}

#[tokio::test]
async fn every_opencode_acp_session_replays_with_the_live_outcome() {
    let backend = AcpBackend::new(AcpConfig::default());
    for path in files("opencode", "acp") {
        let run = replay(&backend, &path).await;
        let name = scenario(&path);
        match name.as_str() {
            "cancel" => assert!(
                matches!(run.completion, Err(AgentError::Cancelled)),
                "{:?}",
                run.completion
            ),
            "text" => assert_eq!(final_text(&run), Some("Hello from mock")),
            "reasoning" => {
                assert_eq!(final_text(&run), Some("Hello after thinking"));
                assert!(!run.text_on(&Channel::Reasoning).is_empty());
            }
            "shell_allow_once" => {
                assert_eq!(final_text(&run), Some("Shell done. Tool output was: hi | "))
            }
            "shell_reject_once" => assert!(run.completion.is_ok(), "{:?}", run.completion),
            other => panic!("a recording this test does not know: {other}"),
        }
        if name.starts_with("shell") {
            let resolved: Vec<_> = run.of_type("permission.resolved").collect();
            assert_eq!(
                (run.of_type("permission.requested").count(), resolved.len()),
                (1, 1),
                "{name}"
            );
            let approved = resolved[0]
                .permission()
                .map(|p| p.status == PermissionStatus::Approved);
            assert_eq!(
                (approved, resolved[0].decided_by()),
                (Some(name == "shell_allow_once"), Some(DecidedBy::Caller)),
                "{name}"
            );
        }
    }
}

#[tokio::test]
async fn every_gemini_headless_log_replays_with_the_live_outcome() {
    let backend = GeminiBackend::new(AcpConfig::default());
    for path in files("gemini", "headless") {
        let run = replay(&backend, &path).await;
        let name = scenario(&path);
        match name.as_str() {
            "error401" => assert!(
                matches!(run.completion, Err(AgentError::Auth { .. })),
                "{:?}",
                run.completion
            ),
            "error500_default_attempts" => {
                assert!(
                    matches!(
                        run.completion,
                        Err(AgentError::ServerError {
                            status: Some(500),
                            ..
                        })
                    ),
                    "{:?}",
                    run.completion
                )
            }
            "auth_type_missing" | "untrusted_folder" => {
                assert!(
                    matches!(run.completion, Err(AgentError::ProcessExited { .. })),
                    "{:?}",
                    run.completion
                )
            }
            "text" | "text_no_relaunch" | "trust_workspace_env" => {
                assert_eq!(final_text(&run), Some("Hello from mock"), "{name}")
            }
            "thinking" => assert_eq!(final_text(&run), Some("Hello after thinking")),
            _ => {
                let done = run
                    .completion
                    .as_ref()
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(
                    done.final_text.is_some()
                        && done.native_session_id.is_some()
                        && done.usage.is_some(),
                    "{name}"
                );
            }
        }
        if let Err(e) = &run.completion {
            assert!(
                !e.to_string().contains("sk-test"),
                "{name}: the key is not echoed"
            );
        }
    }
}
