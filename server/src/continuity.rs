//! Sessions that outlive their server (`spec/http-api.md`, "Continuity"): a session ends only
//! when a client terminates it (or `--session-idle-ttl`); a server that stops or dies leaves it
//! *resumable*, and the next message (or reply, or `POST …/resume`) brings it back on whichever
//! server gets it.
//!
//! Bringing one back: the server claims it in the store (compare and swap on its owner, so two
//! servers never both run it), closes the turn its last server died in (one `error`, code
//! `interrupted`, and its `turn_failed` status), opens the agent again continuing its native
//! session (`native`), or, where the agent cannot, a new one whose first prompt is primed with the
//! transcript (`replay`, flagged), and writes one `session_resumed` status item saying how, on
//! which server and after what. The transcript goes on under the same id with no gap.

use std::sync::Arc;

use agent_api::kit::transcript::Transcript;
use agent_api::request::SessionRef;
use agent_api::SessionSelector;

use crate::error::ApiError;
use crate::live::{daemon_event, Continuity, LiveSession, SessionOrigin, Snapshots};
use crate::state::Server;
use crate::store::{Chain, SessionRecord, SessionState, SessionUpdate, StoredEvent};
use crate::wire::CreateSessionRequest;

/// The `code` of the `error` closing a turn its server died in.
pub const INTERRUPTED_CODE: &str = "interrupted";

/// The label of the status item a session brought back starts with.
pub const SESSION_RESUMED: &str = "session_resumed";

/// The most of the transcript a `replay` primes the next prompt with (its end is kept).
const PRIME_BOUND: usize = 64 * 1024;

/// How a session came back: its agent's own session continued, or a new one primed with the
/// transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum How {
    Native,
    Replay,
}

impl How {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Replay => "replay",
        }
    }
}

/// Why a session was not running when it was brought back, from its stored state: its owner
/// released its agent (`idle_release`), stopped cleanly (`server_stopped`), its agent exited by
/// itself (`agent_exited`) or could not continue its own session (`native_refused`), or its owner
/// died with it live (`server_died`).
fn after(record: &SessionRecord) -> &'static str {
    match record.state {
        SessionState::Idle => "idle_release",
        SessionState::Stopped => "server_stopped",
        SessionState::AgentExited => "agent_exited",
        SessionState::NativeRefused => "native_refused",
        _ => "server_died",
    }
}

/// The settings a stored session was created with (older rows: what the record holds).
fn creation(record: &SessionRecord) -> CreateSessionRequest {
    let mut request = record
        .settings
        .as_deref()
        .and_then(|json| serde_json::from_str::<CreateSessionRequest>(json).ok())
        .unwrap_or_else(|| {
            let mut request = CreateSessionRequest {
                agent: record.agent.clone(),
                ..CreateSessionRequest::default()
            };
            request.settings.model = record.model.clone();
            request.settings.variant = record.variant.clone();
            request.settings.permission_mode = Some(record.permission_mode.clone());
            request
        });
    // Its native session is continued below: the creation's own `resume`/`fork` are spent.
    request.settings.resume = None;
    request.settings.fork = None;
    request
}

