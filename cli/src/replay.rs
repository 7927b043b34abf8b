//! `agent-api replay`: a saved native log in, events out, shown and ended as `run` shows and
//! ends a live run (same `--format` and `--view`; exit 1 when the replayed run failed).

use std::path::Path;
use std::process::ExitCode;

use agent_api::kit::replay::{replay as replay_recording, ReplayOptions};

use crate::agents::replayer;
use crate::run::{show_run, RunOptions};
use crate::signals::Stop;

/// Replays `file` (or stdin for `-`) through the protocol of `options.agent` and prints its events.
pub(crate) async fn replay(options: RunOptions, file: &Path) -> Result<ExitCode, String> {
    let stop = Stop::listen().map_err(|e| format!("cannot listen for signals: {e}"))?;
    let kind = options.agent.clone().unwrap_or_default();
    let backend = replayer(&kind)?;
    let include_raw = options.include_raw;
    // A file of any built-in agent's own store is refused, whichever agent replays it.
    let stores = agent_api_builtin::replayers();
    let handle = if file == Path::new("-") {
        replay_recording(
            backend.as_ref(),
            tokio::io::stdin(),
            ReplayOptions::default()
                .include_raw(include_raw)
                .refusing_stores_of(stores),
        )
        .await
    } else {
        let reader = tokio::fs::File::open(file)
            .await
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        replay_recording(
            backend.as_ref(),
            reader,
            ReplayOptions::beside(file)
                .include_raw(include_raw)
                .refusing_stores_of(stores),
        )
        .await
    }
    .map_err(|e| e.to_string())?;
    Ok(show_run(
        &options,
        handle,
        &format!("replayed {kind} run"),
        &stop,
        None,
    )
    .await)
}
