//! `GET /v1/webhooks/deliveries`: the delivery log, newest try first. A try shows its endpoint
//! (without its query), session, event, time, HTTP status or error class, and next try: never a
//! body, a header or the secret. A tenant's token sees its tenant's sessions' tries only.

use std::collections::HashMap;

use axum::extract::State;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::access::Caller;
use crate::error::{ApiError, QueryOf};
use crate::state::Server;
use crate::store::DeliveryAttempt;

/// The most tries one page shows.
const MAX_LIMIT: usize = 1000;

/// The log's query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeliveriesQuery {
    /// Only this session's tries.
    session: Option<String>,
    /// At most this many tries (default 100, at most 1000).
    limit: Option<usize>,
}

/// One try to deliver an event to an endpoint.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeliveryInfo {
    /// The endpoint's URL without its query (`key` when this server no longer has it).
    endpoint: String,
    /// The session.
    session_id: String,
    /// The event's sequence in the session.
    sequence: u64,
    /// The event's id: the `webhook-id` header, the receiver's dedup key.
    event_id: String,
    /// The webhook event (`turn.ended`, …).
    #[serde(rename = "type")]
    kind: String,
    /// Which try, from 1.
    attempt: u32,
    /// When it was made (RFC 3339).
    at: String,
    /// `delivered`, `retrying` or `abandoned`.
    outcome: String,
    /// The endpoint's HTTP status, when it answered.
    status: Option<u16>,
    /// Why it failed: `status` (not 2xx), `connect`, `tls`, `timeout` or `request`.
    error: Option<String>,
    /// When the next try is due (RFC 3339), when there is one.
    next_attempt_at: Option<String>,
}

/// The delivery log.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeliveriesResponse {
    /// The tries, newest first.
    deliveries: Vec<DeliveryInfo>,
}

fn info(server: &Server, attempt: DeliveryAttempt) -> DeliveryInfo {
    let endpoint = server
        .inner
        .config
        .webhooks
        .as_ref()
        .and_then(|w| w.endpoint(&attempt.endpoint))
        .map_or_else(|| attempt.endpoint.clone(), super::WebhookEndpoint::shown);
    DeliveryInfo {
        endpoint,
        session_id: attempt.session,
        sequence: attempt.sequence,
        event_id: attempt.event_id,
        kind: attempt.event.as_str().into(),
        attempt: attempt.attempt,
        at: crate::wire::rfc3339_ms(attempt.at_ms),
        outcome: attempt.outcome.as_str().into(),
        status: attempt.status,
        error: attempt.error,
        next_attempt_at: attempt.next_attempt_ms.map(crate::wire::rfc3339_ms),
    }
}

#[utoipa::path(get, path = "/v1/webhooks/deliveries", operation_id = "list_webhook_deliveries",
    params(DeliveriesQuery),
    responses((status = 200, body = DeliveriesResponse), (status = 400, body = crate::wire::ProblemDetails),
        (status = 500, body = crate::wire::ProblemDetails)))]
pub(crate) async fn deliveries(
    State(server): State<Server>,
    Extension(caller): Extension<Caller>,
    QueryOf(query): QueryOf<DeliveriesQuery>,
) -> Result<Json<DeliveriesResponse>, ApiError> {
    let limit = query.limit.unwrap_or(100).min(MAX_LIMIT);
    let none = || {
        Json(DeliveriesResponse {
            deliveries: Vec::new(),
        })
    };
    if server.inner.config.webhooks.is_none() {
        // No webhook: no log to read (and a store without an outbox would refuse).
        return Ok(none());
    }
    let store = &server.inner.store;
    // A tenant's token reads its tenant's sessions' tries only: another tenant's session is
    // answered as one with no try (nothing says it exists), and a log of every session is read
    // as far back as one page goes and kept to the tenant's.
    let (fetch, mut theirs_by_session) = match (&caller.tenant, query.session.as_deref()) {
        (None, _) => (limit, None),
        (Some(_), Some(id)) => match store.session(id).await? {
            Some(record) if caller.sees(record.tenant.as_deref()) => (limit, None),
            _ => return Ok(none()),
        },
        (Some(_), None) => (MAX_LIMIT, Some(HashMap::<String, bool>::new())),
    };
    let attempts = store
        .delivery_log(query.session.as_deref(), fetch)
        .await
        .map_err(ApiError::store)?;
    let mut deliveries = Vec::new();
    for attempt in attempts {
        if let Some(seen) = theirs_by_session.as_mut() {
            let theirs = match seen.get(&attempt.session) {
                Some(theirs) => *theirs,
                None => {
                    let record = store.session(&attempt.session).await?;
                    let theirs = record.is_some_and(|r| caller.sees(r.tenant.as_deref()));
                    seen.insert(attempt.session.clone(), theirs);
                    theirs
                }
            };
            if !theirs {
                continue;
            }
        }
        deliveries.push(info(&server, attempt));
        if deliveries.len() == limit {
            break;
        }
    }
    Ok(Json(DeliveriesResponse { deliveries }))
}
