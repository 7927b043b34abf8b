//! `GET /metrics`: the server's figures ([`crate::metrics`]) brought up to date and written in the
//! Prometheus (OpenMetrics) text format, behind the token like every data endpoint.

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::state::Server;

/// How long the store may take to count the resumable sessions for a scrape.
const SCRAPE_STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /metrics`.
pub(crate) async fn metrics(State(server): State<Server>) -> Response {
    let metrics = &server.inner.metrics;
    let live = server.live_ids();
    metrics.sessions_live.set(live.len() as i64);
    // A store that does not answer leaves the last figure.
    if let Ok(Ok(sessions)) =
        tokio::time::timeout(SCRAPE_STORE_TIMEOUT, server.inner.store.sessions()).await
    {
        let resumable = sessions
            .iter()
            .filter(|s| !s.ended && !live.contains(&s.id))
            .count();
        metrics.sessions_resumable.set(resumable as i64);
    }
    metrics
        .agent_processes
        .set(agent_api::kit::process::running() as i64);
    let mut body = String::with_capacity(8192);
    if let Err(error) = prometheus_client::encoding::text::encode(&mut body, &metrics.registry) {
        return crate::error::ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "stream_error",
            format!("the metrics cannot be written: {error}"),
        )
        .into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
