//! A message's options beyond the reference (`spec/http-api.md`, "Per-message options"), over
//! HTTP with the scripted agent: the session's own options may be repeated, any other value is
//! refused naming its field; images named by a hostile path or sent malformed are refused naming
//! the image, and nothing reaches the agent or the transcript.

mod common;

use std::path::Path;

use agent_api_server::ServerConfig;
use common::*;
use serde_json::{json, Value};

const PNG: &[u8] = &[0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// Posts `body` as a message and returns the 400's detail.
async fn refused(api: &Api, session: &str, body: Value) -> String {
    let answer = api
        .post(&format!("/v1/sessions/{session}/messages"), body)
        .await;
    answer.problem(400)["detail"].as_str().unwrap().to_string()
}

async fn event_count(api: &Api, session: &str) -> u64 {
    api.get(&format!("/v1/sessions/{session}")).await.json()["eventCount"]
        .as_u64()
        .unwrap()
}

#[tokio::test]
async fn a_message_repeats_the_sessions_options_freely_and_is_refused_naming_one_it_would_change() {
    let api = start(ServerConfig::default()).await;
    let created = scripted("echo");
    api.post("/v1/sessions/opts", created.clone()).await;
    let same = json!({
        "message": "first",
        "options": created["options"],
        "permissionMode": "default",
        "agentMode": "build",
    });
    assert_eq!(
        api.post("/v1/sessions/opts/messages", same).await.status,
        204
    );
    let before = api.wait_for("opts", "item.completed").await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let count = event_count(&api, "opts").await;

    for (field, value) in [
        ("model", json!("another-model")),
        ("permissionMode", json!("bypass")),
        ("variant", json!("high")),
        ("options", json!({"backend.scripted.scenario": "text"})),
        ("systemPrompt", json!("be brief")),
        ("appendSystemPrompt", json!("and kind")),
        ("turnTimeoutSecs", json!(5)),
        ("maxTurns", json!(2)),
        ("maxTokens", json!(1000)),
        ("maxCostUsd", json!(0.5)),
        ("startupTimeoutSecs", json!(5)),
        ("idleTimeoutSecs", json!(5)),
        ("outputSchema", json!({"type": "object"})),
        ("allowedTools", json!(["Bash"])),
        ("deniedTools", json!(["Bash"])),
        ("resume", json!("native-1")),
        ("fork", json!("native-1")),
        ("agentVersion", json!("1.0.0")),
    ] {
        let detail = refused(&api, "opts", json!({"message": "second", field: value})).await;
        assert!(detail.starts_with(field), "{field}: {detail}");
    }
    // The scripted agent has no mode `yolo`: the switch is refused naming the field.
    let detail = refused(
        &api,
        "opts",
        json!({"message": "second", "agentMode": "yolo"}),
    )
    .await;
    assert!(detail.starts_with("agentMode: "), "{detail}");
    assert_eq!(
        event_count(&api, "opts").await,
        count,
        "a refused message adds nothing to the transcript"
    );

    // The session goes on: the refused messages never reached the agent.
    assert_eq!(
        api.post("/v1/sessions/opts/messages", json!({"message": "second"}))
            .await
            .status,
        204
    );
    let deadline = tokio::time::Instant::now() + STEP;
    let events = loop {
        let events = api.all_events("opts", 1000).await;
        let said: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["role"] == "assistant")
            .filter_map(|e| e["data"]["item"]["content"][0]["text"].as_str())
            .collect();
        // The scripted `echo` says each prompt back: no refused message's text is there.
        if said.len() >= 2 {
            assert_eq!(said, ["first", "second"]);
            break events;
        }
        assert!(tokio::time::Instant::now() < deadline, "{said:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(events.len() > before.len());
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, (1..=events.len() as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_sessions_limits_apply_to_its_turns_and_an_option_it_cannot_honour_is_refused_before_it_opens(
) {
    let api = start(ServerConfig::default()).await;
    let mut body = scripted("text");
    body["maxTokens"] = json!(1);
    assert_eq!(api.post("/v1/sessions/tokens", body).await.status, 200);
    assert_eq!(
        api.post(
            "/v1/sessions/tokens/messages",
            json!({"message": "hello", "maxTokens": 1})
        )
        .await
        .status,
        204
    );
    let events = api.wait_for("tokens", "error").await;
    let error = events.iter().find(|e| e["type"] == "error").unwrap();
    assert_eq!(error["data"]["code"], "limit_reached", "{error}");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        refused(&api, "tokens", json!({"message": "more", "maxTokens": 2}))
            .await
            .starts_with("maxTokens")
    );

    let mut body = scripted("text");
    body["maxCostUsd"] = json!(0.25);
    body["idleTimeoutSecs"] = json!(30);
    body["startupTimeoutSecs"] = json!(30);
    assert_eq!(api.post("/v1/sessions/cost", body).await.status, 200);
    assert_eq!(
        api.post("/v1/sessions/cost/messages", json!({"message": "hello"}))
            .await
            .status,
        204
    );
    let deadline = tokio::time::Instant::now() + STEP;
    let events = loop {
        let events = api.all_events("cost", 1000).await;
        if events.iter().any(turn_end) {
            break events;
        }
        assert!(tokio::time::Instant::now() < deadline, "{events:#?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let unchecked = events
        .iter()
        .find(|e| e["data"]["item"]["content"][0]["label"] == "limit_unchecked")
        .expect("the cost limit's status");
    assert!(
        unchecked.to_string().contains("max_cost_usd"),
        "{unchecked}"
    );

    // The scripted agent has no tool list to deny from: refused before anything is kept.
    let mut body = scripted("text");
    body["deniedTools"] = json!(["Bash"]);
    let detail = api.post("/v1/sessions/denied", body).await.problem(400)["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        detail.contains("agent_api.options.denied_tools"),
        "{detail}"
    );
    api.get("/v1/sessions/denied").await.problem(404);
}

/// A working directory `work` inside `outer`, with a good image, and bait outside it.
fn hostile_tree(outer: &Path) -> std::path::PathBuf {
    let work = outer.join("work");
    std::fs::create_dir_all(work.join("pics")).unwrap();
    std::fs::write(work.join("pics/good.png"), PNG).unwrap();
    std::fs::write(outer.join("secret.png"), PNG).unwrap();
    std::fs::write(work.join("notes.txt"), "not an image").unwrap();
    std::os::unix::fs::symlink(outer.join("secret.png"), work.join("link.png")).unwrap();
    std::os::unix::fs::symlink(outer, work.join("up")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", work.join("zero.png")).unwrap();
    std::fs::hard_link(outer.join("secret.png"), work.join("hard.png")).unwrap();
    std::fs::create_dir(work.join("dir.png")).unwrap();
    let fifo =
        std::ffi::CString::new(work.join("pipe.png").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    work
}

#[tokio::test]
async fn images_named_outside_the_working_directory_or_malformed_are_refused_naming_the_image() {
    let outer = tempfile::tempdir().unwrap();
    let work = hostile_tree(outer.path());
    let api = start_in(ServerConfig::default(), &work).await;
    api.post("/v1/sessions/img", scripted("text")).await;
    let count = event_count(&api, "img").await;
    let secret = outer.path().join("secret.png");

    let cases: Vec<(Value, &str)> = vec![
        (json!({"path": "../secret.png"}), "`..`"),
        (
            json!({"path": secret.to_str().unwrap()}),
            "outside the working directory",
        ),
        (
            json!({"path": work.join("../secret.png").to_str().unwrap()}),
            "`..`",
        ),
        (json!({"path": "link.png"}), "symbolic link"),
        (json!({"path": "up/secret.png"}), "symbolic link"),
        (json!({"path": "zero.png"}), "symbolic link"),
        (json!({"path": "hard.png"}), "2 hard links"),
        (json!({"path": "pipe.png"}), "not a regular file"),
        (json!({"path": "dir.png"}), "not a regular file"),
        (json!({"path": "missing.png"}), "does not exist"),
        (json!({"path": "notes.txt"}), "not a PNG, JPEG, GIF or WebP"),
        (
            json!({"path": "/etc/passwd"}),
            "not a PNG, JPEG, GIF or WebP",
        ),
        (
            json!({"path": "pics/good.png", "mediaType": "image/png"}),
            "`mediaType` goes with `data`",
        ),
        (json!({"data": "iVBORw0KGgo="}), "needs its `mediaType`"),
        (
            json!({"data": "iVBORw0KGgo=", "mediaType": "image/svg+xml"}),
            "image/png, image/jpeg",
        ),
        (
            json!({"data": "not base64!", "mediaType": "image/png"}),
            "not base64",
        ),
        (json!({"data": "", "mediaType": "image/png"}), "empty"),
        (
            json!({"path": "pics/good.png", "data": "iVBORw0KGgo="}),
            "one of them",
        ),
        (json!({}), "one of them"),
    ];
    for (image, expected) in cases {
        // The bad image second: the refusal names its place.
        let body = json!({"message": "look", "images": [{"path": "pics/good.png"}, image]});
        let detail = tokio::time::timeout(STEP, refused(&api, "img", body))
            .await
            .expect("no image read blocks");
        assert!(
            detail.starts_with("images[1]: ") && detail.contains(expected),
            "{image}: {detail}"
        );
        assert!(
            !detail.contains(&*std::fs::read_to_string(work.join("notes.txt")).unwrap()),
            "{detail}"
        );
    }
    let many: Vec<Value> = (0..21).map(|_| json!({"path": "pics/good.png"})).collect();
    assert!(
        refused(&api, "img", json!({"message": "look", "images": many}))
            .await
            .starts_with("images: 21 images")
    );

    // Well-formed images pass every check; this agent then takes none, and says so.
    let images = json!([{"path": "pics/good.png"}, {"path": work.join("pics/good.png")}, {"data": "iVBORw0KGgo=", "mediaType": "image/png"}]);
    let detail = refused(&api, "img", json!({"message": "look", "images": images})).await;
    assert!(
        detail.starts_with("images: the agent `scripted` takes no images"),
        "{detail}"
    );

    // An inline image past the body's bound is 413 before anything is decoded.
    let big = "A".repeat(2 << 20);
    let answer = api
        .post(
            "/v1/sessions/img/messages",
            json!({"message": "look", "images": [{"data": big, "mediaType": "image/png"}]}),
        )
        .await;
    answer.problem(413);

    assert_eq!(
        event_count(&api, "img").await,
        count,
        "no refused message reached the agent"
    );
    assert_eq!(
        api.post("/v1/sessions/img/messages", json!({"message": "no image"}))
            .await
            .status,
        204
    );
    api.wait_for("img", "item.completed").await;
}
