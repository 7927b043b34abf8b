//! A warm session whose app-server refuses to start it (`initialize` or `thread/start`): the
//! turn gets the agent's refusal as a typed error, not a bare process exit, and the session ends.

use agent_api::kit::AgentPipes;
use agent_api::kit::{start_session, RunSettings, Transport};
use agent_api::AgentBackend as _;
use agent_api::{AgentError, AgentKind, RunRequest, Session};
use agent_api_codex::app_server::AppServer;
use agent_api_codex::argv::StartPlan;
use agent_api_codex::{CodexBackend, CodexConfig, RunOptions};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// Which request the fake app-server refuses.
#[derive(Clone, Copy)]
enum Refuse {
    Initialize,
    Thread,
}

/// A fake app-server that refuses `refuse` with a message holding a key, then waits for stdin to close.
async fn refusing_codex(mut pipes: AgentPipes, refuse: Refuse) -> i32 {
    let mut line = String::new();
    loop {
        line.clear();
        if pipes.stdin.read_line(&mut line).await.unwrap_or(0) == 0 {
            return 0;
        }
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let reply = match (message["method"].as_str(), refuse) {
            (Some("initialize"), Refuse::Initialize) | (Some("thread/start"), Refuse::Thread) => {
                json!({"id": message["id"], "error": {"code": -32600, "message": "not allowed here (key sk-secret123)"}})
            }
            (Some("initialize"), _) => {
                json!({"id": message["id"], "result": {"userAgent": "fake/0.169.0"}})
            }
            _ => continue,
        };
        let mut bytes = serde_json::to_vec(&reply).unwrap();
        bytes.push(b'\n');
        pipes.stdout.write_all(&bytes).await.unwrap();
    }
}

fn session(refuse: Refuse) -> Session {
    let request = RunRequest::new("");
    let config = CodexConfig::default();
    let options = RunOptions::resolve(&request, &config).unwrap();
    let plan = StartPlan::new(&config, &options, &request);
    let transport = Transport::in_process(1 << 20, move |pipes| refusing_codex(pipes, refuse));
    let capabilities = CodexBackend::new(CodexConfig::default())
        .info()
        .capabilities
        .clone();
    let settings =
        RunSettings::for_request(AgentKind::new("codex").unwrap(), &request, &capabilities);
    start_session(
        settings,
        transport,
        Box::new(AppServer::session(plan, options.policy)),
    )
}

async fn first_turn(refuse: Refuse, wait_first: bool) -> (AgentError, Session) {
    let mut session = session(refuse);
    if wait_first {
        // The refusal comes before any turn is sent.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let turn = session.send("hi").await.expect("the turn starts");
    let (events, completion) = turn.collect_wrapper().await;
    assert!(!events.is_empty());
    (completion.expect_err("the turn fails"), session)
}

#[tokio::test]
async fn a_refused_initialize_is_a_protocol_error_with_the_agents_words() {
    for wait_first in [false, true] {
        let (error, mut session) = first_turn(Refuse::Initialize, wait_first).await;
        assert!(
            matches!(&error, AgentError::Protocol { reason } if reason.contains("initialize") && reason.contains("not allowed")),
            "{error:?}"
        );
        assert!(
            !error.to_string().contains("sk-secret123"),
            "the key is redacted: {error}"
        );
        let next = session.send("again").await.map(|_| ());
        assert!(matches!(next, Err(AgentError::SessionClosed)), "{next:?}");
    }
}

#[tokio::test]
async fn a_refused_thread_start_is_an_agent_failure_with_its_words() {
    for wait_first in [false, true] {
        let (error, _session) = first_turn(Refuse::Thread, wait_first).await;
        assert!(
            matches!(&error, AgentError::AgentFailed { message } if message.contains("thread") && message.contains("not allowed")),
            "{error:?}"
        );
        assert!(
            !error.to_string().contains("sk-secret123"),
            "the key is redacted: {error}"
        );
    }
}
