//! End-to-end checks of caller-defined tools, shared by every backend's e2e tests (bench
//! scenario `caller_tool`): the agent calls the tool by the name it advertises, its result
//! reaches the final answer, the call shows in both views with the tools facet, the MCP server
//! refuses a request without the run's secret, and its port is closed once the run has ended,
//! also when the run is cancelled.
//!
//! The two checks watch this process's own listening sockets, so run them one after the other
//! in a test binary that starts no other server meanwhile.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_api::kit::caller_tools::client::McpClient;
use agent_api::universal::ItemKind;
use agent_api::{AgentBackend, AgentError, AgentWrapperEventKind, RunRequest};
use serde_json::{json, Value};

use crate::record;

/// The tool's name; the bench's `caller_tool` scenario finds it by this suffix.
pub const TOOL: &str = "agent_api_probe";
/// What the tool answers; the final answer must carry it.
pub const ANSWER: &str = "sunny-42";

/// Loopback TCP ports this process listens on.
pub fn own_listening_ports() -> BTreeSet<u16> {
    let inodes: BTreeSet<String> = std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            target
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')
                .map(str::to_owned)
        })
        .collect();
    let table = std::fs::read_to_string("/proc/self/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            let port = u16::from_str_radix(local.split(':').nth(1)?, 16).ok()?;
            (*state == "0A" && inodes.contains(*inode)).then_some(port)
        })
        .collect()
}

/// What the handler saw on each call: its input, and whether every new port refused a request
/// without the secret.
#[derive(Debug, Default)]
struct Calls {
    inputs: Vec<Value>,
    ports: BTreeSet<u16>,
    refused_without_secret: Vec<bool>,
}

/// Every listening port of this process not in `before`, each probed without the secret.
async fn probe_new_ports(before: &BTreeSet<u16>) -> (BTreeSet<u16>, bool) {
    let new: BTreeSet<u16> = own_listening_ports().difference(before).copied().collect();
    let mut refused = !new.is_empty();
    for port in &new {
        let client = McpClient::new(&format!("http://127.0.0.1:{port}/mcp"), None).unwrap();
        refused &= matches!(
            client.initialize().await,
            Err(AgentError::Http {
                status: Some(401),
                ..
            })
        );
    }
    (new, refused)
}

/// Runs `request` (scenario `caller_tool`) on `backend` with the probe tool and checks the round trip.
pub async fn assert_round_trip(backend: &dyn AgentBackend, request: RunRequest) {
    let before = own_listening_ports();
    let calls = Arc::new(Mutex::new(Calls::default()));
    let seen = calls.clone();
    let schema =
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let request = request.with_tool(
        TOOL,
        "Today's forecast for a city",
        schema,
        move |input: Value| {
            let (seen, before) = (seen.clone(), before.clone());
            async move {
                let (ports, refused) = probe_new_ports(&before).await;
                let mut calls = seen.lock().unwrap();
                calls.inputs.push(input);
                calls.ports.extend(ports);
                calls.refused_without_secret.push(refused);
                Ok::<_, String>(json!({"forecast": ANSWER}))
            }
        },
    );
    let run = record(backend.run(request).await.unwrap()).await;
    let completion = run
        .completion
        .as_ref()
        .unwrap_or_else(|e| panic!("the run failed: {e}"));
    let calls = std::mem::take(&mut *calls.lock().unwrap());
    let answer = completion.final_text.clone().unwrap_or_default();
    assert_eq!(
        calls.inputs,
        [json!({"city": "Paris"})],
        "the handler got the model's input once; the answer: {answer}; items: {:?}",
        run.universal
            .iter()
            .filter_map(|e| e.completed_item())
            .map(|i| format!("{:?}", i.content))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        calls.refused_without_secret,
        [true],
        "the MCP server must refuse a request without the secret"
    );
    assert!(
        answer.contains(ANSWER) && answer.starts_with("Tool finished"),
        "the tool result is not in the answer: {answer}"
    );
    let items = run.completed_items(ItemKind::ToolCall);
    assert!(
        items
            .iter()
            .any(|i| serde_json::to_string(i).unwrap().contains(TOOL)),
        "no tool_call item for {TOOL}: {items:?}"
    );
    let facets: Vec<_> = run
        .wrapper
        .iter()
        .filter(|e| e.kind == AgentWrapperEventKind::ToolCall)
        .filter_map(|e| e.tools_facet())
        .collect();
    // ACP agents name the tool only in the call's id (the facet's tool_name is ACP's kind, `other`).
    let names_it = |f: &&agent_api::run::ToolsFacet| {
        [&f.tool_name, &f.tool_use_id]
            .iter()
            .any(|n| n.as_deref().is_some_and(|n| n.contains(TOOL)))
    };
    assert!(
        facets.iter().any(|f| names_it(&f)),
        "no ToolCall event with the tools facet: {facets:?}"
    );
    let shown = format!("{:?}{:?}", run.universal, run.wrapper);
    assert!(
        !shown.contains("Bearer"),
        "the secret's header reached an event"
    );
    assert_ports_closed(&calls.ports).await;
}

/// Cancels a run while the tool's handler is running, then checks the server is gone.
pub async fn assert_gone_after_cancel(backend: &dyn AgentBackend, request: RunRequest) {
    let before = own_listening_ports();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<BTreeSet<u16>>();
    let started = Arc::new(Mutex::new(Some(started_tx)));
    let schema = json!({"type": "object"});
    let request = request.with_tool(TOOL, "Never answers", schema, move |_| {
        let (started, before) = (started.clone(), before.clone());
        async move {
            let (ports, _) = probe_new_ports(&before).await;
            if let Some(tx) = started.lock().unwrap().take() {
                let _ = tx.send(ports);
            }
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, String>("late")
        }
    });
    let handle = backend.run(request).await.unwrap();
    let control = handle.control();
    let run = tokio::spawn(record(handle));
    let ports = tokio::time::timeout(Duration::from_secs(120), started_rx)
        .await
        .expect("the tool was called")
        .unwrap();
    control.cancel();
    let run = run.await.unwrap();
    assert!(
        matches!(run.completion, Err(AgentError::Cancelled)),
        "{:?}",
        run.completion
    );
    assert_ports_closed(&ports).await;
}

async fn assert_ports_closed(ports: &BTreeSet<u16>) {
    assert!(
        !ports.is_empty(),
        "the caller-tools server was never seen listening"
    );
    // The driver drops the server as it ends, just after the completion resolves.
    for _ in 0..50 {
        if own_listening_ports().is_disjoint(ports) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the caller-tools server still listens after the run: {ports:?}");
}