impl Server {
    /// Brings back the stored session `record` (not ended; its owner gone, or this server after
    /// releasing it): claims it, closes an interrupted turn, opens its agent again and writes the
    /// seam. 409 `session_elsewhere` (internal: the fleet's forwarding turns it into the owner's
    /// answer) when another server claimed it first.
    pub(crate) async fn resume(&self, record: SessionRecord) -> Result<Arc<LiveSession>, ApiError> {
        let me = self.daemon_id().to_string();
        let store = self.inner.store.clone();
        let lease = self.inner.config.server_lease;
        let epoch = store
            .claim_lease(&record.id, &me, record.owner.as_deref(), lease)
            .await?;
        let body = creation(&record);
        let kind = self.kind(&body.agent)?;
        let mut settings = body.settings.clone();
        // The mode it switched to last, not the creation's.
        settings.agent_mode = Some(record.agent_mode.clone());
        let request = self.request(&kind, &settings)?;
        let request = crate::tenant::home(
            &self.inner.config.tenants,
            request,
            record.tenant.as_deref(),
        )?;
        let working_dir = record
            .working_dir
            .as_deref()
            .map(std::path::PathBuf::from)
            .filter(|dir| dir.is_dir());
        let request = match &working_dir {
            Some(dir) if request.session_working_dir().is_none() => request.with_working_dir(dir),
            _ => request,
        };
        let working_dir = match working_dir {
            Some(dir) => dir,
            None => crate::tenant::run_dir(&request)?,
        };
        let capabilities = self.inner.gateway.capabilities(&kind).unwrap_or_default();
        let native = record
            .native_session_id
            .clone()
            .filter(|_| capabilities.contains(agent_api::capabilities::SESSION_RESUME));
        // First the agent's own state from the store (restored into this server's home, then
        // resumed natively), then its files where this home still has them, then a replay.
        let held = self.stored_snapshot(&record).await?;
        // An agent that took the open of its own session but refused it on the first turn would
        // take the open again and fail the same way: it is replayed.
        let refused = record.state == SessionState::NativeRefused;
        if refused {
            tracing::warn!(session = %record.id, "its agent could not continue its own session last time: brought back by a replay");
        }
        let mut attempts = Vec::new();
        if let Some(chain) = held
            .as_ref()
            .filter(|chain| !refused && chain.snapshot.is_native())
        {
            let snapshot = chain.snapshot.clone();
            attempts.push((request.clone().with_snapshot(snapshot), "snapshot"));
        }
        if let Some(native) = native.as_ref().filter(|_| !refused) {
            let again = request
                .clone()
                .with_session(SessionSelector::Resume(SessionRef::native(native)));
            attempts.push((again, "home"));
        }
        let mut opened = None;
        for (attempt, source) in attempts {
            match self.inner.gateway.open_session(&kind, attempt).await {
                Ok(session) => {
                    opened = Some((session, How::Native, source));
                    break;
                }
                Err(error) => tracing::warn!(
                    session = %record.id,
                    source,
                    "cannot continue the agent's own session this way: {error}"
                ),
            }
        }
        let (session, how, source) = match opened {
            Some(opened) => opened,
            None => (
                self.inner
                    .gateway
                    .open_session(&kind, request)
                    .await
                    .map_err(|e| ApiError::agent(&e))?,
                How::Replay,
                "transcript",
            ),
        };
        let prime = match how {
            How::Native => None,
            How::Replay => Some(self.prime(&record.id).await?),
        };
        // A home that went on past the stored snapshot keeps its newer files (newest wins): said.
        let kept_newer = session.restored().map_or(0, |r| r.kept_newer.len());
        if kept_newer > 0 {
            tracing::info!(session = %record.id, kept_newer, "the home's newer files of the session were kept over its snapshot (newest wins)");
        }
        let interrupted = self.interrupted_turn(&record).await?;
        let from = Source {
            name: source,
            kept_newer,
        };
        let seam = seam(&record, interrupted, how, from, &me);
        let next = record.event_count + seam.len() as u64 + 1;
        if let Err(error) = store
            .append_fenced(&record.id, &me, epoch, lease, seam)
            .await
        {
            // Not brought back: another server took it meanwhile, or the store failed; its agent
            // is dropped (stopped) with `session`.
            return Err(ApiError::store(error));
        }
        let update = SessionUpdate::default()
            .turns(record.turns, false)
            .resumed_how(how.as_str());
        store.update(&record.id, &me, update).await?;
        tracing::info!(session = %record.id, how = how.as_str(), after = after(&record), "session brought back");
        self.inner
            .metrics
            .takeovers
            .get_or_create(&crate::metrics::TakeoverLabel {
                after: after(&record),
            })
            .inc();
        let origin = SessionOrigin {
            kind,
            request: body,
            working_dir,
        };
        let continuity = Continuity {
            owner: me,
            epoch,
            next_sequence: next,
            turns: record.turns,
            agent_mode: Some(record.agent_mode.clone()),
            prime,
            interrupted,
            snapshots: held.map(Snapshots::held).unwrap_or_default(),
            native: how == How::Native,
        };
        Ok(self.adopt(&record.id, origin, session, continuity))
    }

