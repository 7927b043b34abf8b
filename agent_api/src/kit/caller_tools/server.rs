//! The caller-tools MCP server: rmcp's streamable HTTP service behind a bearer check, on a
//! loopback listener that lives until the [`ToolServer`] is dropped.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::CallerTool;
use crate::vocabulary::portable::McpServer;

/// The path the MCP endpoint is served at.
const PATH: &str = "/mcp";

/// A running caller-tools MCP server; dropping it closes its port and ends its connections.
pub struct ToolServer {
    addr: SocketAddr,
    secret: String,
    _stop: DropGuard,
}

impl std::fmt::Debug for ToolServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ToolServer {
    /// Serves `tools` on 127.0.0.1 on an ephemeral port, with a fresh random secret.
    pub async fn start(tools: Vec<CallerTool>) -> std::io::Result<Self> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let secret = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let stop = CancellationToken::new();
        let handler = Handler {
            tools: Arc::new(tools),
        };
        // Stateless with plain JSON replies: no session to keep, and one POST is one round trip.
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_cancellation_token(stop.child_token());
        let mcp = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let expected = Arc::new(format!("Bearer {secret}"));
        tokio::spawn(accept(listener, mcp, expected, stop.clone()));
        Ok(Self {
            addr,
            secret,
            _stop: stop.drop_guard(),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its URL (`http://127.0.0.1:PORT/mcp`).
    pub fn url(&self) -> String {
        format!("http://{}{PATH}", self.addr)
    }

    /// The run's secret, which every request must carry as `Authorization: Bearer SECRET`.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The server as an MCP server entry of the request, its secret in the `Authorization` header.
    pub fn mcp_server(&self) -> McpServer {
        McpServer::Http {
            url: self.url(),
            headers: BTreeMap::from([("Authorization".into(), format!("Bearer {}", self.secret))]),
        }
    }
}

type Mcp = StreamableHttpService<Handler, LocalSessionManager>;
type HttpResponse = Response<BoxBody<Bytes, Infallible>>;

/// Accepts connections until `stop`; each connection also ends at `stop`.
async fn accept(listener: TcpListener, mcp: Mcp, expected: Arc<String>, stop: CancellationToken) {
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::debug!(%error, "caller-tools server: accept failed");
                    continue;
                }
            },
        };
        let (mcp, expected, stop) = (mcp.clone(), expected.clone(), stop.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                respond(mcp.clone(), expected.clone(), request)
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = connection => {}
            }
        });
    }
}

/// Answers one request: 401 without the secret, 404 off the endpoint, else the MCP service.
async fn respond(
    mcp: Mcp,
    expected: Arc<String>,
    request: Request<Incoming>,
) -> Result<HttpResponse, Infallible> {
    let presented = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !constant_time_eq(presented, expected.as_bytes()) {
        return Ok(status(StatusCode::UNAUTHORIZED));
    }
    if request.uri().path() != PATH {
        return Ok(status(StatusCode::NOT_FOUND));
    }
    Ok(mcp.handle(request).await)
}

fn status(code: StatusCode) -> HttpResponse {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = code;
    response
}

/// Compares without an early exit, so the time taken does not tell how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The MCP side: lists the tools and runs their handlers.
#[derive(Clone)]
struct Handler {
    tools: Arc<Vec<CallerTool>>,
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.tools.iter().map(to_mcp_tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = self.tools.iter().find(|t| t.name() == request.name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool named {}", request.name),
                None,
            ));
        };
        let input = Value::Object(request.arguments.unwrap_or_default());
        Ok(call(tool, input).await.into())
    }
}

fn to_mcp_tool(tool: &CallerTool) -> Tool {
    let schema = tool.input_schema().as_object().cloned().unwrap_or_default();
    Tool::new(
        tool.name().to_owned(),
        tool.description().to_owned(),
        Arc::new(schema),
    )
}

/// Runs the handler on its own task, so a panic or a hang fails this call and nothing else.
pub(crate) async fn call(tool: &CallerTool, input: Value) -> CallToolResult {
    let mut task = tokio::spawn((tool.handler)(input));
    let outcome = match tokio::time::timeout(tool.timeout(), &mut task).await {
        Ok(Ok(result)) => result,
        Ok(Err(joined)) if joined.is_panic() => {
            Err(format!("the handler of tool {} panicked", tool.name()))
        }
        Ok(Err(_)) => Err(format!("the handler of tool {} was cancelled", tool.name())),
        Err(_) => {
            task.abort();
            Err(format!(
                "the handler of tool {} took longer than {:?}",
                tool.name(),
                tool.timeout()
            ))
        }
    };
    match outcome {
        Ok(output) => CallToolResult::success(vec![ContentBlock::text(output.into_text())]),
        Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
    }
}
