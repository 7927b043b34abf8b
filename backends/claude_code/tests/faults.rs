//! Faults the real CLI cannot be made to produce, through a fake `claude`
//! (`tests/fixtures/fake_claude.sh`) that prints real stream-json and then misbehaves.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_api::universal::{ContentPart, UniversalEventBody};
use agent_api::{AgentBackend, AgentError, PortableOptions, RunRequest};
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_conformance::{assert_conformant, problems, record, RunRecord};

fn fake() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_claude.sh")
}

/// Runs the fake in `mode` in a fresh working directory; returns the run and that directory.
async fn run_fake(mode: &str, request: RunRequest) -> (RunRecord, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = ClaudeCodeConfig::default()
        .with_binary(fake())
        .with_env("FAKE_CLAUDE_MODE", mode);
    let backend = ClaudeCodeBackend::new(config);
    let handle = backend
        .run(request.with_working_dir(dir.path()))
        .await
        .unwrap();
    (record(handle).await, dir)
}

/// Processes whose working directory is `dir`.
fn processes_in(dir: &Path) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path().join("cwd")).is_ok_and(|c| c.starts_with(dir)))
        .count()
}

fn statuses(run: &RunRecord) -> Vec<(String, Option<String>)> {
    run.universal
        .iter()
        .filter_map(|e| match &e.body {
            UniversalEventBody::ItemCompleted(d) => d.item.content.iter().find_map(|p| match p {
                ContentPart::Status { label, detail } => Some((label.clone(), detail.clone())),
                _ => None,
            }),
            _ => None,
        })
        .collect()
}

/// A JSON Schema too long for one command-line argument: a typed error naming its size before
/// anything starts, not the kernel's "Argument list too long".
#[tokio::test]
async fn a_schema_too_long_for_a_command_line_is_refused_naming_its_size() {
    let properties: serde_json::Map<String, serde_json::Value> = (0..4000)
        .map(|i| {
            (
                format!("field_{i:05}_with_a_long_name"),
                serde_json::json!({"type": "string"}),
            )
        })
        .collect();
    let schema = serde_json::json!({"type": "object", "properties": properties});
    let request = RunRequest::new("hi")
        .with_portable(agent_api::PortableOptions::default().output_schema(schema.clone()));
    let config = ClaudeCodeConfig::default()
        .with_binary(fake())
        .with_env("FAKE_CLAUDE_MODE", "negative_cost");
    let error = ClaudeCodeBackend::new(config)
        .run(request)
        .await
        .map(|_| ())
        .unwrap_err();
    match error {
        AgentError::ArgumentTooLong { bytes, max, .. } => {
            assert_eq!(bytes, schema.to_string().len());
            assert!(bytes > max);
        }
        other => panic!("expected ArgumentTooLong, got {other}"),
    }
}

/// A negative cost from the agent is unknown, not under the limit: the run completes, its cost is
/// `None`, and a `limit_unchecked` status says the cost limit could not be checked.
#[tokio::test]
async fn a_negative_cost_is_unknown_and_the_cost_limit_says_it_was_not_checked() {
    let (run, _dir) = run_fake(
        "negative_cost",
        RunRequest::new("hi").with_max_cost_usd(1.0),
    )
    .await;
    assert_conformant(&run);
    let completion = run.completion.as_ref().unwrap();
    assert_eq!(
        completion.usage.as_ref().unwrap().cost_usd,
        None,
        "{completion:?}"
    );
    let unchecked: Vec<_> = statuses(&run)
        .into_iter()
        .filter(|(label, _)| label == "limit_unchecked")
        .collect();
    assert_eq!(unchecked.len(), 1, "{:?}", statuses(&run));
    assert!(
        unchecked[0]
            .1
            .as_deref()
            .unwrap_or("")
            .contains("max_cost_usd"),
        "{unchecked:?}"
    );
}

