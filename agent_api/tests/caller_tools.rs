//! The caller-tools MCP server: tools listed and called through MCP, handler errors, panics and
//! hangs fail only their call, the secret is required, and the port closes with the server.

use std::time::Duration;

use agent_api::kit::caller_tools::client::{result_text, McpClient};
use agent_api::kit::caller_tools::{attach, SERVER_NAME};
use agent_api::request::CallerTool;
use agent_api::request::McpServer;
use agent_api::{AgentError, RunRequest};
use serde_json::{json, Value};

fn schema() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
}

fn request() -> RunRequest {
    RunRequest::new("hi")
        .with_tool(
            "weather",
            "Weather in a city",
            schema(),
            |input: Value| async move {
                match input["city"].as_str() {
                    Some("Atlantis") => Err("no such city".to_string()),
                    Some(city) => Ok(json!({"city": city, "sky": "sunny"})),
                    None => Err("city missing".to_string()),
                }
            },
        )
        .with_tool(
            "explode",
            "Panics",
            json!({"type": "object"}),
            |_| async move {
                if true {
                    panic!("boom");
                }
                Ok::<_, String>("never")
            },
        )
        .with_caller_tool(
            CallerTool::new(
                "hang",
                "Never answers",
                json!({"type": "object"}),
                |_| async move {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok::<_, String>("late")
                },
            )
            .with_timeout(Duration::from_millis(200)),
        )
}

/// The server entry `attach` added, and the client that uses its secret.
fn client_of(request: &RunRequest) -> (String, String, McpClient) {
    let Some(McpServer::Http { url, headers }) = request.portable.mcp_servers.get(SERVER_NAME)
    else {
        panic!("attach adds an HTTP MCP server named {SERVER_NAME}");
    };
    let auth = headers
        .get("Authorization")
        .expect("the secret is sent as a bearer header")
        .clone();
    let client = McpClient::new(url, Some(&auth)).unwrap();
    (url.clone(), auth, client)
}

#[tokio::test]
async fn tools_are_listed_and_called_over_mcp() {
    let mut request = request();
    let server = attach(&mut request)
        .await
        .unwrap()
        .expect("a request with tools gets a server");
    let (url, _, client) = client_of(&request);
    assert!(url.starts_with("http://127.0.0.1:"), "loopback only: {url}");
    client.initialize().await.unwrap();
    let names: Vec<String> = client
        .list_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["weather", "explode", "hang"]);

    let ok = client
        .call_tool("weather", json!({"city": "Paris"}))
        .await
        .unwrap();
    assert_ne!(ok["isError"], json!(true));
    assert_eq!(
        serde_json::from_str::<Value>(&result_text(&ok)).unwrap(),
        json!({"city": "Paris", "sky": "sunny"})
    );

    let failed = client
        .call_tool("weather", json!({"city": "Atlantis"}))
        .await
        .unwrap();
    assert_eq!(failed["isError"], json!(true));
    assert_eq!(result_text(&failed), "no such city");

    let panicked = client.call_tool("explode", json!({})).await.unwrap();
    assert_eq!(panicked["isError"], json!(true));
    assert!(result_text(&panicked).contains("panicked"));

    let hung = client.call_tool("hang", json!({})).await.unwrap();
    assert_eq!(hung["isError"], json!(true));
    assert!(result_text(&hung).contains("took longer"));

    // The server still serves after a panic and a timeout.
    let again = client
        .call_tool("weather", json!({"city": "Oslo"}))
        .await
        .unwrap();
    assert!(result_text(&again).contains("Oslo"));
    drop(server);
}

#[tokio::test]
async fn requests_without_the_secret_are_refused() {
    let mut request = request();
    let _server = attach(&mut request).await.unwrap().unwrap();
    let (url, auth, _) = client_of(&request);
    for wrong in [None, Some("Bearer nope"), Some(&auth[..auth.len() - 1])] {
        let client = McpClient::new(&url, wrong).unwrap();
        let refused = client.initialize().await.unwrap_err();
        assert!(
            matches!(
                refused,
                AgentError::Http {
                    status: Some(401),
                    ..
                }
            ),
            "{wrong:?}: {refused:?}"
        );
    }
}

#[tokio::test]
async fn the_port_closes_when_the_server_is_dropped() {
    let mut request = request();
    let server = attach(&mut request).await.unwrap().unwrap();
    let addr = server.addr();
    tokio::net::TcpStream::connect(addr)
        .await
        .expect("listening while held");
    drop(server);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the port is closed once the server is dropped"
    );
}

#[tokio::test]
async fn the_secret_never_shows_in_debug_output() {
    let mut request = request();
    let server = attach(&mut request).await.unwrap().unwrap();
    let secret = server.secret().to_string();
    assert!(secret.len() >= 32);
    for text in [
        format!("{request:?}"),
        format!("{server:?}"),
        format!("{:?}", request.portable),
    ] {
        assert!(!text.contains(&secret), "the secret leaked into {text}");
    }
}

#[tokio::test]
async fn bad_tool_definitions_fail_before_anything_starts() {
    let handler = |_: Value| async move { Ok::<_, String>("x") };
    for bad in [
        RunRequest::new("hi").with_tool("has space", "d", schema(), handler),
        RunRequest::new("hi")
            .with_tool("twice", "d", schema(), handler)
            .with_tool("twice", "d", schema(), handler),
        RunRequest::new("hi").with_tool("scalar", "d", json!(true), handler),
    ] {
        let mut bad = bad;
        assert!(matches!(
            attach(&mut bad).await,
            Err(AgentError::InvalidRequest { .. })
        ));
        assert!(bad.portable.mcp_servers.is_empty());
    }
}
