//! The delivery worker: takes the outbox rows due, posts each, signed, and records the try.
//!
//! Rows are taken at most one per endpoint and session at a time (the oldest undelivered: order
//! per session), posted concurrently across sessions, and a row's next try waits until it is
//! delivered or given up. A try is done when the endpoint answers 2xx; any other answer, a refused
//! connection, a TLS handshake refused (a certificate not verified) or no answer within the
//! timeout is tried again after [`super::RetryPolicy`]'s delay. An `https://` endpoint is only
//! ever posted to by the TLS client: never in clear, even when TLS cannot be set up. The row's state is written after the endpoint answered: a server killed between the two
//! sends the event again (at least once; `webhook-id` is the receiver's dedup key).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, Method, Request};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::WebhookConfig;
use crate::store::{AttemptOutcome, Delivery, DeliveryAttempt, Store};

/// Rows taken at once.
const BATCH: usize = 64;

/// The few members of an event a delivery needs.
#[derive(serde::Deserialize)]
struct EventHead<'a> {
    #[serde(borrow)]
    event_id: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    time: std::borrow::Cow<'a, str>,
}

/// What the worker works with.
pub(crate) struct Worker {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) config: Arc<WebhookConfig>,
    /// This server's identity: the lease holder in a shared store.
    pub(crate) server: String,
    pub(crate) metrics: crate::metrics::Shared,
    pub(crate) stopping: agent_api::request::CancellationToken,
}

/// The worker's HTTP clients: one for `http://` endpoints, one that speaks only TLS for
/// `https://` ones (`None` when TLS cannot be set up: their tries fail, nothing is sent).
struct Clients {
    plain: Client<HttpConnector, Body>,
    secure: Option<Client<HttpsConnector<HttpConnector>, Body>>,
}

impl Clients {
    fn new(config: &WebhookConfig) -> Self {
        let connector = |enforce_http: bool| {
            let mut connector = HttpConnector::new();
            connector.set_connect_timeout(Some(config.timeout));
            connector.enforce_http(enforce_http);
            connector
        };
        let builder = || {
            let mut builder = Client::builder(TokioExecutor::new());
            builder.pool_idle_timeout(Duration::from_secs(30));
            builder
        };
        let secure = if config
            .endpoints
            .iter()
            .any(super::WebhookEndpoint::is_https)
        {
            match config.tls() {
                Ok(tls) => {
                    let https = hyper_rustls::HttpsConnectorBuilder::new()
                        .with_tls_config(tls)
                        .https_only()
                        .enable_http1()
                        .wrap_connector(connector(false));
                    Some(builder().build(https))
                }
                Err(error) => {
                    tracing::warn!("https webhooks will not be delivered: {error}");
                    None
                }
            }
        } else {
            None
        };
        Self {
            plain: builder().build(connector(true)),
            secure,
        }
    }
}

/// Delivers until the server stops.
pub(crate) async fn run(worker: Worker) {
    let clients = Clients::new(&worker.config);
    let endpoints: Vec<String> = worker
        .config
        .endpoints
        .iter()
        .map(|e| e.key().to_string())
        .collect();
    // Longer than any try: a row is another server's only once its holder must have given up.
    let lease = worker.config.timeout * 2 + Duration::from_secs(5);
    let mut failing = false;
    while !worker.stopping.is_cancelled() {
        let due = worker
            .store
            .claim_deliveries(
                &worker.server,
                &endpoints,
                crate::store::now_ms(),
                lease,
                BATCH,
            )
            .await;
        let due = match due {
            Ok(due) => {
                failing = false;
                due
            }
            Err(error) => {
                if !failing {
                    tracing::warn!("cannot read the webhook outbox (tried again): {error}");
                }
                failing = true;
                Vec::new()
            }
        };
        if due.is_empty() {
            tokio::select! {
                () = tokio::time::sleep(worker.config.poll) => {}
                () = worker.stopping.cancelled() => return,
            }
            continue;
        }
        let sends = due.into_iter().map(|row| deliver(&worker, &clients, row));
        tokio::select! {
            _ = futures::future::join_all(sends) => {}
            // Rows in flight stay undelivered: sent again after the restart (at least once).
            () = worker.stopping.cancelled() => return,
        }
    }
}