    /// The snapshot kept for `record` (its base and deltas put back together), if it can be
    /// used: a missing one is `None`; one that is cut short, damaged, missing a delta, of another
    /// version or another agent is said (a typed error in the log) and not used, so that the
    /// session goes on by its files or a flagged replay (and its next snapshot is written whole).
    async fn stored_snapshot(&self, record: &SessionRecord) -> Result<Option<Chain>, ApiError> {
        let Some(stored) = self.inner.store.snapshot(&record.id).await? else {
            return Ok(None);
        };
        let read = Chain::read(&stored).and_then(|chain| match self.kind(&record.agent).ok() {
            Some(kind) => chain.snapshot.check_agent(&kind).map(|()| chain),
            None => Ok(chain),
        });
        match read {
            Ok(chain) => Ok(Some(chain)),
            Err(error) => {
                tracing::warn!(session = %record.id, "the session's snapshot cannot be used: {error}");
                Ok(None)
            }
        }
    }

    /// The turn a stored session's server died in, if one was running: recorded as running, and
    /// fewer turns closed in the log than started (a server killed between storing a turn's end
    /// and recording it ended ran no turn; one killed between recording a turn's start and its
    /// first event did, and it is closed). Each turn is closed by exactly one status
    /// `turn_completed` or `turn_failed` whose detail is `turn N` (the agent's own statuses carry
    /// no such detail), so the log is counted.
    async fn interrupted_turn(&self, record: &SessionRecord) -> Result<Option<u64>, ApiError> {
        if !record.turn_open {
            return Ok(None);
        }
        let mut closed = 0u64;
        let mut after = 0;
        loop {
            let page = self.inner.store.events(&record.id, after, 1000).await?;
            let Some(last) = page.last() else { break };
            after = last.sequence;
            closed += page
                .iter()
                .filter(|event| event.closed_turn().is_some())
                .count() as u64;
        }
        Ok((closed < record.turns.max(1)).then_some(record.turns.max(1)))
    }

