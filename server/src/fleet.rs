//! A fleet of servers on one PostgreSQL store (`spec/http-api.md`, "Fleet"): any server answers
//! for any session.
//!
//! A command (a message, a reply, cancel, terminate, steer, resume, a creation) is first tried
//! here. When another running server holds the session's agent (the internal
//! `session_elsewhere`), it is handed to that server through the store (a `commands` row and a
//! `NOTIFY`), which runs it as if the client had asked it, and its status and body are the
//! client's answer. When this server has no room (`too_many_sessions`: full, draining, or a front
//! door that runs no agents), it is handed to any server with room (the first to take the row,
//! `FOR UPDATE SKIP LOCKED`). Nobody takes it in time: 503 with `Retry-After`.
//!
//! The same task that takes commands wakes the SSE streams following sessions run elsewhere
//! ([`crate::remote`]) from the store's notifications: no polling.

use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{broadcast, Notify};
use tower::ServiceExt;

use crate::error::{ApiError, ErrorKind};
use crate::handoff::{Forwarded, TurnStarted};
use crate::state::{Inner, Server};
use crate::store::{Answer, CommandState, Notice};

/// How long a command may wait for a server to take it before the client gets 503.
const TAKE_WAIT: Duration = Duration::from_secs(5);

/// How long a command taken may run before the client gets 503 (a resume opens an agent).
const ANSWER_WAIT: Duration = Duration::from_secs(180);

/// How often a waiting command is looked at again without a notification (its taker may die,
/// its owner's lease may run out).
const RECHECK: Duration = Duration::from_millis(100);

/// How often the commands nobody took are looked for without a notification.
const SWEEP: Duration = Duration::from_secs(1);

/// How many times a command follows its session from server to server before 503.
const MAX_HOPS: usize = 3;

/// The largest answer body kept in the store.
const MAX_ANSWER: usize = 4 << 20;

/// The session a command's path names, when it is one a server running the session must answer:
/// `POST /v1/sessions/{id}` and `POST /v1/sessions/{id}/…`.
fn command_session(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v1/sessions/")?;
    let session = rest.split_once('/').map_or(rest, |(session, _)| session);
    (!session.is_empty()).then_some(session)
}

/// Whether a command's path is `POST …/messages/stream`: handed on, it is answered with the turn
/// it started ([`TurnStarted`]), which this server then streams from the shared log.
fn streams_turn(path: &str) -> bool {
    path.split('?')
        .next()
        .is_some_and(|path| path.ends_with("/messages/stream"))
}

/// The kind of a problem body a forwarded answer carries, for the kinds the forwarding acts on.
fn answer_kind(status: u16, body: &[u8]) -> Option<&'static str> {
    if status != 409 && status != 503 {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    match value["type"]
        .as_str()?
        .strip_prefix("urn:agent-api:error:")?
    {
        "session_elsewhere" => Some("session_elsewhere"),
        "too_many_sessions" => Some("too_many_sessions"),
        _ => None,
    }
}

/// Runs a command here, or hands it to the server that can answer it (module docs).
pub(crate) async fn route(State(server): State<Server>, request: Request, next: Next) -> Response {
    if request.extensions().get::<Forwarded>().is_some() {
        return next.run(request).await;
    }
    if server.inner.store.fleet().is_none() {
        // A store of one server: nothing to hand on to.
        return hide_elsewhere(next.run(request).await);
    }
    let session = match command_session(request.uri().path()) {
        Some(session) if request.method() == Method::POST => session.to_string(),
        // Not a command: the internal kind never reaches the client.
        _ => return hide_elsewhere(next.run(request).await),
    };
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, server.inner.config.max_body_bytes).await else {
        return ApiError::too_large().into_response();
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_string(), ToString::to_string);
    let mut response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    let mut handed = false;
    for _ in 0..MAX_HOPS {
        let kind = response.extensions().get::<ErrorKind>().map(|k| k.0);
        response = match kind {
            Some("session_elsewhere") => match owner(&server, &session).await {
                Some(owner) => forward(&server, Some(&owner), &session, &path, &bytes).await,
                // Its owner is gone meanwhile: this server brings it back.
                None => run_here(&server, "POST", &path, bytes.to_vec(), None).await,
            },
            Some("too_many_sessions") => forward(&server, None, &session, &path, &bytes).await,
            _ => break,
        };
        handed = true;
    }
    if handed && streams_turn(&path) && response.status() == StatusCode::OK {
        return relay_turn(&server, &path, bytes.to_vec(), response).await;
    }
    hide_elsewhere(response)
}

