//! `agent-api chat`: a conversation on one warm session, one turn per line typed at the
//! terminal (or per line of stdin when it is not a terminal), each turn's events shown as
//! `run` shows a run's.
//!
//! A line `/mode M` switches the session's mode for the next turns (`Session::set_mode`) where
//! the agent can. At a terminal, a line typed while a turn runs steers that turn
//! (`RunControl::steer`) on an agent that can be steered (`agent_api.control.steer`), and says so;
//! on any other agent (or from a pipe) it is the next turn's prompt. A signal cancels the turn in progress and ends the chat; end of input ends it too. Exit
//! status: 0 every turn succeeded, 1 one failed (or the session could not open or closed), 130
//! stopped by a signal.

use std::io::IsTerminal;
use std::process::ExitCode;

use agent_api::display;

use crate::agents::{gateway, parse_kind};
use crate::output::finish;
use crate::prompt::Stdin;
use crate::run::{chosen_kind, request_of, RunOptions, Viewer, SIGNALLED_EXIT};
use crate::signals::Stop;
use crate::Format;

/// Holds the conversation.
pub(crate) async fn chat(options: RunOptions) -> Result<ExitCode, String> {
    let stop = Stop::listen().map_err(|e| format!("cannot listen for signals: {e}"))?;
    let kind = chosen_kind(&options);
    let backend = crate::agents::backend(&kind)?;
    let request = request_of(&options, backend.as_ref())?;
    let steerable = backend
        .info()
        .capabilities
        .contains(agent_api::capabilities::CONTROL_STEER);
    let Some(opened) = stop
        .unless_signalled(gateway().open_session(&parse_kind(&kind)?, request))
        .await
    else {
        return Ok(ExitCode::from(SIGNALLED_EXIT));
    };
    let mut session = match opened {
        Ok(session) => session,
        Err(error) => {
            eprintln!("agent-api: {}", display::line(&error.to_string(), 1024));
            return Ok(ExitCode::FAILURE);
        }
    };
    let terminal = std::io::stdin().is_terminal();
    let input = Stdin::start();
    // Requests are asked at the terminal only, as in `run`; otherwise `--approve` decides.
    let asks = (terminal && options.format == Format::Pretty).then_some(&input);
    let mut viewer: Option<Viewer<'_>> = None;
    let mut code = ExitCode::SUCCESS;
    let mut turn = 0;
    while let Some(line) = input
        .ask(if terminal { "you> " } else { "" }, &stop.cancel)
        .await
    {
        let prompt = line.trim();
        if prompt.is_empty() {
            continue;
        }
        // `/mode M` between turns switches the session's mode where the agent can; a refusal
        // (an unknown mode, an agent that cannot switch) is said and the chat goes on.
        if let Some(mode) = prompt
            .strip_prefix("/mode ")
            .map(str::trim)
            .filter(|m| !m.is_empty())
        {
            match session
                .set_mode(agent_api::request::AgentMode::parse(mode))
                .await
            {
                Ok(()) => eprintln!("agent-api: mode {}", display::line(mode, 64)),
                Err(error) => eprintln!("agent-api: {}", display::line(&error.to_string(), 1024)),
            }
            continue;
        }
        let handle = match session.send(prompt).await {
            Ok(handle) => handle,
            Err(error) => {
                eprintln!("agent-api: {}", display::line(&error.to_string(), 1024));
                code = ExitCode::FAILURE;
                break;
            }
        };
        turn += 1;
        let viewer = viewer.get_or_insert_with(|| {
            let mut viewer = Viewer::new(&options, asks, &stop, &handle);
            // The conversation on screen; its bookkeeping once, at the end.
            viewer.turns = Some(Default::default());
            viewer.pretty.hide_user = terminal;
            viewer.steer_from = (terminal && steerable).then_some(&input);
            viewer
        });
        match viewer.follow(handle, &format!("{kind} turn {turn}")).await {
            None => return Ok(ExitCode::from(SIGNALLED_EXIT)),
            Some(ExitCode::SUCCESS) => {}
            Some(failed) => code = failed,
        }
        if stop.cancel.is_cancelled() {
            break;
        }
    }
    let trailing = session.close().await.unwrap_or_default();
    let code = if stop.cancel.is_cancelled() {
        ExitCode::from(SIGNALLED_EXIT)
    } else {
        code
    };
    Ok(match viewer {
        Some(mut viewer) => {
            trailing.iter().for_each(|event| viewer.show(event));
            let turns = viewer.turns.take().unwrap_or_default();
            eprintln!(
                "agent-api: {kind} chat ended after {} completed turn(s)",
                turns.completed
            );
            if let Some(session) = turns.session {
                eprintln!("agent-api: session: {session}");
            }
            finish(viewer.out, code)
        }
        None => code,
    })
}
