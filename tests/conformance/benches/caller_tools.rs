//! Round trip of a caller-defined tool call, model server excluded: an MCP client on loopback
//! (the SDK's own, as the scripted agent uses it) sends `tools/call` with the run's secret, the
//! caller-tools server runs the handler, and the result comes back.
//!
//! `cargo bench -p agent_api_conformance --bench caller_tools` warms up with 100 calls, times
//! 2,000, and prints `caller tool round trip p50/p99: <a>/<b> ms`.

use std::time::Instant;

use agent_api::kit::caller_tools::client::McpClient;
use agent_api::kit::caller_tools::{attach, SERVER_NAME};
use agent_api::request::McpServer;
use agent_api::RunRequest;
use serde_json::{json, Value};

const WARMUP: usize = 100;
const CALLS: usize = 2_000;

#[tokio::main]
async fn main() {
    let mut request = RunRequest::new("bench").with_tool(
        "echo",
        "Echoes its input",
        json!({"type": "object"}),
        |input: Value| async move { Ok::<_, String>(input) },
    );
    let _server = attach(&mut request).await.unwrap().unwrap();
    let Some(McpServer::Http { url, headers }) = request.portable.mcp_servers.get(SERVER_NAME)
    else {
        unreachable!("attach adds it")
    };
    let client = McpClient::new(url, headers.get("Authorization").map(String::as_str)).unwrap();
    client.initialize().await.unwrap();
    let mut times = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let start = Instant::now();
        let result = client.call_tool("echo", json!({"i": i})).await.unwrap();
        let elapsed = start.elapsed().as_secs_f64() * 1000.0;
        assert_ne!(result["isError"], json!(true));
        if i >= WARMUP {
            times.push(elapsed);
        }
    }
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!(
        "caller tool round trip p50/p99: {:.3}/{:.3} ms",
        at(0.50),
        at(0.99)
    );
}
