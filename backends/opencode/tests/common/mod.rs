//! What the end-to-end tests share: a backend on a bench sandbox, and a run driven to its end.

#![allow(dead_code)]

use std::time::Duration;

use agent_api::kit::projection::Projector;
use agent_api::universal::UniversalEventBody;
use agent_api::{AgentBackend, AgentError, PermissionDecision, QuestionAnswer, RunRequest};
use agent_api_conformance::{assert_conformant, RunRecord};
use agent_api_opencode::{Interface, OpenCodeBackend, OpenCodeConfig};
use agent_bench::{e2e_enabled_or_explain, Cli, ModelServer, Sandbox};
use futures::StreamExt;

/// The bench's model server and a sandbox for `scenario`, or `None` when e2e runs are skipped.
pub(crate) async fn setup(scenario: &str) -> Option<(ModelServer, Sandbox)> {
    e2e_enabled_or_explain(Cli::OpenCode)?;
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(Cli::OpenCode, &server, scenario).unwrap();
    Some((server, sandbox))
}

/// A backend running the sandbox's `opencode` with its environment, in its working directory.
pub(crate) fn backend(sandbox: &Sandbox, interface: Interface) -> OpenCodeBackend {
    let mut config = OpenCodeConfig::with_binary(&sandbox.program).default_interface(interface);
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    config.working_dir = Some(sandbox.cwd.clone());
    OpenCodeBackend::new(config)
}

/// Runs `request`, answering every permission with `decision` and every question with its first
/// option; cancels at the first native
/// delta when `cancel_on_first_delta`.
pub(crate) async fn drive(
    backend: &OpenCodeBackend,
    request: RunRequest,
    decision: PermissionDecision,
    cancel_on_first_delta: bool,
) -> RunRecord {
    let handle = backend
        .run(request.with_timeout(Duration::from_secs(120)))
        .await
        .expect("run starts");
    let control = handle.control();
    let mut projector = Projector::new(handle.agent_kind().clone(), handle.tools_structured());
    let (mut events, completion) = handle.into_universal();
    let mut universal = Vec::new();
    while let Some(event) = events.next().await {
        match &event.body {
            UniversalEventBody::PermissionRequested(p) => {
                let _ = control
                    .respond_permission(&p.permission_id, decision.clone())
                    .await;
            }
            UniversalEventBody::QuestionRequested(q) => {
                let answer = q.options.first().cloned().unwrap_or_else(|| "yes".into());
                let _ = control
                    .answer_question(&q.question_id, QuestionAnswer::Text(answer))
                    .await;
            }
            UniversalEventBody::ItemDelta(_) if cancel_on_first_delta && !event.synthetic => {
                control.cancel()
            }
            _ => {}
        }
        universal.push(event);
    }
    let wrapper = universal
        .iter()
        .flat_map(|e| projector.project(e))
        .collect();
    RunRecord {
        universal,
        wrapper,
        completion: completion.await,
        tools_structured: true,
    }
}

/// Waits up to 5 s for every process working in `dir` (the server and its children) to be gone.
pub(crate) async fn wait_until_gone(needle: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !agent_bench::process::processes_in(needle).is_empty()
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        agent_bench::process::processes_in(needle),
        Vec::<i32>::new(),
        "no opencode process is left"
    );
}

/// The model API's 401, 500 and overload (429 with `retry-after`) on `interface`: each ends in one
/// typed terminal error. OpenCode retries the 429 itself; where the interface reports its retries
/// (`serve`'s `session.status` events; `run --format json` prints none of them) they show as
/// `rate_limited` statuses first.
pub(crate) async fn model_api_errors_are_typed(interface: Interface) {
    for (scenario, code) in [
        ("error401", "auth"),
        ("error500", "server_error"),
        ("overloaded", "rate_limited"),
    ] {
        let Some((_server, sandbox)) = setup(scenario).await else {
            return;
        };
        let run = drive(
            &backend(&sandbox, interface),
            RunRequest::new("say hi"),
            PermissionDecision::Allow,
            false,
        )
        .await;
        assert_conformant(&run);
        let error = run.completion.as_ref().expect_err("the run fails");
        assert_eq!(error.code(), code, "{scenario}: {error}");
        if scenario == "error500" {
            assert!(matches!(
                error,
                AgentError::ServerError {
                    status: Some(500),
                    ..
                }
            ));
        }
        assert_eq!(
            run.universal
                .iter()
                .filter(|e| e.is_terminal_error())
                .count(),
            1,
            "{scenario}"
        );
        if scenario == "overloaded" && interface == Interface::Serve {
            let limited: Vec<_> = run
                .wrapper
                .iter()
                .filter_map(|e| e.message.as_deref())
                .filter(|m| m.starts_with("rate_limited"))
                .collect();
            // OpenCode retries the 429 itself, waiting the server's `retry-after-ms` (10 ms).
            assert!(
                limited.first().is_some_and(
                    |m| m.starts_with("rate_limited: overloaded; retry 1; retry after 0")
                ),
                "{limited:?}"
            );
        }
    }
}