/// The payload: the Standard Webhooks envelope (`type`, `timestamp`, `data`) around the session's
/// id, its agent and the universal event as stored (its `raw` always null).
fn payload(row: &Delivery, time: &str) -> String {
    let text = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    format!(
        r#"{{"type":"{}","timestamp":{},"data":{{"session_id":{},"agent":{},"event":{}}}}}"#,
        row.event.as_str(),
        text(time),
        text(&row.session),
        text(&row.agent),
        row.json
    )
}

/// What a try that got no answer is recorded as: `tls` (the handshake failed: a certificate not
/// verified, a receiver that does not speak TLS), `connect` (refused, unreachable), `request`.
fn failure_class(error: &hyper_util::client::legacy::Error) -> &'static str {
    if let Some(reason) = crate::tls::rustls_cause(error) {
        tracing::debug!("webhook TLS handshake failed: {reason}");
        "tls"
    } else if error.is_connect() {
        "connect"
    } else {
        "request"
    }
}

/// Posts one row and records what came of it.
async fn deliver(worker: &Worker, clients: &Clients, row: Delivery) {
    let config = &worker.config;
    let attempt = row.attempts.saturating_add(1);
    let head: Option<EventHead<'_>> = serde_json::from_str(&row.json).ok();
    let (event_id, time) = head
        .as_ref()
        .map_or(("", ""), |h| (h.event_id.as_ref(), h.time.as_ref()));
    let Some(endpoint) = config.endpoint(&row.endpoint) else {
        return;
    };
    let (status, error) = if event_id.is_empty() {
        // Not an event this server wrote: nothing to sign with, never deliverable.
        (None, Some("event".to_string()))
    } else {
        let body = payload(&row, time);
        let timestamp = crate::store::unix_now();
        let signature = super::sign(&config.secret, event_id, timestamp, body.as_bytes());
        let request = Request::builder()
            .method(Method::POST)
            .uri(endpoint.uri().clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(
                header::USER_AGENT,
                concat!("agent-api/", env!("CARGO_PKG_VERSION")),
            )
            .header("webhook-id", event_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(Body::from(body));
        match request {
            Err(_) => (None, Some("request".to_string())),
            Ok(mut request) => {
                if let Ok(host) =
                    HeaderValue::from_str(endpoint.uri().authority().map_or("", |a| a.as_str()))
                {
                    request.headers_mut().insert(header::HOST, host);
                }
                let sent = async {
                    match (endpoint.is_https(), &clients.secure) {
                        (false, _) => Some(clients.plain.request(request).await),
                        (true, Some(secure)) => Some(secure.request(request).await),
                        // No TLS to speak: not sent at all, rather than in clear.
                        (true, None) => None,
                    }
                };
                match tokio::time::timeout(config.timeout, sent).await {
                    Ok(None) => (None, Some("tls".to_string())),
                    Ok(Some(Ok(response))) if response.status().is_success() => {
                        (Some(response.status().as_u16()), None)
                    }
                    Ok(Some(Ok(response))) => {
                        (Some(response.status().as_u16()), Some("status".to_string()))
                    }
                    Ok(Some(Err(error))) => (None, Some(failure_class(&error).to_string())),
                    Err(_) => (None, Some("timeout".to_string())),
                }
            }
        }
    };
    let now = crate::store::now_ms();
    let (outcome, next_attempt_ms) = match &error {
        None => (AttemptOutcome::Delivered, None),
        Some(_) if attempt >= config.retry.max_attempts || event_id.is_empty() => {
            (AttemptOutcome::Abandoned, None)
        }
        Some(_) => {
            let delay = config.retry.jittered(attempt);
            let delay = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
            (AttemptOutcome::Retrying, Some(now.saturating_add(delay)))
        }
    };
    worker.metrics.webhook_delivery(outcome);
    if let Some(class) = &error {
        tracing::debug!(
            endpoint = %endpoint.shown(),
            session = %row.session,
            sequence = row.sequence,
            attempt,
            "webhook delivery failed ({class})"
        );
    }
    let record = DeliveryAttempt {
        endpoint: row.endpoint.clone(),
        session: row.session.clone(),
        sequence: row.sequence,
        event_id: event_id.to_string(),
        event: row.event,
        attempt,
        at_ms: now,
        status,
        error,
        outcome,
        next_attempt_ms,
    };
    if let Err(error) = worker.store.record_attempt(record).await {
        // The row stays as it was: tried again (sent twice if it was delivered).
        tracing::warn!("cannot record a webhook delivery: {error}");
    }
}
