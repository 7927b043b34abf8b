//! A small HTTP client for agents whose two-way channel is a local HTTP server with a
//! server-sent event stream (for example a CLI's `serve` command): JSON requests and a decoded,
//! bounded SSE stream. Plain `http://` only: these servers listen on loopback.

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use http_body_util::{BodyExt, Empty, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use super::sse::{SseDecoder, SseEvent};
use crate::vocabulary::error::AgentError;

/// Largest JSON response body read, in bytes.
pub const MAX_JSON_BODY: usize = 16 * 1024 * 1024;
/// Largest single server-sent event kept, in bytes; larger ones are dropped.
pub const MAX_SSE_EVENT: usize = 16 * 1024 * 1024;

/// A JSON reply: its status and parsed body (`Value::Null` for an empty body).
#[derive(Debug, Clone, PartialEq)]
pub struct JsonReply {
    /// HTTP status code.
    pub status: u16,
    /// The parsed body.
    pub body: Value,
}

/// A client bound to one base URL, such as `http://127.0.0.1:4096`.
///
/// ```no_run
/// # async fn demo() -> Result<(), agent_api::AgentError> {
/// use agent_api::kit::http::HttpClient;
/// use futures::StreamExt;
/// let client = HttpClient::new("http://127.0.0.1:4096")?;
/// let session = client.post_json("/session", &serde_json::json!({})).await?;
/// let mut events = client.event_stream("/global/event").await?;
/// while let Some(event) = events.next().await {
///     println!("{}", event?.data);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct HttpClient {
    base: String,
    client: Client<HttpConnector, BoxBody>,
    headers: Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
}

type BoxBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

impl HttpClient {
    /// A client for `base_url` (`http://host:port`, no trailing path needed).
    pub fn new(base_url: &str) -> Result<Self, AgentError> {
        if !base_url.starts_with("http://") {
            return Err(AgentError::InvalidRequest {
                reason: "the agent's server URL must be http:// (a loopback server)".into(),
            });
        }
        let client = Client::builder(TokioExecutor::new()).build_http();
        Ok(Self {
            base: base_url.trim_end_matches('/').to_string(),
            client,
            headers: Vec::new(),
        })
    }

