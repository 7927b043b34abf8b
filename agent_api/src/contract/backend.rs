//! [`AgentBackend`]: the one trait every agent implements.

use async_trait::async_trait;

use crate::contract::handle::RunHandle;
use crate::vocabulary::backend_info::BackendInfo;
use crate::vocabulary::capability::CapabilitySet;
use crate::vocabulary::error::AgentError;
use crate::vocabulary::kind::AgentKind;
use crate::vocabulary::request::RunRequest;

/// An agent that can run prompts. Implement `info` (what the backend is, as data) and `run`;
/// the kit in [`crate::kit`] does the spawning, reading, bounding and cancelling.
#[async_trait]
pub trait AgentBackend: Send + Sync {
    /// What the backend is: its kind, capabilities, options, option mappings, modes and
    /// variants, as one value built once ([`BackendInfo`]).
    fn info(&self) -> &BackendInfo;

    /// The option a run of `request` still needs before this backend can start anything (the
    /// generic ACP kind's command line, when neither the request nor the backend's config names
    /// one), found without starting anything; `None` when it needs nothing more it can tell.
    /// `agent-api serve` lists an agent whose sessions' template lacks it as not installed, naming
    /// the option (`GET /v1/agents`). The default needs nothing.
    fn missing_option(&self, request: &RunRequest) -> Option<&'static str> {
        let _ = request;
        None
    }

    /// Starts a run. Validation errors come back before anything is spawned.
    async fn run(&self, request: RunRequest) -> Result<RunHandle, AgentError>;

    /// Opens a warm session (`spec/run-protocol.md` §8) with `request` as the template of every
    /// turn (its prompt is ignored). A backend advertising `agent_api.session.warm` overrides
    /// this; the default refuses. [`crate::Gateway::open_session`] falls back to resuming per turn.
    async fn open_session(
        &self,
        request: RunRequest,
    ) -> Result<crate::contract::session::Session, AgentError> {
        let _ = request;
        Err(AgentError::UnsupportedCapability {
            kind: self.info().kind.to_string(),
            capability: agent_api_capabilities::SESSION_WARM.into(),
        })
    }

    /// Exports the agent's own state for the native session `session` from the home `request`
    /// names (its environment, home and launcher, as a run of it would find them), bounded and
    /// confined to the files the backend names for that session (`agent_api.session.snapshot`).
    /// A session whose files are over [`crate::snapshot::SNAPSHOT_FILES_BOUND`] is exported as
    /// [`crate::snapshot::Continuity::Replay`], flagged. The default refuses.
    async fn export_snapshot(
        &self,
        request: &RunRequest,
        session: &crate::vocabulary::session_ref::SessionRef,
    ) -> Result<crate::vocabulary::snapshot::SessionSnapshot, AgentError> {
        let _ = (request, session);
        Err(AgentError::UnsupportedCapability {
            kind: self.info().kind.to_string(),
            capability: agent_api_capabilities::SESSION_SNAPSHOT.into(),
        })
    }

    /// Imports `snapshot` into the home `request` names, re-keyed to the request's working
    /// directory where the agent keys its sessions by it, so that a run resuming the snapshot's
    /// session there continues it natively. Files are written confined to the home, with the
    /// home's private modes; a file the home already holds in a newer version is kept (newest
    /// wins, said in the returned [`crate::snapshot::SnapshotImport`]). The default refuses.
    async fn import_snapshot(
        &self,
        request: &RunRequest,
        snapshot: &crate::vocabulary::snapshot::SessionSnapshot,
    ) -> Result<crate::vocabulary::snapshot::SnapshotImport, AgentError> {
        let _ = (request, snapshot);
        Err(AgentError::UnsupportedCapability {
            kind: self.info().kind.to_string(),
            capability: agent_api_capabilities::SESSION_SNAPSHOT.into(),
        })
    }

    /// The agent's own session store (`agent_api.history.*`), when the backend can read it.
    fn session_store(&self) -> Option<std::sync::Arc<dyn crate::contract::store::SessionStore>> {
        None
    }

    /// The backend's own checks of the session a request resumes or forks, after the generic
    /// ones ([`crate::request::SessionRef::check_id`]): the agent's id grammar (UUIDs only, say)
    /// and, where the agent's own store can say, that the session exists
    /// ([`AgentError::SessionNotFound`] otherwise). The default checks nothing more.
    fn check_session(&self, request: &RunRequest) -> Result<(), AgentError> {
        let _ = request;
        Ok(())
    }

    /// Checks a request against the backend's capabilities, extension keys, modes and
    /// variants; `run` calls it first, and so does the gateway.
    fn validate(&self, request: &RunRequest) -> Result<(), AgentError> {
        let info = self.info();
        validate_request(&info.kind, &info.capabilities, info.extension_keys, request)?;
        check_choices(&info.kind, info.modes, info.variants, request)?;
        self.check_session(request)
    }

    /// The checks of [`AgentBackend::validate`] but the prompt's, for a session's template
    /// ([`validate_template`] and the modes and variants); `open_session` calls it first, and so
    /// does the gateway.
    fn validate_session_template(&self, request: &RunRequest) -> Result<(), AgentError> {
        let info = self.info();
        validate_template(&info.kind, &info.capabilities, info.extension_keys, request)?;
        check_choices(&info.kind, info.modes, info.variants, request)?;
        self.check_session(request)
    }
}

