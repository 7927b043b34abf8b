//! The handlers of the reference's 14 operations, and of this server's own few.

use std::sync::Arc;

use agent_api::{PermissionDecision, QuestionAnswer};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use tokio::sync::mpsc;

use crate::access::Caller;
use crate::error::{ApiError, JsonBody, QueryOf};
use crate::follow::{sse, until_stopped, Follower, SSE_CLIENT_BUFFER};
use crate::handoff::{Forwarded, TurnStarted};
use crate::live::{LiveSession, TurnOptions};
use crate::state::Server;
use crate::store::StoredEvent;
use crate::wire::*;

#[utoipa::path(get, path = "/v1/health", operation_id = "get_health", responses((status = 200, body = HealthResponse)))]
pub(crate) async fn health() -> Json<HealthResponse> {
    Json(HealthResponse {
        status: "ok".into(),
    })
}

#[utoipa::path(get, path = "/v1/agents", operation_id = "list_agents", responses((status = 200, body = AgentListResponse)))]
pub(crate) async fn list_agents(State(server): State<Server>) -> Json<AgentListResponse> {
    Json(AgentListResponse {
        agents: crate::agents::list(&server).await,
    })
}

#[utoipa::path(get, path = "/v1/agents/{agent}/modes", operation_id = "get_agent_modes",
    params(("agent" = String, Path, description = "Agent id")),
    responses((status = 200, body = AgentModesResponse), (status = 400, body = ProblemDetails)))]
pub(crate) async fn agent_modes(
    State(server): State<Server>,
    Path(agent): Path<String>,
) -> Result<Json<AgentModesResponse>, ApiError> {
    let kind = server.kind(&agent)?;
    let backend = server.backend(&kind)?;
    Ok(Json(crate::agents::modes(backend.info().modes)))
}

#[utoipa::path(post, path = "/v1/agents/{agent}/install", operation_id = "install_agent",
    params(("agent" = String, Path, description = "Agent id")), request_body = AgentInstallRequest,
    responses((status = 204, description = "Agent installed"),
        (status = 400, body = ProblemDetails, description = "An unknown agent (unsupported_agent), a body that is not an AgentInstallRequest, or an agent whose CLI is not found (install_failed)"),
        (status = 404, body = ProblemDetails, description = "In the reference's document; its daemon, and this server, answer an unknown agent 400 unsupported_agent"),
        (status = 500, body = ProblemDetails)))]
pub(crate) async fn install_agent(
    State(server): State<Server>,
    Path(agent): Path<String>,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let body = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(),
        status => ApiError::new(status, "invalid_request", rejection.body_text()),
    })?;
    // The reference makes the body optional.
    let body: AgentInstallRequest = match body.iter().all(u8::is_ascii_whitespace) {
        true => AgentInstallRequest::default(),
        false => serde_json::from_slice(&body).map_err(|e| {
            ApiError::invalid(format!("the body is not an AgentInstallRequest: {e}"))
        })?,
    };
    let reinstall = body.reinstall.unwrap_or(false);
    // 400 `unsupported_agent` as the reference answers (and `modes` and `create` here).
    let kind = server.kind(&agent)?;
    crate::agents::install(&server, &kind, reinstall).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Beyond the reference: the agent's own stored sessions (`agent-api history`).
#[utoipa::path(get, path = "/v1/agents/{agent}/history", operation_id = "list_agent_history",
    params(("agent" = String, Path, description = "Agent id"),
        ("cwd" = Option<String>, Query, description = "Only the sessions that ran in this directory")),
    responses((status = 200, body = StoredSessionListResponse), (status = 400, body = ProblemDetails)))]
pub(crate) async fn agent_history(
    State(server): State<Server>,
    Path(agent): Path<String>,
    Extension(caller): Extension<Caller>,
    QueryOf(query): QueryOf<HistoryQuery>,
) -> Result<Json<StoredSessionListResponse>, ApiError> {
    let theirs = tenant_natives(&server, &caller).await?;
    let kind = server.kind(&agent)?;
    let query = query
        .cwd
        .map(agent_api::history::SessionQuery::in_dir)
        .unwrap_or_default();
    let stored = server
        .inner
        .gateway
        .list_sessions(&kind, &query)
        .await
        .map_err(|e| ApiError::agent(&e))?;
    let time = |t: std::time::SystemTime| {
        time::OffsetDateTime::from(t)
            .format(&time::format_description::well_known::Rfc3339)
            .ok()
    };
    let sessions = stored
        .into_iter()
        .filter(|s| theirs.as_ref().is_none_or(|theirs| theirs.contains(&s.id)))
        .map(|s| StoredSessionInfo {
            time: s.time.and_then(time),
            cwd: s.cwd.map(|c| c.to_string_lossy().into_owned()),
            first_prompt: s.first_prompt,
            title: s.title,
            size: s.size,
            id: s.id,
        })
        .collect();
    Ok(Json(StoredSessionListResponse { sessions }))
}

