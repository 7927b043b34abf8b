//! Who may reach the API: a request must name this server in its `Host` (an IP address,
//! `localhost`, or a name the operator configured), so a web page whose own name resolves to this
//! machine (DNS rebinding) reaches nothing; and a request a browser sends from another page's
//! `Origin` (a cross-site form or fetch, which needs no preflight for a simple POST) is refused
//! unless the operator allowed that origin for CORS. Both answer 403 before any handler runs,
//! with or without a token.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::hosts::{host_allowed, request_host, same_origin};
use crate::state::Server;

/// 403 unless the request's `Host` and `Origin` (when it has one) name this server.
pub(crate) async fn check(State(server): State<Server>, request: Request, next: Next) -> Response {
    let config = &server.inner.config;
    let host = request_host(request.headers(), request.uri());
    let Some(host) = host.filter(|host| host_allowed(host, &config.allowed_hosts)) else {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "host_not_allowed",
            "the request's Host is not one this server answers to: use its IP address or localhost, or a name its operator allowed (--allowed-host)",
        )
        .into_response();
    };
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let allowed = origin.to_str().is_ok_and(|origin| {
            config
                .cors_origins
                .iter()
                .any(|o| o.eq_ignore_ascii_case(origin))
                || same_origin(origin, &host)
        });
        if !allowed {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                "the request comes from a web page of another origin: its operator allows an origin with --cors-origin",
            )
            .into_response();
        }
    }
    next.run(request).await
}