    /// Adds a header sent with every request (credentials, for example `authorization`). The
    /// value is marked sensitive, so it never shows in hyper's debug output.
    pub fn with_header(mut self, name: &'static str, value: &str) -> Result<Self, AgentError> {
        let mut value = hyper::header::HeaderValue::from_str(value).map_err(|_| {
            AgentError::InvalidRequest {
                reason: format!("the {name} header value is not valid in HTTP"),
            }
        })?;
        value.set_sensitive(true);
        self.headers
            .push((hyper::header::HeaderName::from_static(name), value));
        Ok(self)
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Response<Incoming>, AgentError> {
        let uri = format!("{}{path}", self.base);
        let mut builder = Request::builder().method(method).uri(&uri);
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        let body: BoxBody = match body {
            Some(value) => {
                builder = builder.header("content-type", "application/json");
                Full::new(Bytes::from(
                    serde_json::to_vec(value).expect("a Value serializes"),
                ))
                .boxed()
            }
            None => Empty::new().boxed(),
        };
        let request = builder.body(body).map_err(|e| AgentError::Http {
            status: None,
            reason: format!("bad request for {path}: {e}"),
        })?;
        self.client
            .request(request)
            .await
            .map_err(|e| AgentError::Http {
                status: None,
                reason: format!("{path}: {e}"),
            })
    }

    async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<JsonReply, AgentError> {
        let response = self.send(method, path, body).await?;
        let status = response.status().as_u16();
        let bytes = Limited::new(response.into_body(), MAX_JSON_BODY)
            .collect()
            .await
            .map_err(|e| AgentError::Http {
                status: Some(status),
                reason: format!("{path}: reading the body failed: {e}"),
            })?
            .to_bytes();
        let body = if bytes.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|e| AgentError::Http {
                status: Some(status),
                reason: format!("{path}: the body is not JSON: {e}"),
            })?
        };
        Ok(JsonReply { status, body })
    }

    /// `POST path` with a JSON body; any status is returned (check `status`).
    pub async fn post_json(&self, path: &str, body: &Value) -> Result<JsonReply, AgentError> {
        self.json(Method::POST, path, Some(body)).await
    }

    /// `GET path`, parsing a JSON body.
    pub async fn get_json(&self, path: &str) -> Result<JsonReply, AgentError> {
        self.json(Method::GET, path, None).await
    }

    /// `GET path` as a server-sent event stream; events arrive decoded as the server sends them.
    pub async fn event_stream(
        &self,
        path: &str,
    ) -> Result<BoxStream<'static, Result<SseEvent, AgentError>>, AgentError> {
        let response = self.send(Method::GET, path, None).await?;
        let status = response.status().as_u16();
        if !response.status().is_success() {
            return Err(AgentError::Http {
                status: Some(status),
                reason: format!("{path}: the event stream was refused"),
            });
        }
        let state = (
            response.into_body(),
            SseDecoder::new(MAX_SSE_EVENT),
            std::collections::VecDeque::new(),
        );
        let stream =
            futures::stream::unfold(state, |(mut body, mut decoder, mut ready)| async move {
                loop {
                    if let Some(event) = ready.pop_front() {
                        return Some((Ok(event), (body, decoder, ready)));
                    }
                    match body.frame().await {
                        None => return None,
                        Some(Err(e)) => {
                            return Some((
                                Err(AgentError::Http {
                                    status: None,
                                    reason: format!("the event stream broke: {e}"),
                                }),
                                (body, decoder, ready),
                            ))
                        }
                        Some(Ok(frame)) => {
                            if let Ok(data) = frame.into_data() {
                                ready.extend(decoder.push(&data));
                            }
                        }
                    }
                }
            });
        Ok(stream.boxed())
    }
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::{get, post};

    async fn server() -> String {
        let app = axum::Router::new()
            .route("/echo", post(|body: String| async move { body }))
            .route("/empty", post(|| async { "" }))
            .route(
                "/auth",
                get(|headers: axum::http::HeaderMap| async move {
                    serde_json::json!(headers.get("authorization").and_then(|v| v.to_str().ok()))
                        .to_string()
                }),
            )
            .route(
                "/events",
                get(|| async {
                    (
                        [("content-type", "text/event-stream")],
                        "data: {\"a\":1}\n\nevent: done\ndata: 2\n\n",
                    )
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn json_requests_round_trip_and_empty_bodies_are_null() {
        let client = HttpClient::new(&server().await).unwrap();
        let reply = client
            .post_json("/echo", &serde_json::json!({"x": [1, 2]}))
            .await
            .unwrap();
        assert_eq!(
            reply,
            JsonReply {
                status: 200,
                body: serde_json::json!({"x": [1, 2]})
            }
        );
        assert_eq!(
            client.post_json("/empty", &Value::Null).await.unwrap().body,
            Value::Null
        );
        assert_eq!(client.get_json("/missing").await.unwrap().status, 404);
    }

    #[tokio::test]
    async fn an_event_stream_is_decoded_event_by_event() {
        let client = HttpClient::new(&server().await).unwrap();
        let events: Vec<SseEvent> = client
            .event_stream("/events")
            .await
            .unwrap()
            .map(Result::unwrap)
            .collect()
            .await;
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].data, "{\"a\":1}");
        assert_eq!(events[1].event.as_deref(), Some("done"));
    }

    #[tokio::test]
    async fn headers_go_with_every_request() {
        let client = HttpClient::new(&server().await)
            .unwrap()
            .with_header("authorization", "Basic abc")
            .unwrap();
        assert_eq!(client.get_json("/auth").await.unwrap().body, "Basic abc");
        assert!(matches!(
            client.with_header("authorization", "bad\nvalue"),
            Err(AgentError::InvalidRequest { .. })
        ));
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_typed_error() {
        let client = HttpClient::new("http://127.0.0.1:9").unwrap();
        assert!(matches!(
            client.get_json("/x").await,
            Err(AgentError::Http { status: None, .. })
        ));
        assert!(matches!(
            HttpClient::new("https://example.invalid"),
            Err(AgentError::InvalidRequest { .. })
        ));
    }
}