/// Beyond the reference: one of the agent's own stored sessions read back as universal events,
/// by pages as `get_events`.
#[utoipa::path(get, path = "/v1/agents/{agent}/history/{native_session_id}/events", operation_id = "get_agent_history_events",
    params(("agent" = String, Path, description = "Agent id"), ("native_session_id" = String, Path, description = "The agent's session id"),
        ("offset" = Option<u64>, Query, description = "Only events with a sequence above this"),
        ("limit" = Option<u64>, Query, description = "At most this many events"),
        ("include_raw" = Option<bool>, Query, description = "Fill each event's raw payload")),
    responses((status = 200, body = EventsResponse), (status = 400, body = ProblemDetails), (status = 404, body = ProblemDetails)))]
pub(crate) async fn agent_history_events(
    State(server): State<Server>,
    Path((agent, id)): Path<(String, String)>,
    Extension(caller): Extension<Caller>,
    QueryOf(query): QueryOf<EventsQuery>,
) -> Result<Response, ApiError> {
    let kind = server.kind(&agent)?;
    if tenant_natives(&server, &caller)
        .await?
        .is_some_and(|theirs| !theirs.contains(&id))
    {
        return Err(ApiError::no_session(&id));
    }
    let include_raw = query.include_raw.unwrap_or(false);
    let handle = server
        .inner
        .gateway
        .read_session(&kind, &id, include_raw)
        .await
        .map_err(|e| ApiError::agent(&e))?;
    let (events, _) = handle.collect_universal().await;
    let stored: Vec<StoredEvent> = events
        .into_iter()
        .filter(|e| e.sequence > query.offset.unwrap_or(0))
        .filter_map(|e| StoredEvent::from_event(e).ok())
        .collect();
    Ok(events_page(
        stored,
        page_limit(&server, &query),
        include_raw,
    ))
}

/// The agent session ids of the tenant's sessions, for a tenant's token (`None`: it sees every
/// one): the agents' own stores are the server's, so a tenant reads there only its own sessions.
async fn tenant_natives(
    server: &Server,
    caller: &Caller,
) -> Result<Option<std::collections::HashSet<String>>, ApiError> {
    if caller.tenant.is_none() {
        return Ok(None);
    }
    let records = server.inner.store.sessions().await?;
    Ok(Some(
        records
            .into_iter()
            .filter(|r| caller.sees(r.tenant.as_deref()))
            .filter_map(|r| r.native_session_id)
            .collect(),
    ))
}

#[utoipa::path(get, path = "/v1/sessions", operation_id = "list_sessions", responses((status = 200, body = SessionListResponse)))]
pub(crate) async fn list_sessions(
    State(server): State<Server>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<SessionListResponse>, ApiError> {
    let records = server.inner.store.sessions().await?;
    let mut sessions = Vec::with_capacity(records.len());
    let mut owners = std::collections::HashMap::new();
    // A tenant's token lists its tenant's sessions only.
    for record in records
        .into_iter()
        .filter(|r| caller.sees(r.tenant.as_deref()))
    {
        sessions.push(server.info_with(record, &mut owners).await?);
    }
    Ok(Json(SessionListResponse { sessions }))
}

/// Beyond the reference: one session's info.
#[utoipa::path(get, path = "/v1/sessions/{session_id}", operation_id = "get_session",
    params(("session_id" = String, Path, description = "Client session id")),
    responses((status = 200, body = SessionInfo), (status = 404, body = ProblemDetails)))]
pub(crate) async fn get_session(
    State(server): State<Server>,
    Path(id): Path<String>,
) -> Result<Json<SessionInfo>, ApiError> {
    let record = server.stored_session(&id).await?;
    Ok(Json(server.info(record).await?))
}

/// Beyond the reference: brings back a resumable session (its server stopped or died, released
/// its agent, or its agent exited) without sending a message; its info after.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/resume", operation_id = "resume_session",
    params(("session_id" = String, Path, description = "Session id")),
    responses((status = 200, body = SessionInfo), (status = 404, body = ProblemDetails), (status = 409, body = ProblemDetails)))]
pub(crate) async fn resume_session(
    State(server): State<Server>,
    Path(id): Path<String>,
) -> Result<Json<SessionInfo>, ApiError> {
    server.session(&id).await?;
    let record = server.stored_session(&id).await?;
    Ok(Json(server.info(record).await?))
}

