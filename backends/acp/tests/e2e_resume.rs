//! Resuming with `session/load` end to end on the real, pinned Gemini CLI and Qwen Code (both
//! advertise `loadSession`) against the bench's `echo` model: a second process loads the first
//! one's session, the model sees the earlier turn, and the replayed history is `history` status
//! items, not new output. Also a warm session opened from an existing native session id.
//! Gemini CLI 0.61.0 loses its own load race now and then (see [`gemini_load_race`]): then the
//! test checks that the client reports it typed and at once.
//! Without the CLIs these fail with install instructions, unless AGENT_API_E2E=skip.

use std::time::Duration;

use agent_api::{AgentBackend, AgentError, RunRequest, SessionSelector};
use agent_api_acp::AcpConfig;
use agent_api_conformance::session::{assert_session_conformant, status_of, SessionRecord};
use agent_api_conformance::{assert_conformant, record, Answers, RunRecord};
use agent_api_gemini::GeminiBackend;
use agent_api_qwen::QwenBackend;
use agent_bench::process::processes_in;
use agent_bench::sandbox::GEMINI_MODEL;
use agent_bench::{Cli, ModelServer, Sandbox};

async fn bench(cli: Cli) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_enabled_or_explain(cli)?;
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = Sandbox::new(cli, &server, "echo").unwrap();
    Some((server, sandbox))
}

fn backend(sandbox: &Sandbox, cli: Cli) -> std::sync::Arc<dyn AgentBackend> {
    let mut config = AcpConfig::with_binary(&sandbox.program).working_dir(&sandbox.cwd);
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    match cli {
        Cli::Gemini => std::sync::Arc::new(GeminiBackend::new(config)),
        _ => std::sync::Arc::new(QwenBackend::new(config)),
    }
}

fn request(cli: Cli, prompt: &str) -> RunRequest {
    let request = RunRequest::new(prompt).with_timeout(Duration::from_secs(150));
    match cli {
        Cli::Gemini => request.with_model(GEMINI_MODEL),
        _ => request,
    }
}

/// User turns the CLI adds to every conversation (Qwen's environment context).
fn context_turns(cli: Cli) -> usize {
    usize::from(cli == Cli::Qwen)
}

/// One run in its own process; returns its native session id.
async fn first_run(backend: &dyn AgentBackend, cli: Cli) -> String {
    let run = record(backend.run(request(cli, "first")).await.unwrap()).await;
    assert_conformant(&run);
    let done = run.completion.as_ref().unwrap();
    assert!(
        done.final_text
            .as_deref()
            .unwrap_or_default()
            .ends_with("last=first"),
        "{done:?}"
    );
    done.native_session_id.clone().expect("a native session id")
}

/// Whether a failed load is Gemini CLI 0.61.0's own race: setting up the session it loads
/// appends a `$set messages` record (its context message alone) to that session's file, and
/// when this lands before its lookup reads the file, the session has nothing to resume ("No
/// previous sessions found for this project", an internal error). The client's side must
/// still hold: the typed `SessionNotFound` for that id, at once.
fn gemini_load_race(cli: Cli, error: &AgentError, id: &str) -> bool {
    let typed = matches!(error, AgentError::SessionNotFound { id: failed } if failed == id);
    assert!(typed, "{error:?}");
    eprintln!("gemini lost its own session/load race ({error}); the client reported it typed");
    cli == Cli::Gemini
}

