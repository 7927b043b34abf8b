//! `agent-api run`: one run with streamed events, answering permissions and questions.
//!
//! SIGINT, SIGTERM and SIGHUP cancel the run (a second one forces, see [`crate::signals`]); a
//! closed stdout cancels it too. Exit status: 0 the run succeeded, 1 it failed, 130 it was stopped
//! by a signal, 141 stdout was closed.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agent_api::display;
use agent_api::kit::projection::Projector;
use agent_api::universal::{ItemKind, UniversalEventBody};
use agent_api::UniversalEvent;
use agent_api::{
    PermissionDecision, PermissionPolicy, QuestionAnswer, RunControl, RunHandle, RunRequest,
};
use futures::StreamExt;

use crate::agents::{default_kind, gateway, parse_kind};
use crate::output::{finish, Stdout};
use crate::prompt::{permission_prompt, permission_summary, question_prompt, Stdin};
use crate::render::{usage_line, Pretty};
use crate::signals::Stop;
use crate::{Approve, Format, View};

/// Exit status of a run stopped by a signal (128 + SIGINT, as shells report it).
pub(crate) const SIGNALLED_EXIT: u8 = 130;

/// What `run` was asked.
pub(crate) struct RunOptions {
    pub agent: Option<String>,
    pub format: Format,
    pub view: View,
    pub include_raw: bool,
    pub cwd: Option<PathBuf>,
    pub model: Option<String>,
    pub approve: Approve,
    pub timeout: Option<u64>,
    pub acp_command: Option<Argv>,
    /// Where the agent runs (`--via`).
    pub via: Option<agent_api::request::Launcher>,
    /// The agent's own options (`--option KEY=VALUE`), as typed: checked against the chosen
    /// backend's options struct by [`request_of`].
    pub options: Vec<(String, String)>,
    /// The model variant (`--variant`).
    pub variant: Option<String>,
    /// The agent's mode (`--mode`).
    pub mode: Option<agent_api::request::AgentMode>,
    /// Timeouts (and, later, homes and limits) for runs side by side.
    pub fleet: crate::fleet::FleetFlags,
    /// The prompt: its text, and the images and files given with `--image` and `--attach`.
    pub prompt: agent_api::Prompt,
    /// Whether permission requests and questions are answered (not in a replay or a stored session).
    pub answers: bool,
    /// Whether this is `run`'s one run (default start-up and idle timeouts), not a chat.
    pub one_shot: bool,
    /// The portable options (`--system-prompt`, `--add-dir`, `--json-schema`, …).
    pub portable: agent_api::PortableOptions,
}

/// A command line split into its arguments (`--acp-command`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Argv(pub Vec<String>);

/// Splits `line` into arguments with POSIX shell quoting rules (no shell runs it).
pub(crate) fn parse_argv(line: &str) -> Result<Argv, String> {
    let argv = shlex::split(line)
        .ok_or("cannot split the command line: unbalanced quotes or a trailing backslash")?;
    if argv.is_empty() {
        return Err("the command line is empty".into());
    }
    Ok(Argv(argv))
}

/// Splits `KEY=VALUE` at its first `=` (`--option`).
pub(crate) fn parse_option(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        _ => Err("expected KEY=VALUE, e.g. backend.<kind>.<field>=VALUE".into()),
    }
}

/// The request `options` describe for `backend`: its `--option`s typed by the backend's own
/// options struct (a short `field` key is the backend's `backend.<kind>.field`); a key it does not
/// have, or a value that does not fit, is refused with the keys it has.
pub(crate) fn request_of(
    options: &RunOptions,
    backend: &dyn agent_api::AgentBackend,
) -> Result<RunRequest, String> {
    let mut request = base_request(options);
    for (key, text) in &options.options {
        let key = if key.contains('.') {
            key.clone()
        } else {
            format!("backend.{}.{key}", backend.info().kind)
        };
        let value = backend
            .info()
            .option_value(&key, text)
            .map_err(|e| display::line(&e.to_string(), 2048))?;
        request = request.with_extension(key, value);
    }
    Ok(request)
}