#[utoipa::path(post, path = "/v1/sessions/{session_id}", operation_id = "create_session",
    params(("session_id" = String, Path, description = "Client session id")), request_body = CreateSessionRequest,
    responses((status = 200, body = CreateSessionResponse), (status = 400, body = ProblemDetails), (status = 403, body = ProblemDetails),
        (status = 409, body = ProblemDetails), (status = 503, body = ProblemDetails)))]
pub(crate) async fn create_session(
    State(server): State<Server>,
    Path(id): Path<String>,
    Extension(caller): Extension<Caller>,
    JsonBody(body): JsonBody<CreateSessionRequest>,
) -> Result<Json<CreateSessionResponse>, ApiError> {
    let live = server.create(&id, body, caller.tenant.as_deref()).await?;
    let native_session_id = server
        .inner
        .store
        .session(&live.id)
        .await?
        .and_then(|r| r.native_session_id);
    Ok(Json(CreateSessionResponse {
        healthy: true,
        error: None,
        native_session_id,
    }))
}

/// The session `id`, running here (brought back when resumable): 404 when unknown, 409 when it
/// ended or another running server owns it.
async fn live_session(server: &Server, id: &str) -> Result<Arc<LiveSession>, ApiError> {
    server.session(id).await
}

/// Sends a message's turn, or queues it behind the turn in progress; a session whose agent was
/// released meanwhile is brought back and sent to again. Returns the session, a subscription to
/// its feed taken before the turn started (when `subscribe`), and what became of the message.
async fn send_turn(
    server: &Server,
    id: &str,
    body: MessageRequest,
    subscribe: bool,
) -> Result<
    (
        Arc<LiveSession>,
        Option<crate::live::Subscription>,
        crate::live::Sent,
    ),
    ApiError,
> {
    let mut tries = 0;
    loop {
        let live = live_session(server, id).await?;
        let (prompt, options) = turn(server, &live, body.clone()).await?;
        // Subscribed before the turn starts: its first event is on the feed after this.
        let subscription = match subscribe {
            true => Some(live.subscribe()?),
            false => None,
        };
        match live.submit(prompt, options).await {
            Ok(sent) => return Ok((live, subscription, sent)),
            // Released meanwhile (idle, or this server stopping; the release forgets it before
            // its lock goes): the next look brings it back, or hands the message to a server
            // with room when this one is stopping. `session_released` is this handler's own
            // signal: a client that still meets it gets a 503 to try again, never a 409 that
            // reads as final.
            Err(error) if error.kind == crate::live::RELEASED => {
                tries += 1;
                if tries > 3 {
                    return Err(ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "owner_unavailable",
                        "the session's agent was released while the message was sent, again and again; try again",
                    ));
                }
            }
            Err(error) => return Err(error),
        }
    }
}

/// A message's images, checked and copied for the agent: refused (400, naming `images[i]`) when
/// the server must not read one or the agent takes none.
async fn message_images(
    server: &Server,
    live: &LiveSession,
    images: Option<Vec<crate::wire::ImageInput>>,
) -> Result<crate::turn::TurnImages, ApiError> {
    let images = images.unwrap_or_default();
    if images.is_empty() {
        return Ok(crate::turn::TurnImages::default());
    }
    // Each image is checked first, so that a client learns what is wrong with its own.
    let working_dir = live.opened.working_dir.clone();
    let images =
        tokio::task::spawn_blocking(move || crate::turn::TurnImages::make(&working_dir, &images))
            .await
            .map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "stream_error",
                    format!("images: {e}"),
                )
            })??;
    let kind = &live.opened.kind;
    if !server
        .backend(kind)?
        .info()
        .capabilities
        .contains(agent_api::capabilities::IMAGES)
    {
        return Err(ApiError::invalid(format!(
            "images: the agent `{kind}` takes no images (it does not advertise {})",
            agent_api::capabilities::IMAGES
        )));
    }
    Ok(images)
}

/// A message made into its turn's prompt and options: refused (400, naming the field) when it
/// is empty, changes what the session fixed when it opened, or carries images the agent cannot
/// take or the server must not read.
async fn turn(
    server: &Server,
    live: &LiveSession,
    body: MessageRequest,
) -> Result<(agent_api::Prompt, TurnOptions), ApiError> {
    if body.message.trim().is_empty() {
        return Err(ApiError::invalid("the message is empty"));
    }
    crate::turn::check_fixed(&body.settings, &live.opened.request.settings)?;
    // Checked now, not when its turn starts: a message queued behind a turn is answered 204
    // before that, so an unknown mode would otherwise be refused to nobody.
    if let Some(mode) = body.settings.agent_mode.as_deref() {
        let backend = server.backend(&live.opened.kind)?;
        if mode != crate::wire::DEFAULT_MODE && !backend.info().modes.iter().any(|m| m.id == mode) {
            return Err(ApiError::invalid(format!(
                "the agent `{}` has no mode `{}` (GET /v1/agents/{{agent}}/modes lists them)",
                live.opened.kind,
                agent_api::display::line(mode, 64)
            ))
            .about("agentMode"));
        }
    }
    // Before any image is read or copied: a message that would be refused costs nothing.
    live.check_accepts()?;
    let images = message_images(server, live, body.images).await?;
    let mut prompt = agent_api::Prompt::from(body.message);
    prompt.images = images.paths.clone();
    Ok((
        prompt,
        TurnOptions {
            agent_mode: body.settings.agent_mode,
            images,
        },
    ))
}