/// The stream of the turn a server running the session started for a message streamed through
/// this one (its answer `started`): read from the shared log here.
async fn relay_turn(server: &Server, path: &str, body: Vec<u8>, started: Response) -> Response {
    let started = axum::body::to_bytes(started.into_body(), MAX_ANSWER).await;
    match started.map(|b| serde_json::from_slice::<TurnStarted>(&b)) {
        Ok(Ok(started)) => run_here(server, "POST", path, body, Some(started)).await,
        _ => owner_unavailable("its answer to the message did not name the turn it started"),
    }
}

/// `response`, or 503 `owner_unavailable` when it is the internal `session_elsewhere`.
fn hide_elsewhere(response: Response) -> Response {
    match response.extensions().get::<ErrorKind>().map(|k| k.0) {
        Some("session_elsewhere") => owner_unavailable(
            "another server runs the session and the request was not handed to it (or it moved on while it followed the session)",
        ),
        _ => response,
    }
}

/// The running server that holds the session's agent now, if another does.
async fn owner(server: &Server, session: &str) -> Option<String> {
    let record = server.inner.store.session(session).await.ok()??;
    server.owner_elsewhere(&record).await.ok()?
}

fn owner_unavailable(why: &str) -> Response {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "owner_unavailable",
        format!("the server running the session did not answer: {why}; try again (the next try may bring the session back on another server)"),
    )
    .into_response()
}

fn fleet_full() -> Response {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "fleet_full",
        "no server sharing the store has room for another session now; try again later",
    )
    .into_response()
}

/// Hands a command to `target` (`None`: any server with room) and waits for its answer.
async fn forward(
    server: &Server,
    target: Option<&str>,
    session: &str,
    path: &str,
    body: &[u8],
) -> Response {
    let started = std::time::Instant::now();
    let (response, outcome) = forward_waiting(server, target, session, path, body).await;
    let labels = crate::metrics::ForwardLabels {
        to: if target.is_some() { "owner" } else { "any" },
        outcome,
    };
    let metrics = &server.inner.metrics;
    metrics.forwarded.get_or_create(&labels).inc();
    metrics
        .forward_seconds
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    response
}

async fn forward_waiting(
    server: &Server,
    target: Option<&str>,
    session: &str,
    path: &str,
    body: &[u8],
) -> (Response, &'static str) {
    let Some(fleet) = server.inner.store.fleet() else {
        return (owner_unavailable("no fleet"), "lost");
    };
    let id = match fleet
        .send_command(target, session, "POST", path, body)
        .await
    {
        Ok(id) => id,
        Err(error) => return (ApiError::store(error).into_response(), "lost"),
    };
    let waiter = Arc::new(Notify::new());
    server.inner.waiters.lock().insert(id, waiter.clone());
    let answered = wait_answer(server, id, target, &waiter).await;
    server.inner.waiters.lock().remove(&id);
    match answered {
        Some(answered) => answered,
        // Its owner's lease ran out while the command waited, and nobody took it: the session
        // is resumable, and this server brings it back.
        None => (
            run_here(server, "POST", path, body.to_vec(), None).await,
            "owner_gone",
        ),
    }
}

