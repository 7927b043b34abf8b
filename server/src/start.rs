//! Starting a [`Server`]: its identity and heartbeat in the store, and what runs beside its
//! sessions while it lives (the fleet's listener, the upkeep, the webhooks' worker). Here, above
//! them all, so that none of them needs the file that starts it.

use std::sync::Arc;

use agent_api::{Gateway, RunRequest};

use crate::config::ServerConfig;
use crate::state::Server;
use crate::store::{Store, StoreError};

impl Server {
    /// A server running sessions on `gateway`'s backends, each from the template `defaults`
    /// (its prompt is ignored), keeping them in `store`. Its identity
    /// ([`Server::daemon_id`]) is the configured name followed by a part no other process
    /// shares; it says it runs with a heartbeat in the store, renewed while it runs. Sessions
    /// another server left open are not touched: they are resumable, and the next message to one
    /// brings it back here. Agents a killed server left running are stopped first
    /// ([`agent_api::kit::process::stop_orphans`]).
    pub async fn new(
        gateway: Gateway,
        defaults: RunRequest,
        store: Arc<dyn Store>,
        config: ServerConfig,
    ) -> Result<Self, StoreError> {
        let daemon_id = unique_id(&config.daemon_id);
        store.heartbeat(&daemon_id).await?;
        // Before any event is stored: from now on each one a webhook takes is queued with it.
        if let Some(webhooks) = &config.webhooks {
            store.set_outbox(std::sync::Arc::new(webhooks.rules()))?;
        }
        let stopped = agent_api::kit::process::stop_orphans();
        if stopped > 0 {
            tracing::warn!("stopped {stopped} agent processes a killed server left running");
        }
        let server = Self::assemble(gateway, defaults, store, config, daemon_id);
        if let Some(fleet) = server.inner.store.fleet() {
            tokio::spawn(crate::fleet::listen(
                Arc::downgrade(&server.inner),
                fleet.notices(),
                server.inner.stopping.clone(),
            ));
        }
        tokio::spawn(crate::upkeep::run(
            Arc::downgrade(&server.inner),
            server.inner.stopping.clone(),
        ));
        if let Some(webhooks) = &server.inner.config.webhooks {
            tokio::spawn(crate::webhooks::run(crate::webhooks::Worker {
                store: server.inner.store.clone(),
                config: Arc::new(webhooks.clone()),
                server: server.daemon_id().to_string(),
                metrics: server.inner.metrics.clone(),
                stopping: server.inner.stopping.clone(),
            }));
        }
        Ok(server)
    }
}

/// `name` followed by what no other process shares: this process's id and 64 random bits.
fn unique_id(name: &str) -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    let random: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{name}-{}-{random}", std::process::id())
}