#[utoipa::path(post, path = "/v1/sessions/{session_id}/messages", operation_id = "post_message",
    params(("session_id" = String, Path, description = "Session id"),
        ("wait" = Option<bool>, Query, description = "Beyond the reference: answer 200 with the turn's outcome once it ends, asks a permission or a question, or the bound passes"),
        ("timeout" = Option<u64>, Query, description = "The longest wait in seconds (default 300, at most 3600)")),
    request_body = MessageRequest,
    responses((status = 204, description = "Message accepted: its turn started, or it waits in the session's queue behind the turn in progress"),
        (status = 200, body = TurnOutcome, description = "With wait=true: the turn's outcome"),
        (status = 400, body = ProblemDetails), (status = 404, body = ProblemDetails),
        (status = 409, body = ProblemDetails, description = "The session ended (session_ended) or another server runs it (session_elsewhere)"),
        (status = 429, body = ProblemDetails, description = "The session's queue is full (queue_full)")))]
pub(crate) async fn post_message(
    State(server): State<Server>,
    Path(id): Path<String>,
    QueryOf(query): QueryOf<TurnWaitQuery>,
    JsonBody(body): JsonBody<MessageRequest>,
) -> Result<Response, ApiError> {
    if !query.wait.unwrap_or(false) {
        send_turn(&server, &id, body, false).await?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let deadline = wait_deadline(&query);
    let (live, subscription, sent) = send_turn(&server, &id, body, true).await?;
    let mut subscription = subscription.ok_or_else(|| ApiError::invalid("no subscription"))?;
    let queued = |turn| TurnOutcome {
        session_id: id.clone(),
        turn,
        status: "queued".into(),
        final_text: None,
        usage: None,
        error: None,
        first_sequence: None,
        last_sequence: None,
        pending: None,
    };
    let (turn, first) = match sent {
        crate::live::Sent::Started(turn, first) => (turn, first),
        crate::live::Sent::Queued(started) => {
            match tokio::time::timeout_at(deadline, started).await {
                Err(_) => return Ok(Json(queued(None)).into_response()),
                Ok(Err(_)) => return Err(dropped()),
                Ok(Ok(started)) => started?,
            }
        }
    };
    let outcome = wait_for_turn(&live, &mut subscription, turn, first, deadline).await;
    Ok(Json(outcome).into_response())
}

/// Beyond the reference: where turn `turn` of a session is, or how it ended. A turn this server
/// runs, or one of the last 16 it ran, is answered from memory; any other (a session another
/// server runs or ran, a turn before a restart or a release, an older one) from the stored log.
#[utoipa::path(get, path = "/v1/sessions/{session_id}/turns/{turn}", operation_id = "get_turn",
    params(("session_id" = String, Path, description = "Session id"), ("turn" = u64, Path, description = "The turn's number, from 1"),
        ("wait" = Option<bool>, Query, description = "Wait for the turn to end, ask a permission or a question, or the bound to pass"),
        ("timeout" = Option<u64>, Query, description = "The longest wait in seconds (default 300, at most 3600)")),
    responses((status = 200, body = TurnOutcome),
        (status = 404, body = ProblemDetails, description = "No such session (session_not_found), or no such turn in its log yet (turn_not_found)")))]
pub(crate) async fn get_turn(
    State(server): State<Server>,
    Path((id, turn)): Path<(String, u64)>,
    QueryOf(query): QueryOf<TurnWaitQuery>,
) -> Result<Json<TurnOutcome>, ApiError> {
    let deadline = match query.wait.unwrap_or(false) {
        true => wait_deadline(&query),
        false => tokio::time::Instant::now(),
    };
    if let Some(live) = server.live(&id) {
        // Subscribed before its state is read: an end after the read is on the feed.
        let mut subscription = live.subscribe()?;
        if let Some(outcome) = live.outcome(turn) {
            return Ok(Json(outcome));
        }
        if live.current_turn() == Some(turn) {
            let first = live.first_sequence();
            return Ok(Json(
                wait_for_turn(&live, &mut subscription, turn, first, deadline).await,
            ));
        }
    } else if server.inner.store.session(&id).await?.is_none() {
        return Err(ApiError::no_session(&id));
    }
    match stored_turn(&server, &id, turn, deadline).await? {
        Some(outcome) => Ok(Json(outcome)),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "turn_not_found",
            format!("the session's log holds no turn {turn} (yet)"),
        )),
    }
}

