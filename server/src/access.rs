//! Who a request is and what it may do (`spec/http-api.md`, Auth): its bearer token names a
//! [`Caller`], a [`Scope`] and a tenant, checked before any handler runs.
//!
//! - The server's own token (`--token`) is an admin of no tenant: it sees every session. So is
//!   every request to a server without one (`--no-token`), unless it shows a stored token.
//! - A stored token ([`crate::store::tokens`]) is read from the store at every request, so a revoked
//!   one is refused at the next request, on this server and on every other sharing the store;
//!   an event stream it opened is ended within [`REVOKED_STREAM_CHECK`].
//! - A route needs `read` (GET), `operate` (POST) or `admin` (`/metrics`, installing an agent,
//!   managing tokens: [`crate::token_admin`]):
//!   403 `scope_insufficient` below it, whatever the session.
//! - A tenant's token sees only its tenant's sessions: any other session id is answered 404
//!   `session_not_found`, exactly as an id no session has.

use std::time::Duration;

use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json, RequestExt};
use futures::StreamExt;
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::state::Server;
use crate::store::tokens::Scope;
use crate::wire::WhoAmIResponse;

/// How often an event stream opened with a stored token checks that the token still holds.
pub(crate) const REVOKED_STREAM_CHECK: Duration = Duration::from_secs(2);

/// Who a request is: what its token may do, and whose sessions it sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The tenant whose sessions it sees; `None`: every session.
    pub(crate) tenant: Option<String>,
    /// What it may do.
    pub(crate) scope: Scope,
    /// The id of the stored token it showed, if it showed one.
    token: Option<String>,
}

impl Caller {
    /// The server's own token: an admin of every tenant.
    fn server() -> Self {
        Self {
            tenant: None,
            scope: Scope::Admin,
            token: None,
        }
    }

    /// Whether it sees a session of `tenant`.
    pub(crate) fn sees(&self, tenant: Option<&str>) -> bool {
        self.tenant.is_none() || self.tenant.as_deref() == tenant
    }
}

/// The scope a route needs.
fn required(method: &Method, route: &str) -> Scope {
    match route {
        "/metrics"
        | "/v1/agents/{agent}/install"
        | "/v1/tokens"
        | "/v1/tokens/{token_id}/revoke" => Scope::Admin,
        _ if method == Method::GET || method == Method::HEAD => Scope::Read,
        _ => Scope::Operate,
    }
}

/// The bearer token of a request (the scheme's name is case-insensitive: RFC 9110).
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    headers
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        .filter(|value| value.len() > 7 && value[..7].eq_ignore_ascii_case(b"bearer "))
        .map(|value| &value[7..])
}