/// The request `options` describe, without backend options (`serve`'s defaults for every session).
pub(crate) fn base_request(options: &RunOptions) -> RunRequest {
    let policy = match options.approve {
        Approve::Ask => PermissionPolicy::Ask,
        Approve::All => PermissionPolicy::ApproveAll,
        Approve::None => PermissionPolicy::DenyAll,
    };
    let mut request = RunRequest::new(options.prompt.clone())
        .with_include_raw(options.include_raw)
        .with_permissions(policy)
        .with_portable(options.portable.clone());
    if let Some(cwd) = &options.cwd {
        request = request.with_working_dir(cwd);
    }
    if let Some(model) = &options.model {
        request = request.with_model(model);
    }
    if let Some(variant) = &options.variant {
        request = request.with_variant(variant);
    }
    if let Some(mode) = &options.mode {
        request = request.with_mode(mode.clone());
    }
    if let Some(secs) = options.timeout {
        request = request.with_timeout(Duration::from_secs(secs));
    }
    request = options.fleet.apply(request, options.one_shot);
    if let Some(launcher) = &options.via {
        request = request.with_launcher(launcher.clone());
    }
    if let Some(Argv(argv)) = &options.acp_command {
        // Another kind refuses the option's key (`backend.acp.command`) with a typed error.
        request = request
            .with_options(&agent_api_acp::AcpOptions::default().command(argv.iter().cloned()));
    }
    request
}

pub(crate) fn chosen_kind(options: &RunOptions) -> String {
    if let Some(kind) = options
        .agent
        .clone()
        .or_else(|| options.fleet.session_agent())
    {
        return kind;
    }
    if options.acp_command.is_some() {
        return "acp".into();
    }
    let (kind, path) = default_kind();
    match path {
        Some(path) => eprintln!(
            "agent-api: using {kind} ({}); pass --agent to choose",
            display::line(&path.to_string_lossy(), 512)
        ),
        None => eprintln!(
            "agent-api: no supported agent CLI is installed; using the built-in {kind} agent"
        ),
    }
    kind
}

/// Runs the prompt and prints its events.
pub(crate) async fn run(options: RunOptions) -> Result<ExitCode, String> {
    // Listen before anything is spawned, so no signal can end this process and leave the agent.
    let stop = Stop::listen().map_err(|e| format!("cannot listen for signals: {e}"))?;
    let kind = chosen_kind(&options);
    let request = request_of(&options, crate::agents::backend(&kind)?.as_ref())?;
    let Some(started) = stop
        .unless_signalled(gateway().run(&parse_kind(&kind)?, request))
        .await
    else {
        return Ok(ExitCode::from(SIGNALLED_EXIT));
    };
    let handle = match started {
        Ok(handle) => handle,
        Err(error) => {
            eprintln!("agent-api: {}", display::line(&error.to_string(), 1024));
            return Ok(ExitCode::FAILURE);
        }
    };
    let interactive = options.format == Format::Pretty && std::io::stdin().is_terminal();
    let stdin = interactive.then(Stdin::start);
    Ok(show_run(
        &options,
        handle,
        &format!("{kind} run"),
        &stop,
        stdin.as_ref(),
    )
    .await)
}

/// Shows `handle`'s events as `options` say, answering with `stdin` when given, and returns the
/// exit status `run` documents (0, 1, 130 or 141).
pub(crate) async fn show_run(
    options: &RunOptions,
    handle: RunHandle,
    what: &str,
    stop: &Stop,
    stdin: Option<&Stdin>,
) -> ExitCode {
    let mut viewer = Viewer::new(options, stdin, stop, &handle);
    let Some(code) = viewer.follow(handle, what).await else {
        return ExitCode::from(SIGNALLED_EXIT);
    };
    let code = if stop.cancel.is_cancelled() {
        ExitCode::from(SIGNALLED_EXIT)
    } else {
        code
    };
    finish(viewer.out, code)
}

/// The projection `options` show the wrapper view with: a person reading `pretty` output sees
/// the answer as it is written (a cut message then gets a line saying its text is taken back);
/// `jsonl` keeps the library's default, answers once they are sure.
fn projector_for(options: &RunOptions, handle: &RunHandle) -> Projector {
    let projector = Projector::new(handle.agent_kind().clone(), handle.tools_structured());
    if options.format == Format::Pretty {
        projector.streaming_answers()
    } else {
        projector
    }
}

/// The next line typed; never without a terminal to steer from.
async fn next_line(from: Option<&Stdin>) -> Option<String> {
    match from {
        Some(stdin) => stdin.next_line().await,
        None => std::future::pending().await,
    }
}