/// The checks every run goes through before spawning: a non-empty prompt, a working directory
/// that exists and can be entered, every needed capability advertised, and only known extension keys.
pub fn validate_request(
    kind: &AgentKind,
    capabilities: &CapabilitySet,
    extension_keys: &[&str],
    request: &RunRequest,
) -> Result<(), AgentError> {
    if request.prompt.text.trim().is_empty() {
        return Err(AgentError::InvalidRequest {
            reason: "the prompt is empty".into(),
        });
    }
    validate_template(kind, capabilities, extension_keys, request)
}

/// The checks of [`validate_request`] but the prompt's: for a session's template, whose turns
/// bring their own prompts.
pub fn validate_template(
    kind: &AgentKind,
    capabilities: &CapabilitySet,
    extension_keys: &[&str],
    request: &RunRequest,
) -> Result<(), AgentError> {
    let launcher = request.launcher.clone().unwrap_or_default();
    // A far side's working directory is a path there, not here.
    if let (true, Some(dir)) = (
        launcher.is_local_filesystem(),
        request.session_working_dir(),
    ) {
        check_working_dir(dir)?;
    }
    // What this build cannot do at all explains a refusal best, then what the backend cannot do,
    // then whose session it is.
    for needed in request.required_capabilities() {
        crate::vocabulary::capability::check_built(needed)?;
    }
    for needed in request.required_capabilities() {
        if !capabilities.contains(needed) {
            return Err(AgentError::UnsupportedCapability {
                kind: kind.to_string(),
                capability: needed.to_string(),
            });
        }
    }
    if request.snapshot.is_some() {
        return Err(AgentError::InvalidRequest {
            reason: "the request's snapshot is not restored: run it through a Gateway, or call \
                     agent_api::snapshot::restore first"
                .into(),
        });
    }
    if let Some(session) = request.session.session_ref() {
        session.check_agent(kind)?;
        session.check_id()?;
    }
    request.check_new_session_id()?;
    crate::pipeline::images::ImageFile::check_all(&request.prompt)?;
    launcher.check_available()?;
    if let Some(key) = request
        .extensions
        .keys()
        .find(|k| !extension_keys.contains(&k.as_str()))
    {
        return Err(crate::vocabulary::options::unknown_key(
            kind.as_str(),
            key,
            extension_keys,
        ));
    }
    if let Some((which, _)) = request
        .timeouts()
        .each()
        .into_iter()
        .find(|(_, limit)| limit.is_some_and(|d| d.is_zero()))
    {
        return Err(AgentError::InvalidRequest {
            reason: format!("the {} timeout is zero", which.as_str()),
        });
    }
    let limits = &request.limits;
    if limits.max_turns == Some(0) {
        return Err(AgentError::InvalidRequest {
            reason: "the turn limit is zero".into(),
        });
    }
    if limits.max_total_tokens == Some(0) {
        return Err(AgentError::InvalidRequest {
            reason: "the token limit is zero".into(),
        });
    }
    // A cost limit that can never be reached (infinity) or that every cost passes (NaN compares
    // false with everything) would look set and hold nothing.
    if let Some(usd) = limits
        .max_cost_usd
        .filter(|usd| !usd.is_finite() || *usd <= 0.0)
    {
        return Err(AgentError::InvalidRequest {
            reason: format!(
                "the cost limit must be a positive finite number of US dollars, not {usd}"
            ),
        });
    }
    request.portable.validate()?;
    if let Some(schema) = &request.portable.output_schema {
        crate::pipeline::structured::check_schema(schema)?;
    }
    Ok(())
}