#[tokio::test]
async fn a_crash_mid_stream_is_process_exited_naming_its_stderr_with_secrets_masked() {
    // The key the run hands the CLI, which the fake prints on stderr as it dies.
    let dir = tempfile::tempdir().unwrap();
    let config = ClaudeCodeConfig::default()
        .with_binary(fake())
        .with_env("FAKE_CLAUDE_MODE", "crash")
        .with_env("ANTHROPIC_API_KEY", "SECRET-TOKEN-123");
    let handle = ClaudeCodeBackend::new(config)
        .run(RunRequest::new("hi").with_working_dir(dir.path()))
        .await
        .unwrap();
    let run = record(handle).await;
    assert_conformant(&run);
    assert!(
        matches!(
            run.completion,
            Err(AgentError::ProcessExited {
                exit_code: Some(3),
                ..
            })
        ),
        "{:?}",
        run.completion
    );
    // The message never finished: it fails, and the wrapper view does not output its text.
    assert_eq!(run.assistant_text(), "");
    let cut = run.universal.iter().rev().find_map(|e| match &e.body {
        agent_api::universal::UniversalEventBody::ItemCompleted(d)
            if d.item.role == Some(agent_api::universal::ItemRole::Assistant) =>
        {
            Some(d.item.clone())
        }
        _ => None,
    });
    let cut = cut.expect("the streamed message completes");
    assert_eq!(
        (cut.status, cut.text()),
        (
            agent_api::universal::ItemStatus::Failed,
            "partial ".to_string()
        )
    );
    let error = run.completion.as_ref().unwrap_err().to_string();
    assert!(
        error.contains("its stderr ends: fatal: [redacted] leaked on stderr"),
        "the error says why: {error}"
    );
    assert!(!error.contains("SECRET"), "{error}");
    for event in &run.wrapper {
        let text = serde_json::to_string(event).unwrap();
        assert!(
            !text.contains("SECRET-TOKEN"),
            "a secret leaked into a wrapper event: {text}"
        );
    }
}

#[tokio::test]
async fn a_process_killed_by_a_signal_is_process_exited_with_the_signal() {
    let (run, _dir) = run_fake("killed", RunRequest::new("hi")).await;
    assert_conformant(&run);
    assert!(
        matches!(
            run.completion,
            Err(AgentError::ProcessExited {
                signal: Some(9),
                ..
            })
        ),
        "{:?}",
        run.completion
    );
}

#[tokio::test]
async fn a_hang_times_out_typed_and_leaves_no_process() {
    let started = std::time::Instant::now();
    let (run, dir) = run_fake(
        "hang",
        RunRequest::new("hi").with_timeout(Duration::from_secs(1)),
    )
    .await;
    assert_conformant(&run);
    assert!(
        matches!(run.completion, Err(AgentError::Timeout { .. })),
        "{:?}",
        run.completion
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        processes_in(dir.path()),
        0,
        "the fake's `sleep 300` child survived the run"
    );
}

#[tokio::test]
async fn a_20_mib_line_becomes_one_bounded_status_and_the_run_goes_on() {
    let (run, _dir) = run_fake("big_line", RunRequest::new("hi")).await;
    assert_conformant(&run);
    let skipped: Vec<_> = statuses(&run)
        .into_iter()
        .filter(|(l, _)| l == "native_line_skipped")
        .collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(skipped[0].1.as_deref().unwrap().len() < 200);
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("done")
    );
    assert_eq!(run.assistant_text(), "done");
}

#[tokio::test]
async fn a_structured_answer_over_the_line_cap_ends_naming_the_line_not_the_exit() {
    // Fault row 106: the agent exits cleanly after its result line was skipped.
    let schema = serde_json::json!({"type": "object"});
    let request =
        RunRequest::new("hi").with_portable(PortableOptions::default().output_schema(schema));
    let (run, _dir) = run_fake("huge_structured", request).await;
    assert_conformant(&run);
    let error = run.completion.as_ref().unwrap_err();
    assert!(
        matches!(error, AgentError::LineOverCap { bytes, cap } if *bytes > 20 << 20 && *cap == 16 << 20),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("line cap"), "{message}");
    assert!(!message.contains("exited before"), "{message}");
}

#[tokio::test]
async fn invalid_utf8_is_reported_and_replaced_and_the_run_goes_on() {
    let (run, _dir) = run_fake("invalid_utf8", RunRequest::new("hi")).await;
    assert_conformant(&run);
    assert!(statuses(&run)
        .iter()
        .any(|(l, _)| l == "native_line_invalid_utf8"));
    assert_eq!(run.assistant_text(), "bad \u{FFFD} byte");
    assert!(run.completion.is_ok());
}

