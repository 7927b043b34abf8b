//! `agent-api serve`: the universal session API over HTTP and SSE, in the wire format of the
//! sandbox-agent v0.1.2 daemon (`spec/http-api.md`), with sessions kept in a store.
//!
//! The server uses the library's public API only: a [`agent_api::Gateway`] opens a
//! [`agent_api::Session`] per HTTP session, each message is a turn
//! ([`agent_api::Session::send`]), its universal events are numbered in the session, written to
//! the [`store`] and only then served (HTTP pages, SSE), and permission and question replies go to
//! the turn's [`agent_api::RunControl`]. A backend added to the library is served with no change
//! here.
//!
//! - [`Server`]: the gateway, the session template, the store, the live sessions.
//! - [`router`]: the axum routes, with bearer auth, CORS and body bounds from [`ServerConfig`].
//! - [`serve`]: runs the router on a listener until a shutdown future resolves (then drains for
//!   [`ServerConfig::drain`], not ready, before it stops).
//! - [`telemetry`]: the process's logs (text or JSON) and OpenTelemetry traces (OTLP with the
//!   `otlp` feature); [`health`]: readiness.

mod access;
mod agents;
mod api;
mod config;
mod conn;
pub mod continuity;
mod error;
mod fleet;
mod follow;
mod guard;
mod handoff;
pub mod health;
mod hosts;
mod live;
mod metrics;
mod observe;
pub mod openapi;
mod policy;
mod polls;
mod private;
mod remote;
mod ring;
mod scrape;
mod start;
mod state;
pub mod store;
pub mod telemetry;
mod tenant;
mod tls;
mod token_admin;
mod turn;
mod turn_log;
pub mod ui;
mod upkeep;
mod waiters;
pub mod webhooks;
pub mod wire;

use axum::http::{header, HeaderValue, Method};
use axum::routing::{get, post};
use axum::Router;

pub use config::{ConfigError, ServerConfig};
pub use error::ApiError;
pub use state::{Server, AGENT_ALIASES, INTERRUPTED};
pub use store::tokens;
pub use store::{Store, StoreError, StoreUrl};
pub use tenant::Tenant;

