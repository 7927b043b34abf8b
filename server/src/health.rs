//! `GET /v1/health/ready`: whether this server should be sent work now, for load balancers and
//! Kubernetes. `GET /v1/health` says only that the process answers; readiness asks the store to
//! take a write (reachable, writable, its migrations this server's), and whether the server is
//! draining (stopping: its streams ending, its sessions being terminated) or has no room for
//! another session. Both answer without a token and hold no data: fixed names of checks and
//! causes, never a store address, an error's text or a session.

use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::state::Server;

/// How long the store may take to answer a probe before it counts as unreachable: a load
/// balancer's probe must not hang on a database that does not answer.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// `GET /v1/health/ready`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReadinessResponse {
    /// `ready` (HTTP 200) or `not_ready` (HTTP 503).
    pub status: String,
    /// Each check, in a fixed order: `store`, `draining`, `sessions`.
    pub checks: Vec<ReadinessCheck>,
}

/// One readiness check.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReadinessCheck {
    /// `store`, `draining` or `sessions`.
    pub name: String,
    /// Whether it passed.
    pub ok: bool,
    /// Why not, as a fixed word: `unreachable`, `read_only`, `migrations` (store), `stopping`
    /// (draining), `full` (sessions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ReadinessCheck {
    fn new(name: &str, failed: Option<&str>) -> Self {
        Self {
            name: name.into(),
            ok: failed.is_none(),
            reason: failed.map(Into::into),
        }
    }
}

/// Whether the last probe found the store failing: a failure is logged when it starts and when
/// it ends, not at every probe.
static STORE_FAILING: AtomicBool = AtomicBool::new(false);

#[utoipa::path(get, path = "/v1/health/ready", operation_id = "get_readiness",
    responses((status = 200, body = ReadinessResponse), (status = 503, body = ReadinessResponse)))]
pub(crate) async fn ready(State(server): State<Server>) -> Response {
    let store = match tokio::time::timeout(PROBE_TIMEOUT, server.inner.store.probe()).await {
        Ok(Ok(())) => {
            if STORE_FAILING.swap(false, Ordering::Relaxed) {
                tracing::info!("readiness: the store takes writes again");
            }
            None
        }
        Ok(Err(error)) => {
            if !STORE_FAILING.swap(true, Ordering::Relaxed) {
                tracing::warn!("readiness: {error}");
            }
            Some(error.code())
        }
        Err(_) => {
            if !STORE_FAILING.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "readiness: the store did not answer within {} s",
                    PROBE_TIMEOUT.as_secs()
                );
            }
            Some("unreachable")
        }
    };
    let draining = (server.inner.draining.load(Ordering::SeqCst)
        || server.inner.stopping.is_cancelled())
    .then_some("stopping");
    let full = server.full().then_some("full");
    let checks = vec![
        ReadinessCheck::new("store", store),
        ReadinessCheck::new("draining", draining),
        ReadinessCheck::new("sessions", full),
    ];
    let ready = checks.iter().all(|c| c.ok);
    let status = match ready {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    let body = ReadinessResponse {
        status: if ready { "ready" } else { "not_ready" }.into(),
        checks,
    };
    (
        status,
        [(axum::http::header::CACHE_CONTROL, "no-store")],
        Json(body),
    )
        .into_response()
}
