//! `agent-api run`: one run with streamed events, answering permissions and questions.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agent_api::projection::Projector;
use agent_api::universal::{UniversalEvent, UniversalEventBody};
use agent_api::{PermissionDecision, PermissionPolicy, QuestionAnswer, RunControl, RunRequest};
use futures::StreamExt;

use crate::agents::{backend, default_kind, gateway, parse_kind};
use crate::render::Pretty;
use crate::{Approve, Format, View};

/// What `run` was asked.
pub struct RunOptions {
    pub agent: Option<String>,
    pub format: Format,
    pub view: View,
    pub include_raw: bool,
    pub cwd: Option<PathBuf>,
    pub model: Option<String>,
    pub approve: Approve,
    pub timeout: Option<u64>,
    pub prompt: String,
}

/// Runs the prompt and prints its events; exit code 0 when the run succeeded, 1 when it failed.
pub async fn run(options: RunOptions) -> Result<ExitCode, String> {
    let kind = match &options.agent {
        Some(kind) => kind.clone(),
        None => {
            let (kind, path) = default_kind();
            match path {
                Some(path) => eprintln!("agent-api: using {kind} ({}); pass --agent to choose", path.display()),
                None => eprintln!("agent-api: no supported agent CLI is installed; using the built-in scripted agent"),
            }
            kind.to_string()
        }
    };
    backend(&kind)?;
    let mut request =
        RunRequest::new(options.prompt.as_str()).with_include_raw(options.include_raw).with_permissions(match options.approve {
            Approve::Ask => PermissionPolicy::Ask,
            Approve::All => PermissionPolicy::ApproveAll,
            Approve::None => PermissionPolicy::DenyAll,
        });
    if let Some(cwd) = &options.cwd {
        request = request.with_working_dir(cwd);
    }
    if let Some(model) = &options.model {
        request = request.with_model(model);
    }
    if let Some(secs) = options.timeout {
        request = request.with_timeout(Duration::from_secs(secs));
    }
    let handle = match gateway().run(&parse_kind(&kind)?, request).await {
        Ok(handle) => handle,
        Err(error) => {
            eprintln!("agent-api: {error}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let control = handle.control();
    let on_interrupt = control.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nagent-api: cancelling");
            on_interrupt.cancel();
        }
    });
    let interactive = options.format == Format::Pretty && std::io::stdin().is_terminal();
    let mut projector = Projector::new(handle.agent_kind().clone(), handle.tools_structured());
    let (mut events, completion) = handle.into_universal();
    let mut pretty = Pretty::default();
    let stdout = std::io::stdout();
    while let Some(event) = events.next().await {
        let mut out = stdout.lock();
        match (options.view, options.format) {
            (View::Universal, Format::Jsonl) => print_json(&mut out, &event),
            (View::Universal, Format::Pretty) => pretty.universal(&mut out, &event),
            (View::Wrapper, format) => {
                for wrapper in projector.project(&event) {
                    match format {
                        Format::Jsonl => print_json(&mut out, &wrapper),
                        Format::Pretty => pretty.wrapper(&mut out, &wrapper),
                    }
                }
                if format == Format::Pretty
                    && matches!(&event.body, UniversalEventBody::ItemCompleted(d) if d.item.kind == agent_api::universal::ItemKind::Message)
                {
                    pretty.end_of_message(&mut out);
                }
            }
        }
        drop(out);
        answer_hitl(&event, &control, options.approve, interactive).await;
    }
    let result = completion.await;
    match result {
        Ok(done) => {
            let session = done.native_session_id.as_deref().unwrap_or("none");
            let usage = done.usage.map(|u| format!(", tokens in/out {:?}/{:?}", u.input_tokens, u.output_tokens)).unwrap_or_default();
            eprintln!("agent-api: {kind} run completed (session {session}{usage})");
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("agent-api: {kind} run failed: {error}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn print_json(out: &mut impl Write, value: &impl serde::Serialize) {
    let _ = writeln!(out, "{}", serde_json::to_string(value).expect("events serialize"));
}

/// Answers a permission request or question: on a terminal by asking, otherwise as
/// `--approve` says (questions are rejected without a terminal).
async fn answer_hitl(event: &UniversalEvent, control: &RunControl, approve: Approve, interactive: bool) {
    match &event.body {
        // With --approve all or none the request's policy decides in the backend.
        UniversalEventBody::PermissionRequested(p) if approve == Approve::Ask => {
            let decision = if interactive {
                let answer = ask(format!("Allow {}? [y/N] ", p.action)).await;
                if answer.trim().eq_ignore_ascii_case("y") {
                    PermissionDecision::Allow
                } else {
                    PermissionDecision::Deny { message: Some("denied at the terminal".into()) }
                }
            } else {
                eprintln!("agent-api: no terminal to ask; denying {}", p.action);
                PermissionDecision::Deny { message: Some("no terminal to ask".into()) }
            };
            let _ = control.respond_permission(&p.permission_id, decision).await;
        }
        UniversalEventBody::QuestionRequested(q) => {
            let answer = if interactive {
                let text = ask(format!("{} {:?}\n> ", q.prompt, q.options)).await;
                QuestionAnswer::Text(text.trim().to_string())
            } else {
                eprintln!("agent-api: no terminal to ask; rejecting the question {:?}", q.prompt);
                QuestionAnswer::Reject
            };
            let _ = control.answer_question(&q.question_id, answer).await;
        }
        _ => {}
    }
}

async fn ask(prompt: String) -> String {
    tokio::task::spawn_blocking(move || {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        line
    })
    .await
    .unwrap_or_default()
}
