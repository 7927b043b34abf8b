//! The flags for running many agents side by side (issue 24): separate timeouts.

use std::time::Duration;

use agent_api::RunRequest;
use clap::Args;

/// Timeouts beside `--timeout`, each ending the run with a timeout error that names it.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct FleetFlags {
    /// Stop the run if the agent has not sent its first message after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    startup_timeout: Option<u64>,
    /// Stop the run after this many seconds without output from the agent.
    #[arg(long, value_name = "SECONDS")]
    idle_timeout: Option<u64>,
    /// Stop each turn (a run is one turn) after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    turn_timeout: Option<u64>,
}

impl FleetFlags {
    /// `request` with what these flags set.
    pub(crate) fn apply(&self, mut request: RunRequest) -> RunRequest {
        if let Some(secs) = self.startup_timeout {
            request = request.with_startup_timeout(Duration::from_secs(secs));
        }
        if let Some(secs) = self.idle_timeout {
            request = request.with_idle_timeout(Duration::from_secs(secs));
        }
        if let Some(secs) = self.turn_timeout {
            request = request.with_turn_timeout(Duration::from_secs(secs));
        }
        request
    }
}
