//! Logs and traces of `agent-api serve`.
//!
//! - [`init`] installs the process's `tracing` subscriber: logs on stderr, as text or as one JSON
//!   object a line ([`LogFormat`]), and OpenTelemetry spans (W3C trace context; the library's run,
//!   process, tool call and wait spans, the server's request, turn and store write spans),
//!   exported over OTLP/HTTP (protobuf) when the standard `OTEL_*` variables name an endpoint and
//!   the crate's `otlp` feature is built; off otherwise.
//! - `trace_request` (a middleware) makes each request's span, a child of the caller's
//!   `traceparent` when it sends one, and logs one line per request.
//!
//! What a line or a span holds: methods, paths, statuses, durations, ids, agent kinds, token
//! counts. Never a prompt, an answer, a tool's input or output, a header or a token.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// How the server's log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LogFormat {
    /// Text for a person; warnings and errors unless `AGENT_API_LOG` asks for more.
    #[default]
    Text,
    /// One JSON object a line, from `info` on (unless `AGENT_API_LOG` says otherwise): a line per
    /// request and per turn, with the session id and the trace id.
    Json,
}

/// Why the telemetry cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// `AGENT_API_LOG` is not a filter `tracing_subscriber::EnvFilter` reads.
    #[error("AGENT_API_LOG: {0}")]
    Filter(String),
    /// The `OTEL_*` variables ask for an export this build cannot make.
    #[error("{0}")]
    Export(String),
    /// A subscriber is installed already.
    #[error("the tracing subscriber cannot be installed: {0}")]
    Install(String),
}

/// The installed telemetry: dropping it sends the spans still buffered.
#[derive(Debug)]
pub struct Telemetry {
    provider: opentelemetry_sdk::trace::SdkTracerProvider,
    exporting: bool,
}

impl Telemetry {
    /// Whether spans are exported (the `OTEL_*` variables name an endpoint).
    pub fn exporting(&self) -> bool {
        self.exporting
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("agent-api: the last spans could not be exported: {error}");
        }
    }
}

/// Whether the `OTEL_*` variables ask for traces to be exported: an OTLP endpoint is named, the
/// SDK is not disabled and the traces exporter is not `none`.
fn export_asked() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    let exporter = std::env::var("OTEL_TRACES_EXPORTER").unwrap_or_default();
    let none = exporter.split(',').any(|e| e.trim() == "none");
    (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        && !disabled
        && !none
}

#[cfg(feature = "otlp")]
fn exporter() -> Result<opentelemetry_otlp::SpanExporter, TelemetryError> {
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_default();
    if !matches!(protocol.trim(), "" | "http/protobuf") {
        return Err(TelemetryError::Export(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={}: this server exports OTLP over http/protobuf only",
            agent_api::display::line(&protocol, 32)
        )));
    }
    use opentelemetry_otlp::WithExportConfig as _;
    opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .build()
        .map_err(|e| TelemetryError::Export(format!("the OTLP exporter: {e}")))
}

/// Installs the process's subscriber: logs on stderr in `format`, and OpenTelemetry spans,
/// exported when the `OTEL_*` variables ask. Keep the returned value until the process ends.
pub fn init(format: LogFormat) -> Result<Telemetry, TelemetryError> {
    let default = match format {
        LogFormat::Text => "warn",
        LogFormat::Json => "info",
    };
    let filter = match std::env::var("AGENT_API_LOG") {
        Ok(filter) => tracing_subscriber::EnvFilter::try_new(filter)
            .map_err(|e| TelemetryError::Filter(e.to_string()))?,
        Err(_) => tracing_subscriber::EnvFilter::new(default),
    };
    let logs = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .boxed(),
    }
    .with_filter(filter);
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder();
    let exporting = export_asked();
    #[cfg(feature = "otlp")]
    let provider = match exporting {
        true => provider.with_batch_exporter(exporter()?),
        false => provider,
    };
    #[cfg(not(feature = "otlp"))]
    if exporting {
        return Err(TelemetryError::Export(
            "the OTEL_* variables name an OTLP endpoint, but this build has no OTLP exporter (the `otlp` feature of agent_api_server)".into(),
        ));
    }
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("agent-api");
    }
    let provider = provider.with_resource(resource.build()).build();
    let tracer = provider.tracer("agent_api");
    // The spans of the library and the server, whatever the log filter says.
    let spans = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target("agent_api", tracing::Level::INFO)
                .with_target("agent_api_server", tracing::Level::INFO),
        );
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    tracing_subscriber::registry()
        .with(spans)
        .with(logs)
        .try_init()
        .map_err(|e| TelemetryError::Install(e.to_string()))?;
    Ok(Telemetry {
        provider,
        exporting,
    })
}