/// The most events of a session's log read for one turn's outcome, so that no request reads
/// without bound: a turn further in is not found (its events say how it went).
const TURN_LOG_READ: usize = 200_000;

/// Turn `turn` of session `id` as its stored log tells it, waiting until `deadline` for it to
/// end or to ask as the log grows where the session runs; `None` when the log holds no such
/// turn.
async fn stored_turn(
    server: &Server,
    id: &str,
    turn: u64,
    deadline: tokio::time::Instant,
) -> Result<Option<TurnOutcome>, ApiError> {
    use crate::turn_log::{read_page, TurnReading};
    let page = server.inner.config.max_page.max(1);
    let mut reading = TurnReading::new(turn);
    let (mut after, mut read) = (0, 0);
    let (mut seen, mut last_look) = (None, false);
    loop {
        loop {
            let events = server.inner.store.events(id, after, page).await?;
            if read_page(&mut reading, &events) {
                return Ok(reading.outcome(id));
            }
            read += events.len();
            after = events.last().map_or(after, |last| last.sequence);
            if read > TURN_LOG_READ {
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    "turn_not_found",
                    format!("turn {turn} is not within the first {TURN_LOG_READ} events of the session's log: read its events"),
                ));
            }
            if events.len() < page {
                break;
            }
        }
        let Some(outcome) = reading.outcome(id) else {
            return Ok(None);
        };
        // Nobody runs the session (its owner died mid-turn): nothing goes on until a client
        // brings it back, which closes the turn as interrupted.
        if last_look
            || reading.waiting()
            || tokio::time::Instant::now() >= deadline
            || !server.runs_anywhere(id).await
        {
            return Ok(Some(outcome));
        }
        let seen = match &mut seen {
            Some(seen) => seen,
            None => seen.insert(server.follow_elsewhere(id)?),
        };
        tokio::select! {
            // Closed: the session ended (or the server stops); its log is read once more.
            changed = seen.changed() => last_look = changed.is_err(),
            // Its owner may have died without a word: looked at again after each lease.
            () = tokio::time::sleep(server.inner.config.server_lease) => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// When a wait of `query` ends.
fn wait_deadline(query: &TurnWaitQuery) -> tokio::time::Instant {
    let secs = query.timeout.unwrap_or(300).min(3600);
    tokio::time::Instant::now() + std::time::Duration::from_secs(secs)
}

/// Follows turn `turn` (its first event numbered `first`) until it ends (its outcome), a
/// permission or question is asked (`waiting`), or `deadline` (`running`).
async fn wait_for_turn(
    live: &LiveSession,
    subscription: &mut crate::live::Subscription,
    turn: u64,
    first: u64,
    deadline: tokio::time::Instant,
) -> TurnOutcome {
    use crate::live::Feed;
    use tokio::sync::broadcast::error::RecvError;
    let running = |status: &str, pending| TurnOutcome {
        session_id: live.id.clone(),
        turn: Some(turn),
        status: status.into(),
        final_text: None,
        usage: None,
        error: None,
        first_sequence: Some(first),
        last_sequence: None,
        pending,
    };
    loop {
        if let Some(outcome) = live.outcome(turn) {
            return outcome;
        }
        let next = match tokio::time::timeout_at(deadline, subscription.feed.recv()).await {
            Err(_) => return running("running", None),
            Ok(next) => next,
        };
        match next {
            Ok(Feed::Event(event)) if event.sequence >= first => {
                if let Some(pending) = crate::turn_log::pending_request(&event) {
                    return running("waiting", Some(pending));
                }
            }
            Ok(Feed::Event(_) | Feed::TurnEnded(_)) | Err(RecvError::Lagged(_)) => {}
            Ok(Feed::Ended) | Err(RecvError::Closed) => {
                // The session ended: the turn ended with it (its outcome is kept), or it was lost.
                return live
                    .outcome(turn)
                    .unwrap_or_else(|| running("failed", None));
            }
        }
    }
}

/// 409 `message_dropped`: a queued message dropped (a cancel) before its turn started.
fn dropped() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "message_dropped",
        "the queued message was dropped before its turn started",
    )
}

