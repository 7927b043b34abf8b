//! `agent-api replay`: a saved native log in, JSONL events out.

use std::path::Path;
use std::process::ExitCode;

use agent_api::kit::replay::{replay as replay_recording, ReplayOptions};
use futures::StreamExt;

use crate::agents::backend;
use crate::output::{finish, Stdout};
use crate::View;

/// Replays `file` (or stdin for `-`) through the agent's protocol and prints JSONL events.
pub(crate) async fn replay(agent: &str, view: View, include_raw: bool, file: &Path) -> Result<ExitCode, String> {
    let backend = backend(agent)?;
    let handle = if file == Path::new("-") {
        replay_recording(backend.as_ref(), tokio::io::stdin(), ReplayOptions::default().include_raw(include_raw)).await
    } else {
        let reader = tokio::fs::File::open(file).await.map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        replay_recording(backend.as_ref(), reader, ReplayOptions::beside(file).include_raw(include_raw)).await
    }
    .map_err(|e| e.to_string())?;
    let mut out = Stdout::new();
    match view {
        View::Wrapper => {
            let (mut events, completion) = handle.into_wrapper();
            while let Some(event) = events.next().await {
                if !out.write_with(|w| agent_api::display::write_json(w, &event)) {
                    break;
                }
            }
            let _ = completion.await;
        }
        View::Universal => {
            let (mut events, completion) = handle.into_universal();
            while let Some(event) = events.next().await {
                if !out.write_with(|w| agent_api::display::write_json(w, &event)) {
                    break;
                }
            }
            let _ = completion.await;
        }
    }
    Ok(finish(out, ExitCode::SUCCESS))
}