/// Steers the running turn with `line`, saying so at once and again once the agent took it
/// (it reads it at its next step) or why not; the events go on meanwhile.
fn steer(control: &RunControl, line: String) {
    let text = line.trim().to_string();
    if text.is_empty() {
        return;
    }
    eprintln!(
        "agent-api: steering the turn: {}",
        display::line(&text, 256)
    );
    let control = control.clone();
    tokio::spawn(async move {
        match control.steer(text).await {
            Ok(()) => eprintln!("agent-api: the agent took the steering message"),
            Err(error) => eprintln!(
                "agent-api: not steered: {}",
                display::line(&error.to_string(), 1024)
            ),
        }
    });
}

/// Runs (or a chat's turns) being shown and answered.
pub(crate) struct Viewer<'a> {
    options: &'a RunOptions,
    pub(crate) out: Stdout,
    pub(crate) pretty: Pretty,
    projector: Projector,
    stdin: Option<&'a Stdin>,
    control: RunControl,
    stop: Stop,
    /// A chat's turns: their bookkeeping (completion line, session handle) is kept for the end
    /// instead of printed after each turn.
    pub(crate) turns: Option<Turns>,
    /// A chat at a terminal, on an agent that can be steered: a line typed while a turn runs
    /// steers it (`RunControl::steer`) instead of waiting for the next turn.
    pub(crate) steer_from: Option<&'a Stdin>,
}

/// What a chat prints once, at its end ([`Viewer::turns`]).
#[derive(Default)]
pub(crate) struct Turns {
    /// Turns that completed.
    pub(crate) completed: u32,
    /// The session handle to resume with, as the last turn gave it.
    pub(crate) session: Option<String>,
}

impl<'a> Viewer<'a> {
    /// A viewer for `handle` and the runs or turns after it; `stdin` answers requests when given.
    pub(crate) fn new(
        options: &'a RunOptions,
        stdin: Option<&'a Stdin>,
        stop: &Stop,
        handle: &RunHandle,
    ) -> Self {
        Self {
            options,
            out: Stdout::new(),
            pretty: Pretty::default(),
            projector: projector_for(options, handle),
            stdin,
            control: handle.control(),
            stop: stop.clone(),
            turns: None,
            steer_from: None,
        }
    }

    /// Shows `handle`'s events and answers its requests until it completes; reports the
    /// completion on stderr as `what` and returns the exit code (`None`: a second signal forces
    /// the exit now). A first signal cancels the run.
    pub(crate) async fn follow(&mut self, handle: RunHandle, what: &str) -> Option<ExitCode> {
        self.projector = projector_for(self.options, &handle);
        self.control = handle.control();
        let kind = handle.agent_kind().clone();
        let (mut events, completion) = handle.into_universal();
        let mut signalled = self.stop.cancel.is_cancelled();
        if signalled {
            self.control.cancel();
        }
        let mut steer_from = self.steer_from;
        loop {
            let event = tokio::select! {
                biased;
                _ = self.stop.force.cancelled() => return None,
                _ = self.stop.cancel.cancelled(), if !signalled => {
                    signalled = true;
                    self.control.cancel();
                    continue;
                }
                event = events.next() => event,
                line = next_line(steer_from) => {
                    match line {
                        Some(line) => steer(&self.control, line),
                        None => steer_from = None,
                    }
                    continue;
                }
            };
            let Some(event) = event else { break };
            self.show(&event);
            self.answer(&event).await;
        }
        let result = tokio::select! {
            biased;
            _ = self.stop.force.cancelled() => return None,
            result = completion => result,
        };
        Some(match result {
            Ok(done) => {
                // One line to resume with (`agent-api run --resume '<json>' ...`), for a live run
                // whose session outlives this process (the backend's answer: an agent may keep
                // its sessions in this process's memory).
                let resumable =
                    self.options.answers && agent_api_builtin::sessions_outlive_this_process(&kind);
                let session = done
                    .session
                    .as_ref()
                    .filter(|_| resumable)
                    .map(|s| display::line(&s.to_json(), 4096));
                if let Some(turns) = &mut self.turns {
                    turns.completed += 1;
                    turns.session = session.or(turns.session.take());
                } else {
                    let session_id =
                        display::line(done.native_session_id.as_deref().unwrap_or("none"), 128);
                    let usage = done
                        .usage
                        .as_ref()
                        .map(usage_line)
                        .filter(|u| !u.is_empty())
                        .map(|u| format!("; {u}"))
                        .unwrap_or_default();
                    let via = done
                        .launcher
                        .as_deref()
                        .filter(|l| *l != "local")
                        .map(|l| format!("; via {l}"))
                        .unwrap_or_default();
                    eprintln!("agent-api: {what} completed (session {session_id}{usage}{via})");
                    if let Some(session) = session {
                        eprintln!("agent-api: session: {session}");
                    }
                }
                if let Some(value) = &done.structured_output {
                    // The parsed answer of `--json-schema`, last on stdout, as one JSON line, escaped as
                    // every JSON line this tool prints is: no bidi or line separator reaches the terminal.
                    self.out.write_with(|out| display::write_json(out, value));
                }
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!(
                    "agent-api: {what} failed: {}",
                    display::line(&error.to_string(), 1024)
                );
                // Why it died, in its own words: its last stderr lines (bounded, secrets masked).
                if let agent_api::AgentError::ProcessExited { stderr, .. } = &error {
                    for line in stderr {
                        eprintln!("agent-api:   stderr: {}", display::line(line, 512));
                    }
                }
                ExitCode::FAILURE
            }
        })
    }

