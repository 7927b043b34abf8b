//! SIGINT, SIGTERM and SIGHUP: the first cancels the run cleanly (the agent is interrupted, its
//! processes are reaped and the run ends with its one terminal event); the second forces the end
//! at once (the run is dropped, which kills everything it started).

use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

/// What the signals asked for so far.
#[derive(Clone, Default)]
pub(crate) struct Stop {
    /// Fired by the first signal: cancel the run, abandon any open prompt.
    pub cancel: CancellationToken,
    /// Fired by the second: stop waiting for the run.
    pub force: CancellationToken,
}

impl Stop {
    /// Starts listening for the three signals; their default action (ending this process at once
    /// and leaving the agent running) is replaced from now on.
    pub(crate) fn listen() -> std::io::Result<Self> {
        let stop = Self::default();
        for kind in [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
        ] {
            let mut stream = signal(kind)?;
            let state = stop.clone();
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    state.on_signal();
                }
            });
        }
        Ok(stop)
    }

    /// `start`'s output, or `None` when a signal comes first: nothing that starts a run (a spawn,
    /// a handshake) can keep a signal from ending the program. Dropping `start` stops whatever it
    /// began.
    pub(crate) async fn unless_signalled<T>(
        &self,
        start: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => None,
            started = start => Some(started),
        }
    }

    fn on_signal(&self) {
        if self.cancel.is_cancelled() {
            eprintln!("agent-api: second signal; stopping now");
            self.force.cancel();
        } else {
            eprintln!("\nagent-api: cancelling (a second signal forces)");
            self.cancel.cancel();
        }
    }
}