/// The trace id of `span` (32 hex digits), when OpenTelemetry gave it one.
pub(crate) fn trace_id(span: &tracing::Span) -> Option<String> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

/// The W3C `traceparent` of the current span, for an agent process that continues the trace
/// (`TRACEPARENT` in its environment), when OpenTelemetry gave it one.
pub(crate) fn traceparent() -> Option<String> {
    let context = tracing::Span::current().context();
    let mut carrier = std::collections::HashMap::new();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut carrier));
    carrier.remove("traceparent")
}

/// Header values as an OpenTelemetry carrier (to read `traceparent` and `tracestate`).
struct Headers<'a>(&'a axum::http::HeaderMap);

impl opentelemetry::propagation::Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The session a path names (`/v1/sessions/{id}…`), cut to 128 bytes.
fn session_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/v1/sessions/")?;
    let id = rest.split('/').next().filter(|id| !id.is_empty())?;
    Some(agent_api::display::line(id, 128))
}

/// The middleware making each request's span (continuing the caller's `traceparent`) and its log
/// line (`method`, `path`, `status`, `duration_ms`, `session_id`, `trace_id`).
pub(crate) async fn trace_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = agent_api::display::line(request.uri().path(), 256);
    let session = session_of(&path);
    let span = tracing::info_span!(
        target: "agent_api_server::request",
        "request",
        otel.name = %format_args!("{method} {}", route(&path)),
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = %method,
        url.path = %path,
        http.route = %route(&path),
        http.response.status_code = Empty,
        agent_api.session.id = session.as_deref(),
    );
    let parent =
        opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(request.headers())));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
    let response = tracing::Instrument::instrument(next.run(request), span.clone()).await;
    let status = response.status().as_u16();
    span.record("http.response.status_code", status);
    if response.status().is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    tracing::info!(
        target: "agent_api_server::request",
        parent: &span,
        method = %method,
        path = %path,
        status,
        duration_ms = started.elapsed().as_millis() as u64,
        session_id = session.as_deref(),
        trace_id = trace_id(&span).as_deref(),
        "request"
    );
    response
}

/// A path with its ids replaced by the route's names (`/v1/sessions/{session_id}/messages`):
/// a span name of bounded cardinality.
fn route(path: &str) -> String {
    /// `base`, then `rest` with the id after the collection `named` replaced by `id`.
    fn with(base: &str, rest: &[&str], named: &[(&str, &str)]) -> String {
        let mut route = String::from(base);
        for (i, part) in rest.iter().enumerate() {
            route.push('/');
            let id = named
                .iter()
                .find(|(collection, _)| i == 1 && rest[0] == *collection);
            route.push_str(id.map_or(*part, |(_, id)| id));
        }
        route
    }
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["", "v1", "sessions", _, rest @ ..] => with(
            "/v1/sessions/{session_id}",
            rest,
            &[
                ("permissions", "{permission_id}"),
                ("questions", "{question_id}"),
            ],
        ),
        ["", "v1", "agents", _, rest @ ..] => with(
            "/v1/agents/{agent}",
            rest,
            &[("history", "{native_session_id}")],
        ),
        ["", "ui", ..] => "/ui".into(),
        ["", "v1", "health"]
        | ["", "v1", "health", "ready"]
        | ["", "v1", "agents"]
        | ["", "v1", "sessions"]
        | ["", "v1", "openapi.json"]
        | ["", "metrics"] => path.into(),
        // Any other path is the client's: not a name of bounded cardinality.
        _ => "unmatched".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_names_ids_never_holds_them() {
        assert_eq!(
            route("/v1/sessions/s1/permissions/p9/reply"),
            "/v1/sessions/{session_id}/permissions/{permission_id}/reply"
        );
        assert_eq!(
            route("/v1/sessions/abc/messages"),
            "/v1/sessions/{session_id}/messages"
        );
        assert_eq!(
            route("/v1/agents/my_agent/history/n1/events"),
            "/v1/agents/{agent}/history/{native_session_id}/events"
        );
        assert_eq!(route("/ui/app.js"), "/ui");
        assert_eq!(route("/v1/health"), "/v1/health");
        assert_eq!(route("/anything/else"), "unmatched");
        assert_eq!(session_of("/v1/sessions/s1/events"), Some("s1".into()));
        assert_eq!(session_of("/v1/sessions"), None);
    }
}
