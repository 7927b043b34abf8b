//! What a server does on its own while it runs: renews its heartbeat in the store (so that the
//! servers sharing it know it runs), releases the agents of idle sessions (`--idle-release`), and
//! ends sessions idle past `--session-idle-ttl`.

use std::sync::Weak;
use std::time::Duration;

use crate::state::{Inner, Server};
use crate::store::SessionState;

/// The longest pause between two rounds.
const MAX_TICK: Duration = Duration::from_secs(10);

/// The pause between two rounds: a third of the shortest bound it keeps, within 50 ms..10 s.
fn tick(config: &crate::ServerConfig) -> Duration {
    [
        Some(config.heartbeat.unwrap_or(config.server_lease / 3)),
        config.idle_release.map(|bound| bound / 3),
        config.session_idle_ttl.map(|bound| bound / 3),
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(MAX_TICK)
    .clamp(Duration::from_millis(50), MAX_TICK)
}

/// Runs the rounds until the server stops (or is dropped).
pub(crate) async fn run(server: Weak<Inner>, stopping: agent_api::request::CancellationToken) {
    loop {
        let Some(inner) = server.upgrade() else {
            return;
        };
        let pause = tick(&inner.config);
        let server = Server { inner };
        round(&server).await;
        drop(server);
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = stopping.cancelled() => return,
        }
    }
}

async fn round(server: &Server) {
    let store = &server.inner.store;
    // What runs here now, taken before the store says what this server owns: a session
    // brought back meanwhile is claimed before this read.
    let running = server.running();
    if let Err(error) = store.heartbeat(server.daemon_id()).await {
        tracing::warn!("cannot renew this server's heartbeat in the store: {error}");
    }
    let_go_of_lost(server, running).await;
    if let Some(after) = server.inner.config.idle_release {
        for live in server.running() {
            let idle = live.idle_for().is_some_and(|idle| idle >= after);
            if idle && live.subscribers() == 0 && !live.ended() {
                // Not when a message came meanwhile: its turn goes on.
                let released = live.release_if_idle(SessionState::Idle).await;
                if released == Some(true) {
                    server.forget(&live.id);
                    tracing::debug!(session = %live.id, "released the idle session's agent");
                }
            }
        }
    }
    if let Some(ttl) = server.inner.config.session_idle_ttl {
        if let Err(error) = end_idle(server, ttl).await {
            tracing::warn!("cannot end the sessions idle past --session-idle-ttl: {error}");
        }
    }
}

/// Stops the agents of the sessions another server claimed while this one could not renew its
/// lease (it was paused, or cut from the store): they are no longer its own.
async fn let_go_of_lost(server: &Server, running: Vec<std::sync::Arc<crate::live::LiveSession>>) {
    if running.is_empty() || server.inner.store.fleet().is_none() {
        return;
    }
    let owned: std::collections::HashMap<String, u64> =
        match server.inner.store.owned(server.daemon_id()).await {
            Ok(owned) => owned.into_iter().collect(),
            Err(error) => {
                tracing::warn!("cannot read which sessions this server owns: {error}");
                return;
            }
        };
    for live in running {
        if live.ended() || owned.get(&live.id) == Some(&live.epoch) {
            continue;
        }
        let error = crate::store::StoreError::NotOwner {
            session: live.id.clone(),
            owner: String::new(),
        };
        live.lost(&error).await;
    }
}

/// Ends the sessions that took no turn nor event for `ttl`: this server's, and those whose
/// server is gone; another running server ends its own.
async fn end_idle(server: &Server, ttl: Duration) -> Result<(), crate::ApiError> {
    let now = crate::store::unix_now();
    let ttl_secs = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    let message = format!(
        "idle for longer than --session-idle-ttl ({} s)",
        ttl.as_secs()
    );
    for record in server.inner.store.sessions().await? {
        let stale = record
            .active_at
            .is_some_and(|at| now.saturating_sub(at) >= ttl_secs);
        if record.ended || !stale {
            continue;
        }
        if let Some(live) = server.live(&record.id) {
            if live.idle_for().is_some_and(|idle| idle >= ttl) {
                live.terminate_with(Some(&message)).await?;
                server.forget(&record.id);
            }
            continue;
        }
        if server.owner_elsewhere(&record).await?.is_some() {
            continue;
        }
        server
            .end_stored(&record, "terminated", Some(&message))
            .await?;
    }
    Ok(())
}