fn unauthorized() -> Response {
    let mut response = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "token_invalid",
        "missing, wrong or revoked bearer token (Authorization: Bearer <token>)",
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// The caller a request's token names; 401 when it names none.
async fn identify(server: &Server, given: Option<&[u8]>) -> Result<Caller, Response> {
    let own = server.inner.config.token.as_deref();
    if let (Some(own), Some(given)) = (own, given) {
        if bool::from(given.ct_eq(own.as_bytes())) {
            return Ok(Caller::server());
        }
    }
    let stored = given
        .and_then(|given| std::str::from_utf8(given).ok())
        .and_then(|text| crate::store::tokens::id_of(text).map(|id| (id, text)));
    let Some((id, text)) = stored else {
        // Without a token of its own the server takes every request, as before tokens existed.
        return match own {
            None => Ok(Caller::server()),
            Some(_) => Err(unauthorized()),
        };
    };
    let Some(tokens) = server.inner.store.token_store() else {
        return Err(unauthorized());
    };
    let record = tokens
        .token(id)
        .await
        .map_err(|e| ApiError::store(e).into_response())?;
    let Some(record) = record.filter(|r| r.revoked_at.is_none() && r.matches(text)) else {
        return Err(unauthorized());
    };
    if server.inner.last_used.due(&record.id) {
        let store = server.inner.store.clone();
        let id = record.id.clone();
        tokio::spawn(async move {
            if let Some(tokens) = store.token_store() {
                if let Err(error) = tokens.token_used(&id, crate::store::unix_now()).await {
                    tracing::warn!(token = %id, "cannot record the token's use: {error}");
                }
            }
        });
    }
    Ok(Caller {
        tenant: record.tenant,
        scope: record.scope,
        token: Some(record.id),
    })
}

/// The session a route names by `{session_id}`, but for its creation (which the handler checks).
async fn named_session(request: &mut Request, route: &str) -> Option<String> {
    if !route.starts_with("/v1/sessions/{session_id}")
        || (route == "/v1/sessions/{session_id}" && request.method() == Method::POST)
    {
        return None;
    }
    let params = request.extract_parts::<RawPathParams>().await.ok()?;
    let id = params
        .iter()
        .find(|(name, _)| *name == "session_id")
        .map(|(_, id)| id.to_string());
    id
}

/// 401 without a token this server takes, 403 `scope_insufficient` below the route's scope, 404
/// for a session of another tenant; else the request goes on with its [`Caller`].
pub(crate) async fn authorize(
    State(server): State<Server>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = match identify(&server, bearer(request.headers())).await {
        Ok(caller) => caller,
        Err(response) => return response,
    };
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    let needed = required(request.method(), &route);
    if caller.scope < needed {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "scope_insufficient",
            format!(
                "this token's scope is {}: this request needs {needed}",
                caller.scope
            ),
        )
        .into_response();
    }
    if caller.tenant.is_some() {
        if let Some(id) = named_session(&mut request, &route).await {
            match server.inner.store.session(&id).await {
                Ok(Some(record)) if caller.sees(record.tenant.as_deref()) => {}
                Ok(_) => return ApiError::no_session(&id).into_response(),
                Err(error) => return ApiError::store(error).into_response(),
            }
        }
    }
    let token = caller.token.clone();
    request.extensions_mut().insert(caller);
    let response = next.run(request).await;
    match token {
        Some(token) if is_event_stream(&response) => until_revoked(response, &server, token),
        _ => response,
    }
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// `response`'s stream, ended once the token `id` is revoked (or gone from the store).
fn until_revoked(response: Response, server: &Server, id: String) -> Response {
    let store = server.inner.store.clone();
    let revoked = async move {
        loop {
            tokio::time::sleep(REVOKED_STREAM_CHECK).await;
            let Some(tokens) = store.token_store() else {
                return;
            };
            match tokens.token(&id).await {
                Ok(Some(token)) if token.revoked_at.is_none() => {}
                Ok(_) => return,
                // A store that fails now ends nothing: the next request is checked again.
                Err(_) => {}
            }
        }
    };
    let (parts, body) = response.into_parts();
    let body = axum::body::Body::from_stream(body.into_data_stream().take_until(Box::pin(revoked)));
    Response::from_parts(parts, body)
}

/// Beyond the reference: what the request's token may do and whose sessions it sees (the
/// inspector hides what its scope cannot do).
#[utoipa::path(get, path = "/v1/whoami", operation_id = "get_whoami",
    responses((status = 200, body = WhoAmIResponse), (status = 401, body = crate::wire::ProblemDetails)))]
pub(crate) async fn whoami(Extension(caller): Extension<Caller>) -> Json<WhoAmIResponse> {
    Json(WhoAmIResponse {
        tenant: caller.tenant,
        scope: caller.scope.as_str().into(),
        token_id: caller.token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_need_read_operate_or_admin() {
        assert_eq!(required(&Method::GET, "/v1/sessions"), Scope::Read);
        assert_eq!(
            required(&Method::GET, "/v1/sessions/{session_id}/events/sse"),
            Scope::Read
        );
        assert_eq!(
            required(&Method::POST, "/v1/sessions/{session_id}/cancel"),
            Scope::Operate
        );
        assert_eq!(required(&Method::GET, "/metrics"), Scope::Admin);
        assert_eq!(
            required(&Method::POST, "/v1/agents/{agent}/install"),
            Scope::Admin
        );
        assert_eq!(required(&Method::GET, "/v1/tokens"), Scope::Admin);
        assert_eq!(
            required(&Method::POST, "/v1/tokens/{token_id}/revoke"),
            Scope::Admin
        );
    }
}
