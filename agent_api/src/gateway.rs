//! [`Gateway`]: routes runs to backends by agent kind.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::contract::backend::AgentBackend;
use crate::contract::handle::RunHandle;
use crate::vocabulary::capability::CapabilitySet;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::kind::AgentKind;
use crate::vocabulary::request::RunRequest;

/// A registry of backends by kind.
///
/// ```
/// # async fn demo(backend: std::sync::Arc<dyn agent_api::AgentBackend>) -> Result<(), agent_api::AgentError> {
/// let mut gateway = agent_api::Gateway::new();
/// gateway.register(backend)?;
/// for kind in gateway.kinds() {
///     println!("{kind}: {} capabilities", gateway.capabilities(&kind)?.len());
/// }
/// # Ok(()) }
/// ```
#[derive(Default, Clone)]
pub struct Gateway {
    backends: BTreeMap<AgentKind, Arc<dyn AgentBackend>>,
    buffer_budget: Option<usize>,
    launcher: Option<crate::vocabulary::launcher::Launcher>,
}

impl Gateway {
    /// An empty gateway.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the byte budget of every run this gateway starts whose request sets none.
    pub fn with_buffer_budget(mut self, bytes: usize) -> Self {
        self.buffer_budget = Some(bytes);
        self
    }

    /// Sets the launcher of every run this gateway starts whose request sets none (see
    /// [`crate::kit::launch`]).
    pub fn with_launcher(mut self, launcher: crate::vocabulary::launcher::Launcher) -> Self {
        self.launcher = Some(launcher);
        self
    }

    /// Fills what the request leaves to the gateway: its buffer budget and launcher.
    fn defaults(&self, request: &mut RunRequest) {
        request.buffer_budget = request.buffer_budget.or(self.buffer_budget);
        if request.launcher.is_none() {
            request.launcher = self.launcher.clone();
        }
    }

    /// A gateway with a backend for every CLI of `probes` installed on this machine (see
    /// [`crate::kit::detect`]), and what was found, in the order of `probes`.
    ///
    /// ```no_run
    /// # async fn demo(probes: &[agent_api::kit::detect::BackendProbe]) {
    /// let (gateway, found) = agent_api::Gateway::with_installed(probes).await;
    /// for cli in &found {
    ///     println!("{} {}", cli.kind, cli.version.as_deref().unwrap_or("unknown version"));
    /// }
    /// # let _ = gateway; }
    /// ```
    pub async fn with_installed(
        probes: &[crate::kit::detect::BackendProbe],
    ) -> (Self, Vec<crate::kit::detect::Installed>) {
        let mut gateway = Self::new();
        let mut found = Vec::new();
        for probe in probes {
            let Some(installed) = probe.detect().await else {
                continue;
            };
            if gateway
                .register((probe.build)(installed.binary.clone()))
                .is_ok()
            {
                found.push(installed);
            }
        }
        (gateway, found)
    }

    /// Registers a backend under its kind; a second backend of the same kind is an error.
    pub fn register(&mut self, backend: Arc<dyn AgentBackend>) -> Result<(), AgentError> {
        let kind = backend.info().kind.clone();
        if self.backends.contains_key(&kind) {
            return Err(AgentError::DuplicateBackend {
                kind: kind.to_string(),
            });
        }
        self.backends.insert(kind, backend);
        Ok(())
    }

    /// The registered kinds, sorted.
    pub fn kinds(&self) -> Vec<AgentKind> {
        self.backends.keys().cloned().collect()
    }

    /// The backend of a kind.
    pub fn backend(&self, kind: &AgentKind) -> Result<&Arc<dyn AgentBackend>, AgentError> {
        self.backends
            .get(kind)
            .ok_or_else(|| AgentError::UnknownBackend {
                kind: kind.to_string(),
            })
    }

    /// What the backend of a kind is: its capabilities, options, mappings, modes and variants.
    pub fn info(&self, kind: &AgentKind) -> Result<&crate::BackendInfo, AgentError> {
        Ok(self.backend(kind)?.info())
    }

    /// The capabilities a kind advertises.
    pub fn capabilities(&self, kind: &AgentKind) -> Result<CapabilitySet, AgentError> {
        Ok(self.info(kind)?.capabilities.clone())
    }

    /// Validates the request against the backend, then runs it. A feature the backend lacks is
    /// an `UnsupportedCapability` error naming the id, before anything is spawned.
    pub async fn run(
        &self,
        kind: &AgentKind,
        mut request: RunRequest,
    ) -> Result<RunHandle, AgentError> {
        self.defaults(&mut request);
        let backend = self.backend(kind)?;
        let (request, _) = crate::snapshot::restore(backend.as_ref(), request).await?;
        backend.validate(&request)?;
        backend.run(request).await
    }

    /// Opens a session (`spec/run-protocol.md` §8) on the backend of `kind`, with `request` as
    /// the template of every turn (its prompt is ignored): a warm session where the backend
    /// advertises `agent_api.session.warm`, else a session resuming per turn
    /// ([`crate::Session::resuming`]) where it advertises `agent_api.session.resume_per_turn`,
    /// else `UnsupportedCapability` naming `agent_api.session.warm`.
    pub async fn open_session(
        &self,
        kind: &AgentKind,
        mut request: RunRequest,
    ) -> Result<crate::contract::session::Session, AgentError> {
        self.defaults(&mut request);
        let backend = self.backend(kind)?;
        let capabilities = backend.info().capabilities.clone();
        let (request, restored) = crate::snapshot::restore(backend.as_ref(), request).await?;
        backend.validate_session_template(&request)?;
        let session = if capabilities.contains(agent_api_capabilities::SESSION_WARM) {
            Some(backend.open_session(request.clone()).await?)
        } else if capabilities.contains(agent_api_capabilities::SESSION_RESUME_PER_TURN) {
            Some(crate::contract::session::Session::resuming(
                backend.clone(),
                request.clone(),
            ))
        } else {
            None
        };
        if let Some(session) = session {
            return Ok(crate::snapshot::BackendSnapshots::attach(
                session,
                backend.clone(),
                request,
                restored,
            ));
        }
        Err(AgentError::UnsupportedCapability {
            kind: kind.to_string(),
            capability: agent_api_capabilities::SESSION_WARM.into(),
        })
    }

    /// The stored sessions of `kind`'s agent that `query` selects, newest first
    /// (`agent_api.history.list`).
    pub async fn list_sessions(
        &self,
        kind: &AgentKind,
        query: &crate::history::SessionQuery,
    ) -> Result<Vec<crate::history::StoredSession>, AgentError> {
        self.session_store(kind, agent_api_capabilities::HISTORY_LIST)?
            .list_sessions(query)
            .await
    }

    /// Reads the stored session `id` of `kind`'s agent back as a run (`agent_api.history.read`).
    pub async fn read_session(
        &self,
        kind: &AgentKind,
        id: &str,
        include_raw: bool,
    ) -> Result<RunHandle, AgentError> {
        crate::history::check_session_id(id)?;
        self.session_store(kind, agent_api_capabilities::HISTORY_READ)?
            .read_session(id, include_raw)
            .await
    }

    fn session_store(
        &self,
        kind: &AgentKind,
        capability: &str,
    ) -> Result<Arc<dyn crate::history::SessionStore>, AgentError> {
        self.backend(kind)?
            .session_store()
            .ok_or_else(|| AgentError::UnsupportedCapability {
                kind: kind.to_string(),
                capability: capability.into(),
            })
    }
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("kinds", &self.kinds())
            .finish()
    }
}