/// The answer to command `id`; `None` when it was withdrawn because its `target` is gone.
async fn wait_answer(
    server: &Server,
    id: i64,
    target: Option<&str>,
    waiter: &Notify,
) -> Option<(Response, &'static str)> {
    let fleet = server.inner.store.fleet()?;
    let lease = server.inner.config.server_lease;
    let sent = tokio::time::Instant::now();
    loop {
        let state = fleet.command_state(id, lease).await;
        let now = tokio::time::Instant::now();
        let gone = match (&state, target) {
            (Ok(CommandState::Open), Some(target)) => !fleet_alive(server, target).await,
            _ => false,
        };
        let answer = match state {
            Ok(CommandState::Answered(answer)) => (answer_response(answer), "answered"),
            Ok(CommandState::Open) if gone || now >= sent + TAKE_WAIT => {
                match fleet.withdraw_command(id).await {
                    Ok(true) if gone => return None,
                    Ok(true) if target.is_none() => (fleet_full(), "not_taken"),
                    Ok(true) => (
                        owner_unavailable("it did not take the command in time"),
                        "not_taken",
                    ),
                    // Taken meanwhile: its answer comes.
                    Ok(false) => continue,
                    Err(error) => (ApiError::store(error).into_response(), "lost"),
                }
            }
            Ok(CommandState::Taken) if now >= sent + ANSWER_WAIT => {
                (owner_unavailable("it took too long"), "lost")
            }
            Ok(CommandState::Lost) => (
                owner_unavailable(
                    "it stopped while it ran the command, which may have taken effect",
                ),
                "lost",
            ),
            Ok(_) => {
                let _ = tokio::time::timeout(RECHECK, waiter.notified()).await;
                continue;
            }
            Err(error) => (ApiError::store(error).into_response(), "lost"),
        };
        return Some(answer);
    }
}

/// Whether the server `target` still holds its lease (a store that fails: it may).
async fn fleet_alive(server: &Server, target: &str) -> bool {
    let lease = server.inner.config.server_lease;
    server
        .inner
        .store
        .server_alive(target, lease)
        .await
        .unwrap_or(true)
}

/// A stored answer as the response the client gets.
fn answer_response(answer: Answer) -> Response {
    let kind = answer_kind(answer.status, &answer.body);
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, answer.body).into_response();
    let headers = response.headers_mut();
    headers.remove(header::CONTENT_TYPE);
    for (name, value) in [
        (header::CONTENT_TYPE, answer.content_type),
        (header::RETRY_AFTER, answer.retry_after),
    ] {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, value);
        }
    }
    if let Some(kind) = kind {
        response.extensions_mut().insert(ErrorKind(kind));
    }
    response
}

/// Runs a command on this server's own routes, as the client's request would have run (the
/// server that received it checked its token and host); `started`: the turn another server
/// started for it, to stream from the log.
async fn run_here(
    server: &Server,
    method: &str,
    path: &str,
    body: Vec<u8>,
    started: Option<TurnStarted>,
) -> Response {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "localhost")
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(token) = &server.inner.config.token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    if let Some(started) = started {
        request = request.extension(started);
    }
    let request = match request.extension(Forwarded).body(Body::from(body)) {
        Ok(request) => request,
        Err(error) => {
            return ApiError::invalid(format!("a command that is not a request: {error}"))
                .into_response()
        }
    };
    match crate::router(server.clone()).oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// Runs a command another server handed here and stores its answer.
async fn run_command(server: Server, command: crate::store::Command) {
    server.inner.metrics.commands_run.inc();
    let response = run_here(&server, &command.method, &command.path, command.body, None).await;
    let status = response.status().as_u16();
    let (content_type, retry_after) = {
        let header_of = |name: header::HeaderName| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(ToString::to_string)
        };
        (
            header_of(header::CONTENT_TYPE),
            header_of(header::RETRY_AFTER),
        )
    };
    let body = axum::body::to_bytes(response.into_body(), MAX_ANSWER)
        .await
        .map(|b| b.to_vec())
        .unwrap_or_default();
    let answer = Answer {
        status,
        body,
        content_type,
        retry_after,
    };
    if let Some(fleet) = server.inner.store.fleet() {
        if let Err(error) = fleet.answer_command(command.id, answer).await {
            tracing::warn!("cannot store a command's answer: {error}");
        }
    }
}