    /// The text a `replay` primes the next prompt with: the conversation's messages so far,
    /// its end kept within [`PRIME_BOUND`].
    async fn prime(&self, id: &str) -> Result<String, ApiError> {
        let mut lines = std::collections::VecDeque::new();
        let mut bytes = 0;
        let mut after = 0;
        loop {
            let page = self.inner.store.events(id, after, 1000).await?;
            let Some(last) = page.last() else { break };
            after = last.sequence;
            for event in &page {
                if event.kind() != "item.completed" {
                    continue;
                }
                let Ok(value) = serde_json::from_str::<serde_json::Value>(&event.json) else {
                    continue;
                };
                let item = &value["data"]["item"];
                if item["kind"] != "message" {
                    continue;
                }
                let who = match item["role"].as_str() {
                    Some("user") => "User",
                    Some("assistant") => "Assistant",
                    _ => continue,
                };
                let text: String = item["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|part| part["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                let line = format!("{who}: {text}\n");
                bytes += line.len();
                lines.push_back(line);
                while bytes > PRIME_BOUND && lines.len() > 1 {
                    bytes -= lines.pop_front().map_or(0, |l| l.len());
                }
            }
        }
        let transcript: String = lines.into_iter().collect();
        Ok(format!(
            "[This conversation continues one whose agent could not be restored; its transcript so far follows.]\n{transcript}[End of the transcript. The new message follows.]\n\n"
        ))
    }

    /// Ends a stored session this server does not run (its owner gone, or this server after
    /// releasing it): claims it, closes an interrupted turn, and stores its `session.ended`
    /// (`reason`, `terminated_by=daemon`, `message` when given).
    pub(crate) async fn end_stored(
        &self,
        record: &SessionRecord,
        reason: &str,
        message: Option<&str>,
    ) -> Result<(), ApiError> {
        let me = self.daemon_id();
        let store = &self.inner.store;
        let lease = self.inner.config.server_lease;
        let epoch = store
            .claim_lease(&record.id, me, record.owner.as_deref(), lease)
            .await?;
        let interrupted = self.interrupted_turn(record).await?;
        let mut events = interrupted_turn(&record.id, record.event_count + 1, interrupted);
        let mut ended = serde_json::json!({ "reason": reason, "terminated_by": "daemon" });
        if let Some(message) = message {
            ended["message"] = message.into();
        }
        let next = record.event_count + events.len() as u64 + 1;
        events.extend(daemon_event(&record.id, next, "session.ended", ended));
        store
            .append_fenced(&record.id, me, epoch, lease, events)
            .await?;
        store
            .update(
                &record.id,
                me,
                SessionUpdate::default().turns(record.turns, false),
            )
            .await?;
        store.mark_ended(&record.id, None).await?;
        Ok(())
    }
}

/// The events closing a turn its server died in, numbered from `next`: its `turn_failed` status
/// and one terminal `error` (code `interrupted`); none when no turn was running.
fn interrupted_turn(id: &str, next: u64, turn: Option<u64>) -> Vec<StoredEvent> {
    let Some(turn) = turn else {
        return Vec::new();
    };
    let mut transcript = Transcript::new(seam_session(), false);
    transcript.daemon_status("turn_failed", Some(format!("turn {turn}")));
    let mut events = renumber(id, next, transcript.drain().collect());
    let error = serde_json::json!({
        "message": crate::state::INTERRUPTED,
        "code": INTERRUPTED_CODE,
        "details": { "terminal": true, "turn": turn },
    });
    events.extend(daemon_event(id, next + events.len() as u64, "error", error));
    events
}

/// Where a session brought back continued from (`snapshot`, `home`, `transcript`), and how many
/// of the home's files were newer than the snapshot's and kept (newest wins).
struct Source {
    name: &'static str,
    kept_newer: usize,
}

/// The seam of a session brought back, numbered after its last event: an interrupted turn's
/// close, then one `session_resumed` status item whose detail says how (`native` or `replay`),
/// from where (with `kept_newer=N` when a restore kept the home's newer files), on which server,
/// and after what.
fn seam(
    record: &SessionRecord,
    interrupted: Option<u64>,
    how: How,
    source: Source,
    server: &str,
) -> Vec<StoredEvent> {
    let next = record.event_count + 1;
    let mut events = interrupted_turn(&record.id, next, interrupted);
    let mut transcript = Transcript::new(seam_session(), false);
    let kept = match source.kept_newer {
        0 => String::new(),
        n => format!(" kept_newer={n}"),
    };
    let detail = format!(
        "how={} from={}{kept} server={} after={} turns={}",
        how.as_str(),
        source.name,
        agent_api::display::line(server, 128),
        after(record),
        record.turns
    );
    transcript.daemon_status(SESSION_RESUMED, Some(detail));
    let first = next + events.len() as u64;
    events.extend(renumber(&record.id, first, transcript.drain().collect()));
    events
}

/// A fresh library session id for the seam's own events: their ids are unique in the session.
fn seam_session() -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sess_{hex}")
}

/// `events` without their `session.started`, numbered from `first` in the session `id`.
fn renumber(id: &str, first: u64, events: Vec<agent_api::UniversalEvent>) -> Vec<StoredEvent> {
    let session: Arc<str> = id.into();
    events
        .into_iter()
        .filter(|event| event.type_name() != "session.started")
        .zip(first..)
        .filter_map(|(mut event, sequence)| {
            event.sequence = sequence;
            event.session_id = session.clone();
            StoredEvent::from_event(event).ok()
        })
        .collect()
}
