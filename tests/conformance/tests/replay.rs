//! Recorded sessions replay through a backend's own protocol, in both recording formats.

use agent_api::kit::replay::{open_recording, replay, RecordingFormat, ReplayOptions};
use agent_api::AgentError;
use agent_api_conformance::{assert_conformant, record};
use agent_api_scripted::wire::{AgentLine, ClientLine};
use agent_api_scripted::ScriptedBackend;

fn line(l: &AgentLine) -> String {
    serde_json::to_string(l).unwrap()
}

fn native_log() -> String {
    [
        line(&AgentLine::Session {
            id: "s-1".into(),
            model: "m".into(),
        }),
        line(&AgentLine::TextDelta {
            message_id: "m1".into(),
            text: "Hi ".into(),
        }),
        line(&AgentLine::TextDelta {
            message_id: "m1".into(),
            text: "there".into(),
        }),
        line(&AgentLine::MessageDone {
            message_id: "m1".into(),
            text: "Hi there".into(),
        }),
        line(&AgentLine::Done {
            status: "success".into(),
            input_tokens: 1,
            output_tokens: 2,
        }),
    ]
    .join("\n")
}

#[tokio::test]
async fn a_native_stdout_log_replays_conformant() {
    let handle = replay(
        &ScriptedBackend::new(),
        std::io::Cursor::new(native_log().into_bytes()),
        ReplayOptions::default(),
    )
    .await
    .unwrap();
    let run = record(handle).await;
    assert_conformant(&run);
    assert_eq!(run.assistant_text(), "Hi there");
    assert_eq!(
        run.completion.unwrap().native_session_id.as_deref(),
        Some("s-1")
    );
}