/// How a recording's client sends its prompts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Prompting {
    /// `prompt_async`, the next one as soon as the turn before it is idle (OpenCode said `busy`,
    /// then `session.idle`), reading the event stream all along.
    AsyncOnIdle,
    /// The synchronous `POST /session/{id}/message`, whose answer comes once the turn is over, the
    /// next one as soon as that answer is in; the event stream is read once the last answer is
    /// in (so every prompt is written before the events of the turns, as a client that reads its
    /// events in another task, late, writes them).
    SyncThenEvents,
}

/// Records a session of `prompts` on a real `opencode serve` of the sandbox's, as a scripted
/// client would, into `path` in the recordings' format (`tests/fixtures/README.md`: `send`, `recv`
/// and `event` lines with their time): a new session, then each prompt as `prompting` says, then
/// the events that follow the last idle for `trailing` (OpenCode sends a few once a turn is over).
pub(crate) async fn record_serve_session(
    sandbox: &Sandbox,
    prompting: Prompting,
    prompts: &[&str],
    trailing: Duration,
    path: &std::path::Path,
) {
    use agent_api::kit::CommandSpec;
    use agent_api_opencode::serve::server::Server;
    use serde_json::{json, Value};

    let mut base = CommandSpec::new(&sandbox.program).cwd(&sandbox.cwd);
    for (k, v) in &sandbox.env {
        base = base.env(k, v);
    }
    let server = Server::start(base, Duration::from_secs(120))
        .await
        .expect("opencode serve starts");
    let (subscriber, mut events) = server.subscribe();
    let started = std::time::Instant::now();
    let mut lines = Vec::new();
    let mut line = |dir: &str, msg: Value| {
        let t = started.elapsed().as_secs_f64();
        lines.push(json!({"t": t, "dir": dir, "msg": msg}).to_string());
    };
    let query = format!(
        "?directory={}",
        sandbox.cwd.display().to_string().replace('/', "%2F")
    );
    let body = json!({"title": "e2e"});
    let path_new = format!("/session{query}");
    line(
        "send",
        json!({"method": "POST", "path": path_new, "body": body}),
    );
    let reply = server.client().post_json(&path_new, &body).await.unwrap();
    line("recv", json!({"status": reply.status, "body": reply.body}));
    let session = reply.body["id"].as_str().expect("a session id").to_string();
    server.watch(subscriber, &session);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let call = match prompting {
        Prompting::AsyncOnIdle => "prompt_async",
        Prompting::SyncThenEvents => "message",
    };
    for prompt in prompts {
        let prompt_path = format!("/session/{session}/{call}{query}");
        let body = json!({"parts": [{"type": "text", "text": prompt}]});
        line(
            "send",
            json!({"method": "POST", "path": prompt_path, "body": body}),
        );
        let reply =
            tokio::time::timeout_at(deadline, server.client().post_json(&prompt_path, &body))
                .await
                .expect("the prompt is answered within 120 s")
                .unwrap();
        line("recv", json!({"status": reply.status, "body": reply.body}));
        if let Prompting::AsyncOnIdle = prompting {
            read_turns(&mut events, 1, deadline, &mut line).await;
        }
    }
    if let Prompting::SyncThenEvents = prompting {
        read_turns(&mut events, prompts.len(), deadline, &mut line).await;
    }
    while let Ok(Some(event)) = tokio::time::timeout(trailing, events.recv()).await {
        line("event", serde_json::from_str(&event).unwrap());
    }
    server.unsubscribe(subscriber);
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// Reads a recording's events until `turns` more turns are idle (OpenCode said `busy`, then
/// `session.idle`), writing each with `line`.
async fn read_turns(
    events: &mut agent_api_opencode::serve::server::EventRx,
    turns: usize,
    deadline: tokio::time::Instant,
    line: &mut impl FnMut(&str, serde_json::Value),
) {
    use serde_json::{json, Value};
    let (mut busy, mut idle) = (false, 0);
    while idle < turns {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .expect("the turns end within 120 s")
            .expect("the server's events go on");
        let event: Value = serde_json::from_str(&event).unwrap();
        let kind = event.pointer("/payload/type").and_then(Value::as_str);
        busy |= kind == Some("session.status")
            && event.pointer("/payload/properties/status/type") == Some(&json!("busy"));
        line("event", event.clone());
        if busy && kind == Some("session.idle") {
            (busy, idle) = (false, idle + 1);
        }
    }
}