#[tokio::test]
async fn malformed_lines_are_unparsed_and_unknown_types_are_statuses() {
    let (run, _dir) = run_fake("garbage", RunRequest::new("hi")).await;
    let unparsed: Vec<_> = run.of_type("agent.unparsed").collect();
    assert_eq!(
        unparsed.len(),
        2,
        "the non-JSON line and the assistant line without a message"
    );
    // Apart from those, the run is conformant.
    let rest: Vec<String> = problems(&run)
        .into_iter()
        .filter(|p| !p.contains("agent.unparsed"))
        .collect();
    assert!(rest.is_empty(), "{rest:?}");
    let labels: Vec<String> = statuses(&run).into_iter().map(|(l, _)| l).collect();
    assert!(
        labels.contains(&"unknown_message".to_string())
            && labels.contains(&"system/brand_new_subtype".to_string()),
        "{labels:?}"
    );
    assert_eq!(
        run.completion.as_ref().unwrap().final_text.as_deref(),
        Some("done")
    );
}

#[tokio::test]
async fn a_refused_bypass_mode_is_a_clear_typed_error() {
    let (run, _dir) = run_fake(
        "bypass_refused",
        RunRequest::new("hi").with_skip_permission_prompts(true),
    )
    .await;
    assert_conformant(&run);
    let error = run.completion.as_ref().unwrap_err();
    assert!(
        matches!(error, AgentError::PermissionModeRefused { mode, reason } if mode == "bypassPermissions" && reason.contains("IS_SANDBOX=1")),
        "{error:?}"
    );
    // Without a bypass request the same exit is only an early exit.
    let (plain, _dir) = run_fake("bypass_refused", RunRequest::new("hi")).await;
    assert!(
        matches!(
            plain.completion,
            Err(AgentError::ProcessExited {
                exit_code: Some(1),
                ..
            })
        ),
        "{:?}",
        plain.completion
    );
}

#[tokio::test]
async fn a_missing_binary_is_binary_not_found_before_any_event() {
    let backend =
        ClaudeCodeBackend::new(ClaudeCodeConfig::default().with_binary("/nonexistent/claude"));
    let error = backend.run(RunRequest::new("hi")).await.err().unwrap();
    assert!(
        matches!(error, AgentError::BinaryNotFound { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn the_installed_cli_version_is_a_supported_one() {
    assert_eq!(
        agent_api::kit::detect::probe_version(Path::new("/nonexistent/claude")).await,
        None
    );
    if let Some(cli) = agent_bench::e2e_enabled_or_explain(agent_bench::Cli::ClaudeCode) {
        let version = agent_api::kit::detect::probe_version(&cli).await.unwrap();
        assert!(
            agent_api_claude_code::SUPPORTED_VERSIONS.contains(&version.as_str()),
            "{version}"
        );
    }
}

#[test]
fn debug_of_the_config_and_backend_never_prints_env_values() {
    let config = ClaudeCodeConfig::default().with_env("ANTHROPIC_API_KEY", "sk-ant-api03-LIVE");
    let backend = ClaudeCodeBackend::new(config.clone());
    for shown in [format!("{config:?}"), format!("{backend:?}")] {
        assert!(
            !shown.contains("LIVE") && shown.contains("ANTHROPIC_API_KEY"),
            "{shown}"
        );
    }
}

#[tokio::test]
async fn secrets_in_stream_errors_codes_and_result_subtypes_are_masked() {
    let (run, _dir) = run_fake("secrets", RunRequest::new("hi")).await;
    assert_conformant(&run);
    let everything = format!(
        "{} {} {}",
        serde_json::to_string(&run.universal).unwrap(),
        serde_json::to_string(&run.wrapper).unwrap(),
        run.completion.as_ref().unwrap_err()
    );
    for secret in ["SECRET", "sk-ant-code-123456", "tok."] {
        assert!(
            !everything.contains(secret),
            "{secret} leaked: {everything}"
        );
    }
}

#[tokio::test]
async fn the_prompt_s_user_message_carries_no_unrelated_raw_line() {
    let (run, _dir) = run_fake("default", RunRequest::new("hi").with_include_raw(true)).await;
    let user_events: Vec<_> = run
        .universal
        .iter()
        .filter(|e| match &e.body {
            UniversalEventBody::ItemStarted(d) | UniversalEventBody::ItemCompleted(d) => {
                d.item.role == Some(agent_api::universal::ItemRole::User)
            }
            UniversalEventBody::ItemDelta(_) => e.synthetic,
            _ => false,
        })
        .collect();
    assert!(!user_events.is_empty());
    for event in user_events {
        assert!(
            event.raw.is_none(),
            "the user message carries a native line: {:?}",
            event.raw
        );
    }
    assert!(
        run.universal.iter().any(|e| e.raw.is_some()),
        "other events keep their raw lines"
    );
}