    /// Prints one event as `--view` and `--format` say; a closed stdout cancels the run.
    pub(crate) fn show(&mut self, event: &UniversalEvent) {
        if self.out.is_closed() {
            return;
        }
        let (pretty, projector) = (&mut self.pretty, &mut self.projector);
        let written = match (self.options.view, self.options.format) {
            (View::Universal, Format::Jsonl) => self.out.write_with(|out| display::write_json(out, event)),
            (View::Universal, Format::Pretty) => self.out.write_with(|out| pretty.universal(out, event)),
            (View::Wrapper, Format::Jsonl) => {
                self.out.write_with(|out| projector.project(event).iter().try_for_each(|wrapper| display::write_json(out, wrapper)))
            }
            (View::Wrapper, Format::Pretty) => self.out.write_with(|out| {
                for wrapper in projector.project(event) {
                    pretty.wrapper(out, &wrapper)?;
                }
                pretty.tool(out, event)?;
                pretty.permission_resolved(out, event)?;
                if matches!(&event.body, UniversalEventBody::ItemCompleted(d) if d.item.kind == ItemKind::Message) {
                    pretty.end_of_message(out)?;
                }
                Ok(())
            }),
        };
        if !written {
            eprintln!("agent-api: stdout was closed; cancelling the run");
            self.control.cancel();
        }
    }

    /// Answers a permission request or question: on a terminal by asking, otherwise as
    /// `--approve` says (questions are rejected without a terminal).
    async fn answer(&mut self, event: &UniversalEvent) {
        if !self.options.answers {
            return;
        }
        match &event.body {
            // With --approve all or none the request's policy decides in the backend.
            UniversalEventBody::PermissionRequested(p) if self.options.approve == Approve::Ask => {
                let decision = match &self.stdin {
                    Some(stdin) => {
                        match stdin.ask(&permission_prompt(p), &self.stop.cancel).await {
                            Some(answer) if answer.trim().eq_ignore_ascii_case("y") => {
                                PermissionDecision::Allow
                            }
                            Some(_) => PermissionDecision::Deny {
                                message: Some("denied at the terminal".into()),
                            },
                            None if self.stop.cancel.is_cancelled() => PermissionDecision::Deny {
                                message: Some("the run was cancelled".into()),
                            },
                            None => PermissionDecision::Deny {
                                message: Some("no answer at the terminal".into()),
                            },
                        }
                    }
                    None => {
                        eprintln!(
                            "agent-api: no terminal to ask; denying {}",
                            permission_summary(p)
                        );
                        PermissionDecision::Deny {
                            message: Some("no terminal to ask".into()),
                        }
                    }
                };
                let _ = self
                    .control
                    .respond_permission(&p.permission_id, decision)
                    .await;
            }
            UniversalEventBody::QuestionRequested(q) => {
                let answer = match &self.stdin {
                    Some(stdin) => match stdin.ask(&question_prompt(q), &self.stop.cancel).await {
                        Some(text) => QuestionAnswer::Text(text.trim().to_string()),
                        None => QuestionAnswer::Reject,
                    },
                    // As a permission without a terminal is denied: the agent hears no, and goes on.
                    None => {
                        eprintln!(
                            "agent-api: no terminal to ask; declining the question {}",
                            display::line(&q.prompt, 300)
                        );
                        QuestionAnswer::Reject
                    }
                };
                let _ = self.control.answer_question(&q.question_id, answer).await;
            }
            _ => {}
        }
    }
}
