//! Session snapshots (`agent_api.session.snapshot`, `spec/run-protocol.md` §8.4): an agent's own
//! state for one native session, taken after a turn ([`crate::Session::snapshot`]) and restored
//! into another home, on another machine, where the session resumes natively
//! ([`crate::RunRequest::with_snapshot`]).
//!
//! The [`crate::Gateway`] restores a request's snapshot before it runs or opens a session
//! ([`restore`]); a caller driving a backend directly calls [`restore`] itself. A snapshot that is
//! missing, cut short or damaged is a typed [`SnapshotError`] before anything is written; a
//! snapshot that says [`Continuity::Replay`] (its session was over the bound) is refused with
//! [`SnapshotError::ReplayOnly`]: whoever holds the transcript goes on by replay, and says so.

use std::sync::Arc;

use crate::contract::backend::AgentBackend;
use crate::contract::session::{Session, SnapshotSource};
use crate::vocabulary::error::AgentError;
use crate::vocabulary::request::{RunRequest, SessionSelector};
use crate::vocabulary::session_ref::SessionRef;
pub use crate::vocabulary::snapshot::{
    check_session_id, Continuity, FileChange, FileDelta, SessionSnapshot, SnapshotDelta,
    SnapshotError, SnapshotFile, SnapshotImport, SNAPSHOT_BOUND, SNAPSHOT_FILES_BOUND,
    SNAPSHOT_MAX_FILES, SNAPSHOT_VERSION,
};

/// `request` with its snapshot restored: imported into the run's home by `backend`
/// ([`AgentBackend::import_snapshot`]), and the session selector set to resume the snapshot's
/// native session in the request's working directory (the backend's default where it names
/// none: the files are re-keyed to it). A request without a snapshot comes back as it was.
///
/// Refused before anything is written: a backend without `agent_api.session.snapshot`, another
/// agent's snapshot, a snapshot whose names or version are refused, one that says replay.
pub async fn restore(
    backend: &dyn AgentBackend,
    mut request: RunRequest,
) -> Result<(RunRequest, Option<SnapshotImport>), AgentError> {
    let Some(snapshot) = request.snapshot.take() else {
        return Ok((request, None));
    };
    let kind = snapshot_kind(backend)?;
    snapshot.check_agent(&kind)?;
    snapshot.check()?;
    if let Continuity::Replay { reason } = &snapshot.continuity {
        return Err(SnapshotError::ReplayOnly {
            reason: reason.clone(),
        }
        .into());
    }
    // The run happens where the request (or else the backend's default) says, not where the
    // session ran before: the backend re-keys the files to that directory.
    let working_dir = request.working_dir.clone();
    let import = backend.import_snapshot(&request, &snapshot).await?;
    if !import.kept_newer.is_empty() {
        tracing::info!(
            agent = %kind,
            restore = %import.summary(),
            "the home held newer files of the session than its snapshot; the newer kept"
        );
    }
    let mut session = SessionRef::native(snapshot.native_session_id.clone());
    session.agent = Some(kind);
    session.working_dir = working_dir;
    request.session = SessionSelector::Resume(session);
    Ok((request, Some(import)))
}

/// `backend`'s kind, when it takes snapshots (`agent_api.session.snapshot`); else the refusal
/// both restoring and exporting give.
fn snapshot_kind(
    backend: &dyn AgentBackend,
) -> Result<crate::vocabulary::kind::AgentKind, AgentError> {
    let info = backend.info();
    if !info
        .capabilities
        .contains(agent_api_capabilities::SESSION_SNAPSHOT)
    {
        return Err(AgentError::UnsupportedCapability {
            kind: info.kind.to_string(),
            capability: agent_api_capabilities::SESSION_SNAPSHOT.into(),
        });
    }
    Ok(info.kind.clone())
}

/// A session's snapshots, taken from its backend with the session's template.
pub(crate) struct BackendSnapshots {
    backend: Arc<dyn AgentBackend>,
    template: RunRequest,
}

impl BackendSnapshots {
    /// `session`, able to give its snapshot when `backend` can export one.
    pub(crate) fn attach(
        session: Session,
        backend: Arc<dyn AgentBackend>,
        template: RunRequest,
        restored: Option<SnapshotImport>,
    ) -> Session {
        let source = Arc::new(Self { backend, template });
        session.with_snapshots(source, restored)
    }
}

#[async_trait::async_trait]
impl SnapshotSource for BackendSnapshots {
    async fn export(&self, native_session_id: &str) -> Result<SessionSnapshot, AgentError> {
        let kind = snapshot_kind(self.backend.as_ref())?;
        let mut session = SessionRef::native(native_session_id);
        session.agent = Some(kind);
        session.working_dir = self
            .template
            .session_working_dir()
            .map(std::path::Path::to_path_buf);
        let snapshot = self
            .backend
            .export_snapshot(&self.template, &session)
            .await?;
        snapshot.check()?;
        Ok(snapshot)
    }
}