#[utoipa::path(post, path = "/v1/sessions/{session_id}/messages/stream", operation_id = "post_message_stream",
    params(("session_id" = String, Path, description = "Session id"),
        ("include_raw" = Option<bool>, Query, description = "Fill each event's raw payload")),
    request_body = MessageRequest,
    responses((status = 200, description = "SSE event stream of the message's turn (a queued message's once it starts)"),
        (status = 404, body = ProblemDetails), (status = 409, body = ProblemDetails), (status = 429, body = ProblemDetails),
        (status = 503, body = ProblemDetails, description = "In a fleet: no server running the session or with room took the message (owner_unavailable, fleet_full)")))]
pub(crate) async fn post_message_stream(
    State(server): State<Server>,
    Path(id): Path<String>,
    QueryOf(query): QueryOf<TurnStreamQuery>,
    forwarded: Option<Extension<Forwarded>>,
    relayed: Option<Extension<TurnStarted>>,
    JsonBody(body): JsonBody<MessageRequest>,
) -> Result<Response, ApiError> {
    let include_raw = query.include_raw.unwrap_or(false);
    if let Some(Extension(started)) = relayed {
        // Another server started the turn (`crate::fleet`): streamed from the shared log.
        let seen = server.follow_elsewhere(&id)?;
        let (frames, stream) = mpsc::channel(SSE_CLIENT_BUFFER);
        let follower = Follower::new(
            server.clone(),
            id,
            started.first.saturating_sub(1),
            include_raw,
            frames,
        );
        tokio::spawn(until_stopped(
            server.inner.stopping.clone(),
            follower.stored_turn(seen, started.turn),
        ));
        return Ok(sse(stream));
    }
    let (live, subscription, sent) = send_turn(&server, &id, body, true).await?;
    if forwarded.is_some() {
        // Run for another server: it streams the turn from the log once told which it is.
        let (turn, first) = match sent {
            crate::live::Sent::Started(turn, first) => (turn, first),
            crate::live::Sent::Queued(started) => started.await.map_err(|_| dropped())??,
        };
        return Ok(Json(TurnStarted { turn, first }).into_response());
    }
    let subscription = subscription.ok_or_else(|| ApiError::invalid("no subscription"))?;
    let (frames, stream) = mpsc::channel(SSE_CLIENT_BUFFER);
    let stopping = server.inner.stopping.clone();
    let follow = async move {
        // A queued message's stream opens at once and sends its turn's events once it starts.
        let (turn, first) = match sent {
            crate::live::Sent::Started(turn, first) => (turn, first),
            crate::live::Sent::Queued(started) => match started.await {
                Ok(Ok(started)) => started,
                _ => return,
            },
        };
        let follower = Follower::new(server, id, first - 1, include_raw, frames);
        follower.turn(subscription, live, turn).await;
    };
    tokio::spawn(until_stopped(stopping, follow));
    Ok(sse(stream))
}

#[utoipa::path(get, path = "/v1/sessions/{session_id}/events", operation_id = "get_events",
    params(("session_id" = String, Path, description = "Session id"),
        ("offset" = Option<u64>, Query, description = "Only events with a sequence above this"),
        ("limit" = Option<u64>, Query, description = "At most this many events"),
        ("include_raw" = Option<bool>, Query, description = "Fill each event's raw payload")),
    responses((status = 200, body = EventsResponse), (status = 404, body = ProblemDetails)))]
pub(crate) async fn get_events(
    State(server): State<Server>,
    Path(id): Path<String>,
    QueryOf(query): QueryOf<EventsQuery>,
) -> Result<Response, ApiError> {
    let limit = page_limit(&server, &query);
    let events = server
        .inner
        .store
        .events(&id, query.offset.unwrap_or(0), limit.saturating_add(1))
        .await?;
    Ok(events_page(
        events,
        limit,
        query.include_raw.unwrap_or(false),
    ))
}

/// The page size a query asks for, cut to the server's bound.
fn page_limit(server: &Server, query: &EventsQuery) -> usize {
    let max = server.inner.config.max_page;
    query
        .limit
        .map_or(max, |l| usize::try_from(l).unwrap_or(max).min(max))
}

/// An `EventsResponse` of the first `limit` of `events` (more of them: `hasMore`).
fn events_page(mut events: Vec<StoredEvent>, limit: usize, include_raw: bool) -> Response {
    let has_more = events.len() > limit;
    events.truncate(limit);
    // Assembled from the stored JSON: the events are not parsed again to be served.
    let mut body =
        String::with_capacity(events.iter().map(|e| e.json.len() + 1).sum::<usize>() + 32);
    body.push_str("{\"events\":[");
    for (index, event) in events.iter().enumerate() {
        if index > 0 {
            body.push(',');
        }
        body.push_str(&event.render(include_raw));
    }
    body.push_str("],\"hasMore\":");
    body.push_str(if has_more { "true" } else { "false" });
    body.push('}');
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

#[utoipa::path(get, path = "/v1/sessions/{session_id}/events/sse", operation_id = "get_events_sse",
    params(("session_id" = String, Path, description = "Session id"),
        ("offset" = Option<u64>, Query, description = "Only events with a sequence above this (Last-Event-ID wins)"),
        ("include_raw" = Option<bool>, Query, description = "Fill each event's raw payload")),
    responses((status = 200, description = "SSE event stream"), (status = 404, body = ProblemDetails)))]
