//! `agent-api history`: the agents' own stored sessions. Without a session id it lists them
//! (newest first; with `--cwd`, those that ran there); with one it prints that session's events
//! as `run` prints a run's and exits as `run` would have.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use agent_api::display;
use agent_api::history::{SessionQuery, StoredSession};
use serde_json::json;

use crate::agents::{gateway, parse_kind};
use crate::output::{finish, Stdout};
use crate::run::{show_run, RunOptions};
use crate::signals::Stop;
use crate::Format;

/// Lists the stored sessions of `options.agent`, or shows the one named `session`.
pub(crate) async fn history(
    options: RunOptions,
    cwd: Option<PathBuf>,
    session: Option<String>,
) -> Result<ExitCode, String> {
    let kind_name = options.agent.clone().unwrap_or_default();
    crate::agents::backend(&kind_name)?;
    let kind = parse_kind(&kind_name)?;
    let gateway = gateway();
    let Some(id) = session else {
        let query = cwd.map(SessionQuery::in_dir).unwrap_or_default();
        let sessions = gateway
            .list_sessions(&kind, &query)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(print_list(&sessions, options.format));
    };
    let stop = Stop::listen().map_err(|e| format!("cannot listen for signals: {e}"))?;
    let handle = gateway
        .read_session(&kind, &id, options.include_raw)
        .await
        .map_err(|e| e.to_string())?;
    Ok(show_run(
        &options,
        handle,
        &format!("stored {kind_name} session"),
        &stop,
        None,
    )
    .await)
}

fn print_list(sessions: &[StoredSession], format: Format) -> ExitCode {
    let mut out = Stdout::new();
    for session in sessions {
        let time = session.time.map(rfc3339);
        let cwd = session
            .cwd
            .as_ref()
            .map(|c| c.to_string_lossy().into_owned());
        let written = match format {
            Format::Jsonl => {
                let (first_prompt, title) = (&session.first_prompt, &session.title);
                let line = json!({ "id": session.id, "time": time, "cwd": cwd, "first_prompt": first_prompt, "title": title, "size": session.size });
                out.line(&line.to_string())
            }
            Format::Pretty => out.line(&format!(
                "{}  {}  {}  {}  {}",
                display::line(&session.id, 128),
                time.as_deref().unwrap_or("-"),
                display::line(cwd.as_deref().unwrap_or("-"), 256),
                session
                    .size
                    .map_or("-".to_string(), |s| format!("{s} bytes")),
                display::line(
                    session
                        .first_prompt
                        .as_deref()
                        .or(session.title.as_deref())
                        .unwrap_or(""),
                    200
                ),
            )),
        };
        if !written {
            break;
        }
    }
    finish(out, ExitCode::SUCCESS)
}

fn rfc3339(time: SystemTime) -> String {
    let time = time::OffsetDateTime::from(time);
    time.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