/// The routes: the reference's 14 operations, `GET /v1/openapi.json`, `GET /v1/sessions/{id}` and
/// `POST /v1/sessions/{id}/cancel` and `/steer`, `GET /v1/sessions/{id}/turns/{turn}`,
/// `GET /v1/health/ready` ([`health`]), `GET /v1/whoami`, the tokens' `/v1/tokens` (an admin's)
/// and `GET /metrics`; every one but health
/// and readiness behind a bearer token (the server's own, or a scoped one from the store:
/// [`tokens`]) and its scope and tenant;
/// and the inspector's page under `/ui/` ([`ui`]), whose files need no token. Every request is
/// a span and a log line ([`telemetry`]).
pub fn router(server: Server) -> Router {
    let config = server.inner.config.clone();
    let api = Router::new()
        .route("/v1/agents", get(api::list_agents))
        .route("/v1/agents/{agent}/modes", get(api::agent_modes))
        .route("/v1/agents/{agent}/install", post(api::install_agent))
        .route("/v1/agents/{agent}/history", get(api::agent_history))
        .route(
            "/v1/agents/{agent}/history/{native_session_id}/events",
            get(api::agent_history_events),
        )
        .route("/v1/sessions", get(api::list_sessions))
        .route(
            "/v1/sessions/{session_id}",
            post(api::create_session).get(api::get_session),
        )
        .route(
            "/v1/sessions/{session_id}/messages",
            post(api::post_message),
        )
        .route(
            "/v1/sessions/{session_id}/messages/stream",
            post(api::post_message_stream),
        )
        .route("/v1/sessions/{session_id}/turns/{turn}", get(api::get_turn))
        .route("/v1/sessions/{session_id}/events", get(api::get_events))
        .route(
            "/v1/sessions/{session_id}/events/sse",
            get(api::get_events_sse),
        )
        .route(
            "/v1/sessions/{session_id}/permissions/{permission_id}/reply",
            post(api::reply_permission),
        )
        .route(
            "/v1/sessions/{session_id}/questions/{question_id}/reply",
            post(api::reply_question),
        )
        .route(
            "/v1/sessions/{session_id}/questions/{question_id}/reject",
            post(api::reject_question),
        )
        .route(
            "/v1/sessions/{session_id}/terminate",
            post(api::terminate_session),
        )
        .route("/v1/sessions/{session_id}/cancel", post(api::cancel_turn))
        .route("/v1/sessions/{session_id}/steer", post(api::steer_turn))
        .route(
            "/v1/sessions/{session_id}/resume",
            post(api::resume_session),
        )
        .route("/v1/webhooks/deliveries", get(webhooks::log::deliveries))
        .route("/v1/openapi.json", get(openapi::openapi))
        .route("/v1/whoami", get(access::whoami))
        .route(
            "/v1/tokens",
            get(token_admin::list).post(token_admin::create),
        )
        .route("/v1/tokens/{token_id}/revoke", post(token_admin::revoke))
        .route("/metrics", get(scrape::metrics))
        .fallback(api::not_found)
        // Inside the token's check: a command is handed on only once its client is known.
        .route_layer(axum::middleware::from_fn_with_state(
            server.clone(),
            fleet::route,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            server.clone(),
            access::authorize,
        ));
    let mut app = Router::new()
        .route("/v1/health", get(api::health))
        .route("/v1/health/ready", get(health::ready))
        // The inspector's files hold no data: served without the token (the page sends it).
        .route("/ui", get(ui::root))
        .route("/ui/", get(ui::page))
        .route("/ui/{*path}", get(ui::asset))
        .merge(api)
        .layer(axum::middleware::from_fn(telemetry::trace_request))
        .layer(axum::extract::DefaultBodyLimit::max(config.max_body_bytes))
        // A request body that stops coming holds its connection no longer than an idle one.
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            config.idle_timeout,
        ))
        .layer(axum::middleware::from_fn_with_state(
            server.clone(),
            guard::check,
        ))
        .with_state(server);
    // Only what `ServerConfig::check` accepts: `*` would make the layer panic.
    let origins: Vec<HeaderValue> = config
        .cors_origins
        .iter()
        .filter(|o| hosts::is_origin(o))
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    if !origins.is_empty() {
        app = app.layer(
            tower_http::cors::CorsLayer::new()
                .allow_origin(origins)
                .allow_methods([Method::GET, Method::POST])
                .allow_headers([
                    header::AUTHORIZATION,
                    header::CONTENT_TYPE,
                    header::HeaderName::from_static("last-event-id"),
                ]),
        );
    }
    app
}

/// Serves `server` on `listener` until `shutdown` resolves, then serves on, not ready, for
/// [`ServerConfig::drain`], then (opening no session) lets running turns finish for at most
/// [`ServerConfig::drain_timeout`] while releasing each idle session, ends its SSE streams (so that their connections close), waits for the
/// requests in flight, and stops its sessions' agents, leaving the sessions resumable
/// ([`Server::release_all`]). Connections are bounded as
/// [`ServerConfig`] says (`max_connections`, `header_timeout`, `idle_timeout`, `sse_stall`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: Server,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(server.clone());
    let stopping = server.inner.stopping.clone();
    let draining = server.clone();
    tokio::spawn(async move {
        shutdown.await;
        // Not ready from now on; the streams end once a load balancer has had time to notice.
        let inner = &draining.inner;
        inner
            .draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(inner.config.drain).await;
        draining.drain_turns().await;
        inner.stopping.cancel();
    });
    let served = conn::accept(listener, app, &server.inner.config, stopping).await;
    server.release_all().await;
    served
}