/// Takes the command `id` when it is this server's (or any server's, and this one has room),
/// and runs it on a task of its own.
async fn take(server: &Server, id: i64) {
    let Some(fleet) = server.inner.store.fleet() else {
        return;
    };
    match fleet
        .take_command(id, server.daemon_id(), server.has_room())
        .await
    {
        Ok(Some(command)) => {
            tokio::spawn(run_command(server.clone(), command));
        }
        Ok(None) => {}
        Err(error) => tracing::warn!("cannot take a command: {error}"),
    }
}

/// The commands this server may take that nobody took (their notification was missed).
async fn sweep(server: &Server) {
    let Some(fleet) = server.inner.store.fleet() else {
        return;
    };
    match fleet
        .open_commands(server.daemon_id(), server.has_room())
        .await
    {
        Ok(ids) => {
            for id in ids {
                take(server, id).await;
            }
        }
        Err(error) => tracing::debug!("cannot look for open commands: {error}"),
    }
}

/// Listens to the store's notifications while the server runs: takes commands, wakes the
/// requests waiting for an answer and the streams following sessions run elsewhere.
pub(crate) async fn listen(
    server: Weak<Inner>,
    mut notices: broadcast::Receiver<Notice>,
    stopping: agent_api::request::CancellationToken,
) {
    loop {
        let notice = tokio::select! {
            notice = notices.recv() => match notice {
                Ok(notice) => Some(notice),
                Err(broadcast::error::RecvError::Lagged(_)) => Some(Notice::Missed),
                Err(broadcast::error::RecvError::Closed) => return,
            },
            () = tokio::time::sleep(SWEEP) => None,
            () = stopping.cancelled() => return,
        };
        let Some(inner) = server.upgrade() else {
            return;
        };
        let server = Server { inner };
        match notice {
            Some(Notice::Events {
                session,
                events,
                ended,
            }) => server
                .inner
                .polls
                .seen(&session, crate::polls::Seen { events, ended }),
            Some(Notice::Command(id)) => take(&server, id).await,
            Some(Notice::Answer(id)) => server.inner.waiters.wake(id),
            Some(Notice::Missed) => {
                server.inner.waiters.wake_all();
                server.inner.polls.reread(server.inner.store.as_ref()).await;
                sweep(&server).await;
            }
            None => sweep(&server).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_commands_on_a_session_are_handed_on() {
        assert_eq!(command_session("/v1/sessions/a"), Some("a"));
        assert_eq!(command_session("/v1/sessions/a/messages"), Some("a"));
        assert_eq!(
            command_session("/v1/sessions/a/permissions/p/reply"),
            Some("a")
        );
        assert_eq!(command_session("/v1/sessions/a/messages/stream"), Some("a"));
        assert!(streams_turn(
            "/v1/sessions/a/messages/stream?include_raw=true"
        ));
        assert!(!streams_turn("/v1/sessions/a/messages"));
        assert_eq!(command_session("/v1/sessions/"), None);
        assert_eq!(command_session("/v1/agents/x/install"), None);
    }

    #[test]
    fn a_forwarded_answer_says_the_kinds_the_forwarding_acts_on() {
        let elsewhere = br#"{"type":"urn:agent-api:error:session_elsewhere"}"#;
        assert_eq!(answer_kind(409, elsewhere), Some("session_elsewhere"));
        assert_eq!(answer_kind(200, elsewhere), None);
        let ended = br#"{"type":"urn:agent-api:error:session_ended"}"#;
        assert_eq!(answer_kind(409, ended), None);
        assert_eq!(answer_kind(503, b"not json"), None);
    }
}