/// Refuses, before anything is spawned, a request whose mode or variant the backend does not
/// list: [`AgentError::UnknownMode`] or [`AgentError::UnknownVariant`], each with the valid values
/// (empty where the agent has none). [`crate::vocabulary::modes::AgentMode::Default`] always passes.
pub fn check_choices(
    kind: &AgentKind,
    modes: &[crate::vocabulary::modes::ModeInfo],
    variants: &[crate::vocabulary::modes::VariantSet],
    request: &RunRequest,
) -> Result<(), AgentError> {
    if let Some(mode) = request
        .mode
        .as_ref()
        .filter(|m| **m != crate::vocabulary::modes::AgentMode::Default)
    {
        crate::vocabulary::modes::check_mode(kind.as_str(), modes, mode)?;
    }
    if let Some(variant) = &request.variant {
        let valid = crate::vocabulary::modes::variants_for(variants, request.model.as_deref());
        if !valid.contains(&variant.as_str()) {
            return Err(AgentError::UnknownVariant {
                kind: kind.to_string(),
                variant: crate::guards::bounds::utf8_prefix(variant, 64).to_string(),
                model: request
                    .model
                    .as_deref()
                    .map(|m| crate::guards::bounds::utf8_prefix(m, 64).to_string()),
                valid: valid.iter().map(|v| v.to_string()).collect(),
            });
        }
    }
    Ok(())
}

/// Checks that the agent's working directory exists, is a directory and can be entered; else a
/// [`AgentError::WorkingDir`] saying which and why.
pub fn check_working_dir(dir: &std::path::Path) -> Result<(), AgentError> {
    use std::os::unix::ffi::OsStrExt;
    let error = |source: std::io::Error| AgentError::WorkingDir {
        path: dir.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(dir).map_err(error)?;
    if !meta.is_dir() {
        return Err(error(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        )));
    }
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| {
        error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path holds a NUL byte",
        ))
    })?;
    // SAFETY: access(2) reads the NUL-terminated path and touches no other memory.
    if unsafe { libc::access(path.as_ptr(), libc::X_OK) } != 0 {
        return Err(error(std::io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(all(test, not(feature = "structured-output")))]
mod without_structured_output {
    use super::*;

    #[test]
    fn a_request_with_a_schema_is_refused_before_spawn_naming_the_feature() {
        let request = RunRequest::new("x").with_portable(
            crate::PortableOptions::default().output_schema(serde_json::json!({"type": "object"})),
        );
        let error = validate_request(
            &AgentKind::from_static("my_agent"),
            &CapabilitySet::from_ids(request.required_capabilities()),
            &[],
            &request,
        )
        .unwrap_err();
        assert!(
            matches!(error, AgentError::FeatureNotBuilt { .. }),
            "{error}"
        );
    }
}