pub(crate) async fn get_events_sse(
    State(server): State<Server>,
    Path(id): Path<String>,
    QueryOf(query): QueryOf<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let offset = last_event_id.or(query.offset).unwrap_or(0);
    // Subscribed before the store is read: an event stored after the read is on the feed.
    let subscription = match server.live(&id) {
        Some(live) if !live.ended() => Some(live.subscribe()?),
        _ => None,
    };
    // A session this server does not run: followed through the shared poll until it ends.
    let elsewhere = match subscription {
        Some(_) => None,
        None => match server.inner.store.session(&id).await? {
            None => return Err(ApiError::no_session(&id)),
            Some(record) if record.ended => None,
            Some(_) => Some(server.follow_elsewhere(&id)?),
        },
    };
    let (frames, stream) = mpsc::channel(SSE_CLIENT_BUFFER);
    let follower = Follower::new(
        server.clone(),
        id,
        offset,
        query.include_raw.unwrap_or(false),
        frames,
    );
    tokio::spawn(until_stopped(
        server.inner.stopping.clone(),
        follower.session(subscription, elsewhere),
    ));
    Ok(sse(stream))
}

#[utoipa::path(post, path = "/v1/sessions/{session_id}/permissions/{permission_id}/reply", operation_id = "reply_permission",
    params(("session_id" = String, Path, description = "Session id"), ("permission_id" = String, Path, description = "Permission id")),
    request_body = PermissionReplyRequest,
    responses((status = 204, description = "Permission reply accepted"), (status = 404, body = ProblemDetails)))]
pub(crate) async fn reply_permission(
    State(server): State<Server>,
    Path((id, permission)): Path<(String, String)>,
    JsonBody(body): JsonBody<PermissionReplyRequest>,
) -> Result<StatusCode, ApiError> {
    let decision = match body.reply {
        PermissionReply::Once => PermissionDecision::Allow,
        PermissionReply::Always => PermissionDecision::AllowForSession,
        PermissionReply::Reject => PermissionDecision::Deny {
            message: Some("rejected by the client".into()),
        },
    };
    let control = waiting(&server, &id, "permission request", &permission).await?;
    control
        .respond_permission(&permission, decision)
        .await
        .map_err(|e| ApiError::agent(&e))?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/v1/sessions/{session_id}/questions/{question_id}/reply", operation_id = "reply_question",
    params(("session_id" = String, Path, description = "Session id"), ("question_id" = String, Path, description = "Question id")),
    request_body = QuestionReplyRequest,
    responses((status = 204, description = "Question answered"), (status = 404, body = ProblemDetails)))]
pub(crate) async fn reply_question(
    State(server): State<Server>,
    Path((id, question)): Path<(String, String)>,
    JsonBody(body): JsonBody<QuestionReplyRequest>,
) -> Result<StatusCode, ApiError> {
    // One question per id here: its answer is the first list's choices, joined.
    let answer = body
        .answers
        .first()
        .map(|choices| choices.join(", "))
        .unwrap_or_default();
    if answer.trim().is_empty() {
        return Err(ApiError::invalid(
            "the answers are empty: give at least one choice, or reject the question",
        ));
    }
    let control = waiting(&server, &id, "question", &question).await?;
    control
        .answer_question(&question, QuestionAnswer::Text(answer))
        .await
        .map_err(|e| ApiError::agent(&e))?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/v1/sessions/{session_id}/questions/{question_id}/reject", operation_id = "reject_question",
    params(("session_id" = String, Path, description = "Session id"), ("question_id" = String, Path, description = "Question id")),
    responses((status = 204, description = "Question rejected"), (status = 404, body = ProblemDetails)))]