#[tokio::test]
async fn a_session_recording_replays_with_the_clients_answers() {
    let recv = |l: &AgentLine| format!("{{\"t\":0.1,\"dir\":\"recv\",\"msg\":{}}}", line(l));
    let send = |l: &ClientLine| {
        format!(
            "{{\"t\":0.2,\"dir\":\"send\",\"msg\":{}}}",
            serde_json::to_string(l).unwrap()
        )
    };
    let log = [
        recv(&AgentLine::Session {
            id: "s-2".into(),
            model: "m".into(),
        }),
        recv(&AgentLine::ToolCall {
            call_id: "c1".into(),
            name: "shell".into(),
            message_id: "m0".into(),
            input: serde_json::json!({"command": "ls"}),
        }),
        recv(&AgentLine::PermissionRequest {
            request_id: "p1".into(),
            call_id: "c1".into(),
            summary: "run ls".into(),
        }),
        send(&ClientLine::PermissionResponse {
            request_id: "p1".into(),
            allow: true,
        }),
        "{\"t\":0.3,\"dir\":\"stderr\",\"msg\":\"warning: something\"}".to_string(),
        recv(&AgentLine::ToolResult {
            call_id: "c1".into(),
            exit_code: 0,
            stdout: "a\n".into(),
            denied: false,
        }),
        recv(&AgentLine::Done {
            status: "success".into(),
            input_tokens: 1,
            output_tokens: 2,
        }),
    ]
    .join("\n");
    let (format, _) = open_recording(std::io::Cursor::new(log.clone().into_bytes()), |_| None)
        .await
        .unwrap();
    assert_eq!(format, RecordingFormat::Session);
    let run = record(
        replay(
            &ScriptedBackend::new(),
            std::io::Cursor::new(log.into_bytes()),
            ReplayOptions::default(),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_conformant(&run);
    assert_eq!(run.of_type("permission.resolved").count(), 1);
}

#[tokio::test]
async fn malformed_lines_become_unparsed_events_not_a_crash() {
    let log = format!(
        "{}\nnot json at all\n{{\"type\":\"no_such_type\"}}\n",
        native_log()
    );
    let run = record(
        replay(
            &ScriptedBackend::new(),
            std::io::Cursor::new(log.into_bytes()),
            ReplayOptions::default(),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(run.of_type("agent.unparsed").count(), 2);
    assert!(run.completion.is_ok());
    let problems = agent_api_conformance::problems(&run);
    assert_eq!(
        problems.len(),
        2,
        "only the two unparsed lines are problems: {problems:?}"
    );
}

#[tokio::test]
async fn an_unreadable_file_is_a_typed_replay_error() {
    let err = agent_api::kit::replay::replay_file(
        &ScriptedBackend::new(),
        std::path::Path::new("/nonexistent/recording.jsonl"),
        false,
    )
    .await
    .err()
    .unwrap();
    assert!(matches!(err, AgentError::Replay { .. }));
}

/// A file of an agent's own store is refused by the backend whose store it is, and by another
/// backend told of it (`agent-api replay` tells every built-in one); unrecognized, it is read.
#[tokio::test]
async fn a_stored_session_file_is_refused_by_its_backend_and_by_one_told_of_it() {
    use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
    use agent_api_codex::{CodexBackend, CodexConfig};
    use std::sync::Arc;
    let rollout =
        std::fs::read(agent_bench::fixtures_dir().join("history/codex/shell.jsonl")).unwrap();
    let codex = Arc::new(CodexBackend::new(CodexConfig::default()));
    let claude = ClaudeCodeBackend::new(ClaudeCodeConfig::default());
    for (backend, options) in [
        (
            codex.as_ref() as &dyn agent_api::kit::replay::Replay,
            ReplayOptions::default(),
        ),
        (
            &claude,
            ReplayOptions::default().refusing_stores_of(vec![codex.clone()]),
        ),
    ] {
        match replay(backend, std::io::Cursor::new(rollout.clone()), options).await {
            Err(error @ AgentError::StoredSessionFile { .. }) => {
                assert!(error.to_string().contains("Codex rollout"), "{error}")
            }
            Err(other) => panic!("expected StoredSessionFile, got {other}"),
            Ok(_) => panic!("a rollout replayed as a recording"),
        }
    }
    let read = replay(
        &claude,
        std::io::Cursor::new(rollout),
        ReplayOptions::default(),
    )
    .await;
    assert!(
        read.is_ok(),
        "a backend that does not know the store reads the lines"
    );
}

/// An ACP agent's retries, which it reports only on stderr, show in a replay as in a live run,
/// read where its crate says: Gemini CLI's stderr, and any ACP agent's (the generic kind reads
/// the family's attempt lines). The stderr is Gemini CLI's own, recorded on a run of 500s.
#[tokio::test]
async fn an_acp_agents_stderr_retries_show_in_its_replay() {
    use agent_api_acp::{AcpBackend, AcpConfig};
    use agent_api_gemini::GeminiBackend;
    let fixtures = agent_bench::fixtures_dir();
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fixtures.join("gemini/headless/error500_default_attempts.meta.json"))
            .unwrap(),
    )
    .unwrap();
    let stderr = meta["stderr"].as_str().unwrap().to_string();
    let recording = fixtures.join("gemini/acp/text.session.jsonl");
    let backends: [(&str, Box<dyn agent_api::kit::replay::Replay>); 2] = [
        ("gemini", Box::new(GeminiBackend::new(AcpConfig::default()))),
        ("acp", Box::new(AcpBackend::new(AcpConfig::default()))),
    ];
    for (name, backend) in backends {
        let file = tokio::fs::File::open(&recording).await.unwrap();
        let options = ReplayOptions::default().stderr(Some(stderr.clone()));
        let run = record(replay(backend.as_ref(), file, options).await.unwrap()).await;
        assert_conformant(&run);
        let retries = run
            .status_labels()
            .iter()
            .filter(|l| *l == "api_retry")
            .count();
        // Three attempts failed and were retried; the fourth's line ends the tries, no retry.
        assert_eq!(retries, 3, "{name}: {:?}", run.types());
        assert!(run.completion.is_ok(), "{name}");
    }
}