/// The `history` status details of `events`.
fn history(events: &[agent_api::UniversalEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(status_of)
        .filter(|(label, _)| *label == "history")
        .map(|(_, d)| d.unwrap_or_default().to_string())
        .collect()
}

/// The earlier turn came back as `history` items. Qwen 0.15.10 replays only the user's side:
/// its ACP process exits at end of input before it records the answer of its last turn (its chat
/// file then holds the user message alone), so its model does not see that answer either.
fn replayed_as_history(history: &[String], cli: Cli) {
    // Consecutive user messages (Gemini's own context message, then ours) make one item.
    assert!(
        history
            .iter()
            .any(|h| h.starts_with("user: ") && h.ends_with("first")),
        "{history:?}"
    );
    let answer = history
        .iter()
        .any(|h| h.starts_with("assistant: echo: ") && h.ends_with("last=first"));
    assert_eq!(answer, cli == Cli::Gemini, "{history:?}");
}

async fn load_in_a_new_process(cli: Cli) {
    let Some((_server, sandbox)) = bench(cli).await else {
        return;
    };
    let backend = backend(&sandbox, cli);
    let id = first_run(&*backend, cli).await;
    let resumed: RunRecord = record(
        backend
            .run(request(cli, "second").with_session(SessionSelector::Resume(id.clone().into())))
            .await
            .unwrap(),
    )
    .await;
    assert_conformant(&resumed);
    assert!(processes_in(&sandbox.cwd).is_empty());
    let done = match &resumed.completion {
        Ok(done) => done,
        Err(error) if gemini_load_race(cli, error, &id) => return,
        Err(error) => panic!("{error:?}"),
    };
    let expected = format!("echo: user_turns={} ", context_turns(cli) + 2);
    let text = done.final_text.clone().unwrap_or_default();
    assert!(
        text.starts_with(&expected) && text.ends_with("last=second"),
        "{text}"
    );
    assert_eq!(done.native_session_id.as_deref(), Some(id.as_str()));
    replayed_as_history(&history(&resumed.universal), cli);
    assert_eq!(
        resumed.assistant_messages(),
        vec![text],
        "the replayed answer is no new output"
    );
}

async fn warm_session_from_a_native_id(cli: Cli) {
    let Some((_server, sandbox)) = bench(cli).await else {
        return;
    };
    let backend = backend(&sandbox, cli);
    let id = first_run(&*backend, cli).await;
    let template = request(cli, "").with_session(SessionSelector::Resume(id.clone().into()));
    let mut session = backend.open_session(template).await.unwrap();
    assert!(session.is_warm());
    let pid = session.process_id();
    let mut record = SessionRecord::default();
    for (n, prompt) in ["second", "third"].into_iter().enumerate() {
        let handle = match session.send(prompt).await {
            Ok(handle) => handle,
            // The load failed before this turn: the session is over.
            Err(AgentError::SessionClosed) if cli == Cli::Gemini && n == 0 => return,
            Err(error) => panic!("{error:?}"),
        };
        let done = match record.record(handle, Answers::none()).await {
            Ok(done) => done,
            Err(error) if n == 0 && gemini_load_race(cli, error, &id) => return,
            Err(error) => panic!("{error:?}"),
        };
        let text = done.final_text.clone().unwrap_or_default();
        let expected = format!("echo: user_turns={} ", context_turns(cli) + n + 2);
        assert!(
            text.starts_with(&expected) && text.ends_with(&format!("last={prompt}")),
            "{text}"
        );
        assert_eq!(session.process_id(), pid);
    }
    assert_eq!(session.native_session_id().as_deref(), Some(id.as_str()));
    replayed_as_history(&history(&record.turns[0].universal), cli);
    assert!(
        history(&record.turns[1].universal).is_empty(),
        "history is replayed once"
    );
    record.trailing = session.close().await.unwrap();
    assert_session_conformant(&record);
}

#[tokio::test]
async fn gemini_session_load_in_a_new_process_sees_the_earlier_turn_as_history() {
    load_in_a_new_process(Cli::Gemini).await;
}

#[tokio::test]
async fn qwen_session_load_in_a_new_process_sees_the_earlier_turn_as_history() {
    load_in_a_new_process(Cli::Qwen).await;
}

#[tokio::test]
async fn gemini_warm_session_resumed_from_a_native_id() {
    warm_session_from_a_native_id(Cli::Gemini).await;
}

#[tokio::test]
async fn qwen_warm_session_resumed_from_a_native_id() {
    warm_session_from_a_native_id(Cli::Qwen).await;
}

/// A caller-chosen session id on the one-way interfaces: Gemini headless `--session-id`, Qwen's
/// print and stream-json `--session-id`: the run's session is that id, and a second run resumes
/// it by that id. ACP names its own sessions: there the id is refused before anything is spawned.
#[tokio::test]
async fn a_caller_chosen_session_id_names_the_session_and_resumes_on_the_one_way_interfaces() {
    use agent_api_gemini::{GeminiInterface, GeminiOptions};
    use agent_api_qwen::{QwenInterface, QwenOptions};
    let chosen = "0b6c4f1e-2a3d-4e5f-8a9b-0c1d2e3f4a5b";
    for cli in [Cli::Gemini, Cli::Qwen] {
        let Some((_server, sandbox)) = bench(cli).await else {
            return;
        };
        let backend = backend(&sandbox, cli);
        let one_way = |r: RunRequest| match cli {
            Cli::Gemini => {
                r.with_options(&GeminiOptions::default().interface(GeminiInterface::Headless))
            }
            _ => r.with_options(&QwenOptions::default().interface(QwenInterface::StreamJson)),
        };
        let run = record(
            backend
                .run(one_way(request(cli, "first").with_new_session_id(chosen)))
                .await
                .unwrap(),
        )
        .await;
        assert_conformant(&run);
        assert_eq!(
            run.completion
                .as_ref()
                .unwrap()
                .native_session_id
                .as_deref(),
            Some(chosen),
            "{cli:?}"
        );
        let again =
            one_way(request(cli, "second").with_session(SessionSelector::Resume(chosen.into())));
        let resumed = record(backend.run(again).await.unwrap()).await;
        let text = resumed
            .completion
            .as_ref()
            .unwrap()
            .final_text
            .clone()
            .unwrap_or_default();
        assert!(
            text.contains(&format!("user_turns={}", 2 + context_turns(cli))),
            "{cli:?}: {text}"
        );

        let acp = backend
            .run(request(cli, "x").with_new_session_id(chosen))
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(acp, AgentError::InvalidRequest { .. }),
            "{cli:?}: {acp:?}"
        );
        assert!(processes_in(&sandbox.cwd).is_empty());
    }
}