pub(crate) async fn reject_question(
    State(server): State<Server>,
    Path((id, question)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let control = waiting(&server, &id, "question", &question).await?;
    control
        .answer_question(&question, QuestionAnswer::Reject)
        .await
        .map_err(|e| ApiError::agent(&e))?;
    Ok(StatusCode::NO_CONTENT)
}

/// The control of the turn a request waits in; 404 when no turn is in progress.
async fn waiting(
    server: &Server,
    id: &str,
    what: &str,
    request: &str,
) -> Result<agent_api::RunControl, ApiError> {
    let live = live_session(server, id).await?;
    let interrupted = *live
        .interrupted
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let (None, Some(turn)) = (live.control(), interrupted) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "turn_interrupted",
            format!(
                "no {what} `{}` is waiting: turn {turn}, which asked it, was interrupted when its server stopped; send the message again",
                agent_api::display::line(request, 128)
            ),
        ));
    }
    live.control().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request",
            format!(
                "no {what} `{}` is waiting",
                agent_api::display::line(request, 128)
            ),
        )
    })
}

#[utoipa::path(post, path = "/v1/sessions/{session_id}/terminate", operation_id = "terminate_session",
    params(("session_id" = String, Path, description = "Session id")),
    responses((status = 204, description = "Session terminated"), (status = 404, body = ProblemDetails)))]
pub(crate) async fn terminate_session(
    State(server): State<Server>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    if let Some(live) = server.live(&id) {
        live.terminate().await?;
        server.forget(&id);
        return Ok(StatusCode::NO_CONTENT);
    }
    match not_running(&server, &id).await? {
        // Ended already: terminating again changes nothing.
        None => {}
        // Resumable (or released here): ended in the store, with no agent started for it.
        Some(record) => server.end_stored(&record, "terminated", None).await?,
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Beyond the reference: steers the turn in progress (`agent_api.control.steer`): the message
/// joins that turn, read by the agent at its next step; 204 once the agent has taken it. 400
/// (naming the capability) when the agent cannot be steered, 409 `no_turn_running` when no turn
/// runs (or it ended before the agent took the message), 409 `steer_refused` when the agent
/// refused it now.
#[utoipa::path(post, path = "/v1/sessions/{session_id}/steer", operation_id = "steer_turn",
    params(("session_id" = String, Path, description = "Session id")), request_body = SteerRequest,
    responses((status = 204, description = "The agent took the message into the running turn"),
        (status = 400, body = ProblemDetails, description = "Empty message, bad images, or an agent that cannot be steered (the detail names agent_api.control.steer)"),
        (status = 404, body = ProblemDetails),
        (status = 409, body = ProblemDetails, description = "No turn is running (no_turn_running), or the agent refused the message now (steer_refused)")))]
pub(crate) async fn steer_turn(
    State(server): State<Server>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<SteerRequest>,
) -> Result<StatusCode, ApiError> {
    let live = live_session(&server, &id).await?;
    let kind = &live.opened.kind;
    if !server
        .backend(kind)?
        .info()
        .capabilities
        .contains(agent_api::capabilities::CONTROL_STEER)
    {
        return Err(ApiError::invalid(format!(
            "the agent `{kind}` cannot be steered (it does not advertise {}): wait for the turn to end, or cancel it",
            agent_api::capabilities::CONTROL_STEER
        )));
    }
    if body.message.trim().is_empty() {
        return Err(ApiError::invalid("the message is empty"));
    }
    let images = message_images(&server, &live, body.images).await?;
    let mut prompt = agent_api::Prompt::from(body.message);
    prompt.images = images.paths.clone();
    live.steer(prompt, images).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The stored session `id` that no server runs: `None` when it ended; 404 unknown, 409
/// `session_elsewhere` when another running server owns it (it is the one to act on it).
async fn not_running(
    server: &Server,
    id: &str,
) -> Result<Option<crate::store::SessionRecord>, ApiError> {
    let record = server.stored_session(id).await?;
    if record.ended {
        return Ok(None);
    }
    if let Some(owner) = server.owner_elsewhere(&record).await? {
        return Err(ApiError::elsewhere(&owner));
    }
    Ok(Some(record))
}

/// Beyond the reference: cancels the turn in progress and keeps the session; the messages queued
/// behind it are dropped (their turns never start).
#[utoipa::path(post, path = "/v1/sessions/{session_id}/cancel", operation_id = "cancel_turn",
    params(("session_id" = String, Path, description = "Session id")),
    responses((status = 204, description = "The turn in progress was cancelled (or none was), and the messages queued behind it dropped"), (status = 404, body = ProblemDetails)))]
pub(crate) async fn cancel_turn(
    State(server): State<Server>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    if let Some(live) = server.live(&id) {
        live.cancel_turn().await;
        return Ok(StatusCode::NO_CONTENT);
    }
    // Resumable: no turn runs (one its server died in is closed when it comes back).
    if not_running(&server, &id).await?.is_none() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "session_ended",
            "the session has ended",
        ));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Any other path.
pub(crate) async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no endpoint at {}",
            agent_api::display::line(uri.path(), 256)
        ),
    )
}
