//! The server driven over HTTP only (real TCP on 127.0.0.1) with the scripted agent: sessions,
//! messages, pages, SSE, permissions, questions, terminate, and every error status.

mod common;

use std::sync::OnceLock;

use agent_api_server::ServerConfig;
use common::*;
use hyper::Method;
use serde_json::{json, Value};

/// Validates served events against `spec/universal-schema.json` and the reference's `UniversalEvent`.
fn check_schemas(events: &[Value]) {
    static OURS: OnceLock<jsonschema::Validator> = OnceLock::new();
    static REFERENCE: OnceLock<jsonschema::Validator> = OnceLock::new();
    let ours = OURS.get_or_init(|| {
        let schema: Value =
            serde_json::from_str(include_str!("../../spec/universal-schema.json")).unwrap();
        jsonschema::validator_for(&schema).unwrap()
    });
    let reference = REFERENCE.get_or_init(|| {
        let document: Value =
            serde_json::from_str(include_str!("reference/sandbox-agent-v0.1.2-openapi.json"))
                .unwrap();
        let mut components = document["components"].clone();
        as_json_schema(&mut components);
        // The reference's `oneOf` of event data cannot hold for any event (session.started's data,
        // with no required field, matches every other's too): read as the seeds' `anyOf`.
        let data = components["schemas"]["UniversalEventData"]
            .as_object_mut()
            .unwrap();
        let branches = data.remove("oneOf").unwrap();
        data.insert("anyOf".into(), branches);
        jsonschema::validator_for(
            &json!({ "$ref": "#/components/schemas/UniversalEvent", "components": components }),
        )
        .unwrap()
    });
    for event in events {
        let errors: Vec<String> = ours.iter_errors(event).map(|e| e.to_string()).collect();
        assert!(
            errors.is_empty(),
            "{event} fails spec/universal-schema.json: {errors:?}"
        );
        let errors: Vec<String> = reference
            .iter_errors(event)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{event} fails the reference's UniversalEvent: {errors:?}"
        );
    }
}

/// OpenAPI 3.0's `nullable: true` as JSON Schema's `null` type.
fn as_json_schema(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if object.remove("nullable") == Some(Value::Bool(true)) {
                let inner = Value::Object(std::mem::take(object));
                object.insert("anyOf".into(), json!([inner, { "type": "null" }]));
            }
            object.values_mut().for_each(as_json_schema);
        }
        Value::Array(items) => items.iter_mut().for_each(as_json_schema),
        _ => {}
    }
}

fn sequences(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect()
}

fn turns_completed(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| {
            e["type"] == "item.completed"
                && e["data"]["item"]["content"][0]["label"] == "turn_completed"
        })
        .count()
}

/// Waits until `turns` turns have completed in the session; returns its events.
async fn wait_turns(api: &Api, session: &str, turns: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let events = api.all_events(session, 1000).await;
        if turns_completed(&events) >= turns {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{turns} turns did not complete: {events:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn health_needs_no_token_and_every_other_endpoint_needs_the_right_one() {
    let api = start(ServerConfig::default().with_token("s3cret")).await;
    let anonymous = api.with_token(None);
    let health = anonymous.get("/v1/health").await;
    assert_eq!(
        (health.status.as_u16(), health.json()),
        (200, json!({"status": "ok"}))
    );
    for path in [
        "/v1/sessions",
        "/v1/agents",
        "/v1/openapi.json",
        "/v1/sessions/x/events",
    ] {
        anonymous.get(path).await.problem(401);
        api.with_token(Some("s3cret-not"))
            .get(path)
            .await
            .problem(401);
        api.with_token(Some("s3cre")).get(path).await.problem(401);
    }
    let denied = anonymous.post("/v1/sessions/x", scripted("text")).await;
    assert_eq!(
        denied.problem(401)["type"],
        "urn:agent-api:error:token_invalid"
    );
    assert_eq!(denied.headers["www-authenticate"], "Bearer");
    assert_eq!(
        api.get("/v1/sessions").await.json(),
        json!({"sessions": []})
    );
    // The scheme's name is case-insensitive.
    let lower = api
        .with_token(None)
        .send(
            Method::GET,
            "/v1/sessions",
            None,
            &[("authorization", "bearer s3cret")],
        )
        .await;
    assert_eq!(lower.status(), 200);
}

#[tokio::test]
async fn a_session_takes_two_messages_and_serves_its_events_by_pages() {
    let api = start(ServerConfig::default()).await;
    let created = api.post("/v1/sessions/two-turns", scripted("text")).await;
    assert_eq!(created.status, 200);
    assert_eq!(created.json()["healthy"], true);
    let posted = api
        .post(
            "/v1/sessions/two-turns/messages",
            json!({"message": "first"}),
        )
        .await;
    assert_eq!((posted.status.as_u16(), posted.body.len()), (204, 0));
    wait_turns(&api, "two-turns", 1).await;
    let posted = api
        .post(
            "/v1/sessions/two-turns/messages",
            json!({"message": "second"}),
        )
        .await;
    assert_eq!((posted.status.as_u16(), posted.body.len()), (204, 0));
    let events = wait_turns(&api, "two-turns", 2).await;

    // One transcript: sequences from 1 with no gap, one session.started, both answers.
    assert_eq!(
        sequences(&events),
        (1..=events.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "session.started")
            .count(),
        1
    );
    let answers: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "item.completed" && e["data"]["item"]["role"] == "assistant")
        .map(|e| &e["data"]["item"]["content"][0]["text"])
        .collect();
    assert_eq!(
        answers,
        [
            &json!("You said: first"),
            &json!("You said: second (turn 2 of this session)")
        ]
    );
    events.iter().for_each(|e| check_envelope(e, "two-turns"));
    assert!(
        events.iter().all(|e| e["raw"].is_null()),
        "raw is null unless asked for"
    );
    check_schemas(&events);

    // Pages: `offset` is exclusive, `limit` bounds, `hasMore` says whether more follow.
    let page = api
        .get("/v1/sessions/two-turns/events?offset=2&limit=3")
        .await
        .json();
    assert_eq!(sequences(page["events"].as_array().unwrap()), [3, 4, 5]);
    assert_eq!(page["hasMore"], true);
    let last = events.len();
    let tail = api
        .get(&format!(
            "/v1/sessions/two-turns/events?offset={}&limit=10",
            last - 1
        ))
        .await
        .json();
    assert_eq!(
        (
            sequences(tail["events"].as_array().unwrap()),
            &tail["hasMore"]
        ),
        (vec![last as u64], &json!(false))
    );
    let past = api
        .get(&format!("/v1/sessions/two-turns/events?offset={last}"))
        .await
        .json();
    assert_eq!(past, json!({"events": [], "hasMore": false}));
    assert_eq!(
        api.all_events("two-turns", 4).await,
        events,
        "pages of 4 give the same events"
    );

    // include_raw fills raw with the native payloads; the rest of each event is the same.
    let with_raw = api
        .get("/v1/sessions/two-turns/events?include_raw=true")
        .await
        .json();
    let with_raw = with_raw["events"].as_array().unwrap();
    assert!(
        with_raw
            .iter()
            .any(|e| e["source"] == "agent" && e["raw"].is_object()),
        "{with_raw:#?}"
    );
    for (plain, raw) in events.iter().zip(with_raw) {
        let mut raw = raw.clone();
        raw["raw"] = Value::Null;
        assert_eq!(&raw, plain);
    }

    let listed = api.get("/v1/sessions").await.json();
    let info = &listed["sessions"][0];
    assert_eq!(info["sessionId"], "two-turns");
    assert_eq!(info["agent"], "scripted");
    assert_eq!(info["agentMode"], "build");
    assert_eq!(info["permissionMode"], "default");
    assert_eq!(info["ended"], false);
    assert_eq!(info["eventCount"], events.len());
    assert!(info["nativeSessionId"].is_string());
    // Beyond the reference: the turns' usage, summed (recorded once each turn's completion is in).
    let deadline = tokio::time::Instant::now() + STEP;
    let info = loop {
        let info = api.get("/v1/sessions/two-turns").await.json();
        if info["usage"]["turns"] == 2 {
            break info;
        }
        assert!(tokio::time::Instant::now() < deadline, "{info}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(
        info["usage"]["outputTokens"].as_u64().unwrap() > 0,
        "{info}"
    );
}

#[tokio::test]
async fn sse_resumes_from_an_offset_or_last_event_id_with_no_gap_and_no_duplicate() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/sse", scripted("text")).await;
    api.post("/v1/sessions/sse/messages", json!({"message": "one"}))
        .await;
    let events = wait_turns(&api, "sse", 1).await;
    let n = events.len() as u64;

    // From an offset: the stored events after it, each frame's id its sequence.
    let mut stream = api
        .sse(
            Method::GET,
            "/v1/sessions/sse/events/sse?offset=5",
            None,
            &[],
        )
        .await;
    let mut frames = Vec::new();
    while frames.len() < (n - 5) as usize {
        frames.push(
            stream
                .next()
                .await
                .expect("the stream stays open on a live session"),
        );
    }
    assert_eq!(
        frames.iter().map(|f| f.id.unwrap()).collect::<Vec<_>>(),
        (6..=n).collect::<Vec<_>>()
    );
    assert_eq!(
        frames.iter().map(|f| f.data.clone()).collect::<Vec<_>>(),
        events[5..]
    );

    // Live: the next turn's events arrive on the open stream, following on.
    api.post("/v1/sessions/sse/messages", json!({"message": "two"}))
        .await;
    let live = stream.until("item.completed").await;
    assert_eq!(live[0].id, Some(n + 1));
    let all = wait_turns(&api, "sse", 2).await;
    let mut seen: Vec<u64> = frames.iter().chain(&live).map(|f| f.id.unwrap()).collect();
    while seen.len() < all.len() - 5 {
        seen.push(stream.next().await.unwrap().id.unwrap());
    }
    assert_eq!(
        seen,
        (6..=all.len() as u64).collect::<Vec<_>>(),
        "no gap, no duplicate"
    );
    drop(stream);

    // Last-Event-ID (a reconnecting EventSource) wins over the URL's offset.
    let mut resumed = api
        .sse(
            Method::GET,
            "/v1/sessions/sse/events/sse?offset=1",
            None,
            &[("last-event-id", "8")],
        )
        .await;
    let first = resumed.next().await.unwrap();
    assert_eq!((first.id, &first.data), (Some(9), &all[8]));

    // include_raw on SSE too; raw is present (null) without it.
    let mut raw = api
        .sse(
            Method::GET,
            "/v1/sessions/sse/events/sse?include_raw=true",
            None,
            &[],
        )
        .await;
    let mut frames = Vec::new();
    while frames.len() < all.len() {
        frames.push(raw.next().await.unwrap());
    }
    assert!(frames.iter().any(|f| f.data["raw"].is_object()));
    check_schemas(&frames.iter().map(|f| f.data.clone()).collect::<Vec<_>>());

    // A session that ended: the stream sends what is stored and closes.
    assert_eq!(
        api.post_empty("/v1/sessions/sse/terminate").await.status,
        204
    );
    let mut ended = api
        .sse(
            Method::GET,
            "/v1/sessions/sse/events/sse?offset=3",
            None,
            &[],
        )
        .await;
    let rest = ended.rest().await;
    let total = api.all_events("sse", 1000).await.len() as u64;
    assert_eq!(
        rest.iter().map(|f| f.id.unwrap()).collect::<Vec<_>>(),
        (4..=total).collect::<Vec<_>>()
    );
    assert_eq!(rest.last().unwrap().data["type"], "session.ended");
}

#[tokio::test]
async fn messages_stream_sends_its_turn_and_closes_after_the_last_event() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/stream", scripted("tour")).await;
    let mut stream = api
        .sse(
            Method::POST,
            "/v1/sessions/stream/messages/stream",
            Some(json!({"message": "go"})),
            &[],
        )
        .await;
    let frames = stream.rest().await;
    // The tour asks a question: the stream closes there, the turn waits for the reply.
    let last = &frames.last().unwrap().data;
    assert!(
        last["type"] == "permission.requested" || last["type"] == "question.requested",
        "{last}"
    );

    let mut quiet = api.post("/v1/sessions/plain", scripted("text")).await;
    assert_eq!(quiet.status, 200);
    let mut stream = api
        .sse(
            Method::POST,
            "/v1/sessions/plain/messages/stream?include_raw=true",
            Some(json!({"message": "hi"})),
            &[],
        )
        .await;
    let frames = stream.rest().await;
    let ids: Vec<u64> = frames.iter().map(|f| f.id.unwrap()).collect();
    // After the session's `session.started`, written when it was created.
    assert_eq!(ids, (2..=ids.len() as u64 + 1).collect::<Vec<_>>());
    let last = &frames.last().unwrap().data;
    assert_eq!(
        last["data"]["item"]["content"][0]["label"], "turn_completed",
        "closes after the turn's last event: {last}"
    );
    assert!(frames.iter().any(|f| f.data["raw"].is_object()));
    // The stored events are the streamed ones.
    quiet = api.get("/v1/sessions/plain/events?include_raw=true").await;
    let stored = quiet.json()["events"].as_array().unwrap().clone();
    assert_eq!(stored[0]["type"], "session.started");
    assert_eq!(
        stored[1..],
        frames.iter().map(|f| f.data.clone()).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_permission_request_is_answered_over_http() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/perm", scripted("permission")).await;
    let mut stream = api
        .sse(
            Method::POST,
            "/v1/sessions/perm/messages/stream",
            Some(json!({"message": "run it"})),
            &[],
        )
        .await;
    let frames = stream.rest().await;
    let asked = &frames.last().unwrap().data;
    assert_eq!(
        asked["type"], "permission.requested",
        "the stream closes at the request"
    );
    let id = asked["data"]["permission_id"].as_str().unwrap();

    api.post(
        &format!("/v1/sessions/perm/permissions/{id}-nope/reply"),
        json!({"reply": "once"}),
    )
    .await
    .problem(404);
    api.post(
        &format!("/v1/sessions/perm/permissions/{id}/reply"),
        json!({"reply": "sometimes"}),
    )
    .await
    .problem(422);
    let replied = api
        .post(
            &format!("/v1/sessions/perm/permissions/{id}/reply"),
            json!({"reply": "once"}),
        )
        .await;
    assert_eq!((replied.status.as_u16(), replied.body.len()), (204, 0));
    let events = wait_turns(&api, "perm", 1).await;
    let resolved = events
        .iter()
        .find(|e| e["type"] == "permission.resolved")
        .unwrap();
    assert_eq!(
        (
            &resolved["data"]["permission_id"],
            &resolved["data"]["status"]
        ),
        (&json!(id), &json!("approved"))
    );
    assert!(
        events
            .iter()
            .any(|e| e["data"]["item"]["kind"] == "tool_result"),
        "the approved tool ran"
    );
    check_schemas(&events);

    // A second turn, rejected this time.
    let mut stream = api
        .sse(
            Method::POST,
            "/v1/sessions/perm/messages/stream",
            Some(json!({"message": "again"})),
            &[],
        )
        .await;
    let asked = stream.rest().await.pop().unwrap().data;
    let id = asked["data"]["permission_id"].as_str().unwrap();
    assert_eq!(
        api.post(
            &format!("/v1/sessions/perm/permissions/{id}/reply"),
            json!({"reply": "reject"})
        )
        .await
        .status,
        204
    );
    let events = wait_turns(&api, "perm", 2).await;
    let resolved = events
        .iter()
        .rfind(|e| e["type"] == "permission.resolved")
        .unwrap();
    assert_eq!(resolved["data"]["status"], "denied");
}

#[tokio::test]
async fn a_question_is_answered_and_another_rejected_over_http() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/ask", scripted("question")).await;
    let mut stream = api
        .sse(
            Method::POST,
            "/v1/sessions/ask/messages/stream",
            Some(json!({"message": "greet"})),
            &[],
        )
        .await;
    let asked = stream.rest().await.pop().unwrap().data;
    assert_eq!(asked["type"], "question.requested");
    let id = asked["data"]["question_id"].as_str().unwrap();
    assert_eq!(asked["data"]["options"], json!(["hello", "hi"]));

    api.post(
        &format!("/v1/sessions/ask/questions/{id}/reply"),
        json!({"answers": []}),
    )
    .await
    .problem(400);
    api.post(
        "/v1/sessions/ask/questions/q_unknown/reply",
        json!({"answers": [["hi"]]}),
    )
    .await
    .problem(404);
    let replied = api
        .post(
            &format!("/v1/sessions/ask/questions/{id}/reply"),
            json!({"answers": [["hi"]]}),
        )
        .await;
    assert_eq!((replied.status.as_u16(), replied.body.len()), (204, 0));
    let events = wait_turns(&api, "ask", 1).await;
    let resolved = events
        .iter()
        .find(|e| e["type"] == "question.resolved")
        .unwrap();
    assert_eq!(
        (&resolved["data"]["status"], &resolved["data"]["response"]),
        (&json!("answered"), &json!("hi"))
    );
    assert!(
        events
            .iter()
            .any(|e| e["data"]["item"]["content"][0]["text"] == "You chose hi."),
        "{events:#?}"
    );

    let mut stream = api
        .sse(
            Method::POST,
            "/v1/sessions/ask/messages/stream",
            Some(json!({"message": "again"})),
            &[],
        )
        .await;
    let asked = stream.rest().await.pop().unwrap().data;
    let id = asked["data"]["question_id"].as_str().unwrap();
    let rejected = api
        .post_empty(&format!("/v1/sessions/ask/questions/{id}/reject"))
        .await;
    assert_eq!((rejected.status.as_u16(), rejected.body.len()), (204, 0));
    let events = wait_turns(&api, "ask", 2).await;
    assert_eq!(
        events
            .iter()
            .rfind(|e| e["type"] == "question.resolved")
            .unwrap()["data"]["status"],
        "rejected"
    );
    check_schemas(&events);
}

#[tokio::test]
async fn terminate_ends_the_session_for_good() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/end", scripted("text")).await;
    api.post("/v1/sessions/end/messages", json!({"message": "hi"}))
        .await;
    wait_turns(&api, "end", 1).await;
    let terminated = api.post_empty("/v1/sessions/end/terminate").await;
    assert_eq!(
        (terminated.status.as_u16(), terminated.body.len()),
        (204, 0)
    );
    let events = api.all_events("end", 1000).await;
    let ended = events.last().unwrap();
    assert_eq!(ended["type"], "session.ended");
    assert_eq!(
        (&ended["data"]["reason"], &ended["data"]["terminated_by"]),
        (&json!("terminated"), &json!("daemon"))
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "session.ended")
            .count(),
        1
    );
    check_schemas(&events);
    let info = &api.get("/v1/sessions").await.json()["sessions"][0];
    assert_eq!(
        (&info["ended"], &info["eventCount"]),
        (&json!(true), &json!(events.len()))
    );
    assert_eq!(
        api.post("/v1/sessions/end/messages", json!({"message": "more"}))
            .await
            .problem(409)["type"],
        "urn:agent-api:error:session_ended"
    );
    assert_eq!(
        api.post_empty("/v1/sessions/end/terminate").await.status,
        204,
        "terminating again changes nothing"
    );
    assert_eq!(api.all_events("end", 1000).await, events);
}

#[tokio::test]
async fn a_session_whose_agent_crashes_is_ended_and_stays_readable() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/crash", scripted("crash")).await;
    let mut stream = api
        .sse(
            Method::POST,
            "/v1/sessions/crash/messages/stream",
            Some(json!({"message": "go"})),
            &[],
        )
        .await;
    let frames = stream.rest().await;
    let events = api.all_events("crash", 1000).await;
    // The turn's stream: every event after the session's `session.started` (written at creation).
    assert_eq!(events[0]["type"], "session.started");
    assert_eq!(
        frames.iter().map(|f| f.data.clone()).collect::<Vec<_>>(),
        events[1..]
    );
    let ended = events
        .iter()
        .find(|e| e["type"] == "session.ended")
        .expect("the crash ends the session");
    assert_eq!(ended["data"]["reason"], "error");
    check_schemas(&events);
    let info = api.get("/v1/sessions/crash").await.json();
    assert_eq!(
        (&info["ended"], &info["live"]),
        (&json!(true), &json!(false))
    );
    api.post("/v1/sessions/crash/messages", json!({"message": "again"}))
        .await
        .problem(409);
    assert_eq!(
        api.post_empty("/v1/sessions/crash/terminate").await.status,
        204
    );
    assert_eq!(
        api.all_events("crash", 1000).await,
        events,
        "nothing is added to an ended session"
    );
}

#[tokio::test]
async fn a_session_resumes_the_agents_session_of_an_earlier_one() {
    let api = start(ServerConfig::default()).await;
    api.post("/v1/sessions/before", scripted("text")).await;
    api.post(
        "/v1/sessions/before/messages",
        json!({"message": "remember"}),
    )
    .await;
    wait_turns(&api, "before", 1).await;
    api.post_empty("/v1/sessions/before/terminate").await;
    let native = api.get("/v1/sessions/before").await.json()["nativeSessionId"]
        .as_str()
        .unwrap()
        .to_string();

    let mut resumed = scripted("text");
    resumed["resume"] = json!(native);
    assert_eq!(api.post("/v1/sessions/after", resumed).await.status, 200);
    api.post("/v1/sessions/after/messages", json!({"message": "again"}))
        .await;
    let events = wait_turns(&api, "after", 1).await;
    let answer = events
        .iter()
        .rfind(|e| e["type"] == "item.completed" && e["data"]["item"]["role"] == "assistant")
        .unwrap();
    assert_eq!(
        answer["data"]["item"]["content"][0]["text"],
        "You said: again (turn 2 of this session)"
    );
    assert_eq!(
        api.get("/v1/sessions/after").await.json()["nativeSessionId"],
        json!(native)
    );

    let mut unknown = scripted("text");
    unknown["resume"] = json!("no-such-native-session");
    api.post("/v1/sessions/lost", unknown).await.problem(404);
    let mut both = scripted("text");
    (both["resume"], both["fork"]) = (json!(native), json!(native));
    api.post("/v1/sessions/both", both).await.problem(400);
}

#[tokio::test]
async fn steering_an_agent_that_cannot_be_steered_is_a_400_naming_the_capability() {
    let api = start(ServerConfig::default()).await;
    api.post(
        "/v1/sessions/nosteer",
        json!({"agent": "scripted", "options": {"backend.scripted.scenario": "slow"}}),
    )
    .await;
    api.post(
        "/v1/sessions/nosteer/messages",
        json!({"message": "take your time"}),
    )
    .await;
    api.wait_for("nosteer", "item.delta").await;
    let refused = api
        .post(
            "/v1/sessions/nosteer/steer",
            json!({"message": "also this"}),
        )
        .await
        .problem(400);
    assert!(
        refused["detail"]
            .as_str()
            .is_some_and(|d| d.contains("agent_api.control.steer")),
        "{refused}"
    );
    api.post("/v1/sessions/nobody/steer", json!({"message": "x"}))
        .await
        .problem(404);
    api.post_empty("/v1/sessions/nosteer/cancel").await;
}

#[tokio::test]
async fn a_turn_is_cancelled_and_the_session_goes_on() {
    let api = start(ServerConfig::default()).await;
    api.post(
        "/v1/sessions/cancel",
        json!({"agent": "scripted", "options": {"backend.scripted.scenario": "slow"}}),
    )
    .await;
    api.post(
        "/v1/sessions/cancel/messages",
        json!({"message": "take your time"}),
    )
    .await;
    api.wait_for("cancel", "item.delta").await;
    // Queued behind the running turn (`turns.rs`), then dropped by the cancel.
    assert_eq!(
        api.post(
            "/v1/sessions/cancel/messages",
            json!({"message": "too soon"}),
        )
        .await
        .status,
        204
    );
    assert_eq!(
        api.post_empty("/v1/sessions/cancel/cancel").await.status,
        204
    );
    let events = api.all_events("cancel", 1000).await;
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "error" || e["type"] == "item.completed"),
        "{events:#?}"
    );
    let posted = api
        .post("/v1/sessions/cancel/messages", json!({"message": "now"}))
        .await;
    assert_eq!(
        posted.status,
        204,
        "{:?}",
        String::from_utf8_lossy(&posted.body)
    );
    api.post_empty("/v1/sessions/cancel/cancel").await;
    let events = api.all_events("cancel", 1000).await;
    assert_eq!(
        sequences(&events),
        (1..=events.len() as u64).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_duplicate_id_is_409_and_an_unknown_one_404() {
    let api = start(ServerConfig::default()).await;
    assert_eq!(
        api.post("/v1/sessions/dup", scripted("text")).await.status,
        200
    );
    let again = api.post("/v1/sessions/dup", scripted("text")).await;
    assert_eq!(
        again.problem(409)["type"],
        "urn:agent-api:error:session_already_exists"
    );

    let missing = api.get("/v1/sessions/nope/events").await;
    assert_eq!(
        missing.problem(404)["type"],
        "urn:agent-api:error:session_not_found"
    );
    api.get("/v1/sessions/nope/events/sse").await.problem(404);
    api.post("/v1/sessions/nope/messages", json!({"message": "x"}))
        .await
        .problem(404);
    api.post("/v1/sessions/nope/messages/stream", json!({"message": "x"}))
        .await
        .problem(404);
    api.post(
        "/v1/sessions/nope/permissions/p/reply",
        json!({"reply": "once"}),
    )
    .await
    .problem(404);
    api.post(
        "/v1/sessions/nope/questions/q/reply",
        json!({"answers": [["a"]]}),
    )
    .await
    .problem(404);
    api.post_empty("/v1/sessions/nope/questions/q/reject")
        .await
        .problem(404);
    api.post_empty("/v1/sessions/nope/terminate")
        .await
        .problem(404);
    api.get("/v1/no-such-endpoint").await.problem(404);
    // No turn waits: a reply names nothing.
    api.post(
        "/v1/sessions/dup/permissions/p/reply",
        json!({"reply": "once"}),
    )
    .await
    .problem(404);

    // Bad input: typed, and nothing is lost (the session still works).
    api.post("/v1/sessions/bad", json!({"agent": "no-such-agent"}))
        .await
        .problem(400);
    api.post(
        "/v1/sessions/bad",
        json!({"agent": "scripted", "agentMode": "yolo"}),
    )
    .await
    .problem(400);
    api.post(
        "/v1/sessions/bad",
        json!({"agent": "scripted", "options": {"backend.scripted.scenario": "nope"}}),
    )
    .await
    .problem(400);
    api.post("/v1/sessions/bad", json!({"nothing": true}))
        .await
        .problem(422);
    let broken = api.call(Method::POST, "/v1/sessions/bad", None).await;
    assert!(broken.status.is_client_error());
    api.post("/v1/sessions/dup/messages", json!({"message": "  "}))
        .await
        .problem(400);
    assert_eq!(
        api.get("/v1/sessions").await.json()["sessions"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "refused sessions are not kept"
    );
    assert_eq!(
        api.post("/v1/sessions/bad", scripted("text")).await.status,
        200,
        "a refused id stays free"
    );
}

#[tokio::test]
async fn an_oversized_body_is_413() {
    let api = start(ServerConfig::default().with_max_body_bytes(1024)).await;
    api.post("/v1/sessions/big", scripted("text")).await;
    let big = api
        .post(
            "/v1/sessions/big/messages",
            json!({"message": "x".repeat(4096)}),
        )
        .await;
    assert_eq!(
        big.problem(413)["type"],
        "urn:agent-api:error:payload_too_large"
    );
    let big = api
        .post(
            "/v1/agents/scripted/install",
            json!({"reinstall": false, "padding": "x".repeat(4096)}),
        )
        .await;
    big.problem(413);
    assert_eq!(
        api.post("/v1/sessions/big/messages", json!({"message": "small"}))
            .await
            .status,
        204
    );
}

#[tokio::test]
async fn subscribers_are_bounded_per_session() {
    let api = start(ServerConfig::default().with_subscribers(16, 1)).await;
    api.post("/v1/sessions/subs", scripted("text")).await;
    let first = api
        .sse(Method::GET, "/v1/sessions/subs/events/sse", None, &[])
        .await;
    api.get("/v1/sessions/subs/events/sse").await.problem(429);
    drop(first);
    // The slot is free once the first client is gone (its task notices the closed stream).
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let response = api
            .send(Method::GET, "/v1/sessions/subs/events/sse", None, &[])
            .await;
        if response.status() == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slot was never freed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_subscriber_that_stops_reading_is_dropped_and_resumes_by_its_offset() {
    // A client that takes nothing for 300 ms while its queue is full is dropped.
    let config = ServerConfig::default()
        .with_subscribers(8, 4)
        .with_sse_stall(std::time::Duration::from_millis(300));
    let api = start(config).await;
    api.post("/v1/sessions/slow", scripted("echo")).await;
    let mut stalled = api
        .sse_small_window("/v1/sessions/slow/events/sse", &[])
        .await;
    // The echo scenario streams the prompt's first line a word at a time: 20,000 deltas.
    let words = "word ".repeat(20_000);
    assert_eq!(
        api.post("/v1/sessions/slow/messages", json!({ "message": words }))
            .await
            .status,
        204
    );
    let events = wait_turns(&api, "slow", 1).await;
    assert!(events.len() > 20_000);
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    // Its stream ends, or its connection is closed under it: either way it resumes by its id.
    let frames = stalled.rest_or_cut().await;
    assert!(
        frames.len() < events.len(),
        "the stalled subscriber was dropped ({} of {} events)",
        frames.len(),
        events.len()
    );
    let ids: Vec<u64> = frames.iter().map(|f| f.id.unwrap()).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "what it got has no gap"
    );
    let resume = ids.len().to_string();
    let mut resumed = api
        .sse(
            Method::GET,
            "/v1/sessions/slow/events/sse",
            None,
            &[("last-event-id", &resume)],
        )
        .await;
    let mut rest = Vec::new();
    while ids.len() + rest.len() < events.len() {
        rest.push(resumed.next().await.unwrap().data);
    }
    assert_eq!(rest, events[ids.len()..]);
}

#[tokio::test]
async fn a_client_that_reads_gets_a_turn_faster_than_the_ring_whole() {
    // A ring of 8 events and 20,000 events as fast as the agent makes them: a client that reads
    // falls behind the ring again and again, and catches up from the store each time.
    let api = start(ServerConfig::default().with_subscribers(8, 4)).await;
    api.post("/v1/sessions/fast", scripted("echo")).await;
    let mut following = api
        .sse(Method::GET, "/v1/sessions/fast/events/sse", None, &[])
        .await;
    let words = "word ".repeat(20_000);
    let mut turn = api
        .sse(
            Method::POST,
            "/v1/sessions/fast/messages/stream",
            Some(json!({ "message": words })),
            &[],
        )
        .await;
    let frames = turn.rest().await;
    let events = api.all_events("fast", 1000).await;
    assert_eq!(
        frames.iter().map(|f| f.data.clone()).collect::<Vec<_>>(),
        events[1..],
        "the turn's stream has every event after the session's `session.started`, then ends"
    );
    assert_eq!(
        frames.last().unwrap().data["data"]["item"]["content"][0]["label"],
        "turn_completed"
    );
    let mut followed = Vec::new();
    while followed.len() < events.len() {
        followed.push(following.next().await.unwrap());
    }
    assert_eq!(
        followed.iter().map(|f| f.id.unwrap()).collect::<Vec<_>>(),
        (1..=events.len() as u64).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn cors_headers_are_sent_only_for_the_configured_origin() {
    let none = start(ServerConfig::default()).await;
    let response = none
        .send(
            Method::GET,
            "/v1/health",
            None,
            &[("origin", "http://app.example")],
        )
        .await;
    assert!(response
        .headers()
        .get("access-control-allow-origin")
        .is_none());

    let api = start(ServerConfig::default().with_cors_origin("http://app.example")).await;
    let allowed = api
        .send(
            Method::GET,
            "/v1/sessions",
            None,
            &[("origin", "http://app.example")],
        )
        .await;
    assert_eq!(
        allowed.headers()["access-control-allow-origin"],
        "http://app.example"
    );
    let other = api
        .send(
            Method::GET,
            "/v1/sessions",
            None,
            &[("origin", "http://evil.example")],
        )
        .await;
    assert!(other.headers().get("access-control-allow-origin").is_none());
    let preflight = api
        .send(
            Method::OPTIONS,
            "/v1/sessions/x/messages",
            None,
            &[
                ("origin", "http://app.example"),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", "authorization"),
            ],
        )
        .await;
    assert!(preflight.status().is_success());
    assert_eq!(
        preflight.headers()["access-control-allow-origin"],
        "http://app.example"
    );
}

#[tokio::test]
async fn agents_are_listed_with_the_reference_capabilities_and_modes() {
    let api = start(ServerConfig::default()).await;
    let agents = api.get("/v1/agents").await.json();
    let scripted = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "scripted")
        .unwrap();
    assert_eq!(scripted["installed"], true);
    let capabilities = &scripted["capabilities"];
    for (name, value) in [
        ("permissions", true),
        ("questions", true),
        ("streamingDeltas", true),
        ("sharedProcess", true),
        ("planMode", true),
    ] {
        assert_eq!(capabilities[name], value, "{name}");
    }
    assert_eq!(capabilities.as_object().unwrap().len(), 18);
    let modes = api.get("/v1/agents/scripted/modes").await.json();
    assert_eq!(modes["modes"][0]["id"], "build");
    api.get("/v1/agents/no-such-agent/modes").await.problem(400);
    assert_eq!(
        api.post("/v1/agents/scripted/install", json!({}))
            .await
            .status,
        204
    );
    assert_eq!(
        api.post_empty("/v1/agents/scripted/install").await.status,
        204
    );
    // As the reference (and `modes` and `create` here): 400 `unsupported_agent`.
    api.post_empty("/v1/agents/no-such-agent/install")
        .await
        .problem(400);
    // The scripted agent keeps no history of its own: a typed refusal naming the capability.
    let refused = api.get("/v1/agents/scripted/history").await.problem(400);
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("agent_api.history.list"),
        "{refused}"
    );
    api.get("/v1/agents/scripted/history/x/events")
        .await
        .problem(400);
    api.get("/v1/agents/no-such-agent/history")
        .await
        .problem(400);
}

/// An agent with modes and variants, that never runs: enough for the session's checks, which
/// come before anything is spawned.
struct Modal;

#[async_trait::async_trait]
impl agent_api::AgentBackend for Modal {
    fn info(&self) -> &agent_api::BackendInfo {
        use agent_api::capabilities as caps;
        use agent_api::request::{ModeInfo, VariantSet};
        const MODES: &[ModeInfo] = &[ModeInfo::new("plan", "--plan", "Plans; changes nothing.")];
        const VARIANTS: &[VariantSet] = &[VariantSet::all_models(&["low", "high"], "--effort")];
        static INFO: std::sync::LazyLock<agent_api::BackendInfo> = std::sync::LazyLock::new(|| {
            agent_api::BackendInfo::new(
                agent_api::AgentKind::new("modal").unwrap(),
                agent_api::CapabilitySet::from_ids([caps::RUN, caps::MODES, caps::VARIANTS]),
            )
            .with_modes(MODES)
            .with_variants(VARIANTS)
        });
        &INFO
    }

    async fn run(
        &self,
        _request: agent_api::RunRequest,
    ) -> Result<agent_api::RunHandle, agent_api::AgentError> {
        Err(agent_api::AgentError::InvalidRequest {
            reason: "this test agent never runs".into(),
        })
    }
}

#[tokio::test]
async fn agent_modes_are_listed_and_an_unknown_mode_or_variant_is_refused_naming_the_valid_ones() {
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    let mut gateway = agent_api::Gateway::new();
    gateway.register(std::sync::Arc::new(Modal)).unwrap();
    let server = agent_api_server::Server::new(
        gateway,
        agent_api::RunRequest::new(""),
        store,
        ServerConfig::default(),
    )
    .await
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(agent_api_server::serve(
        listener,
        server,
        std::future::pending(),
    ));
    let api = Api::new(format!("http://{address}"), None);

    let modes = api.get("/v1/agents/modal/modes").await.json();
    let ids: Vec<&str> = modes["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["build", "plan"]);
    let problem = api
        .post(
            "/v1/sessions/m1",
            json!({"agent": "modal", "agentMode": "yolo"}),
        )
        .await
        .problem(400);
    assert_eq!(
        problem["type"], "urn:agent-api:error:mode_not_supported",
        "{problem}"
    );
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("default, plan"),
        "{problem}"
    );
    let problem = api
        .post(
            "/v1/sessions/m2",
            json!({"agent": "modal", "variant": "max"}),
        )
        .await
        .problem(400);
    assert!(
        problem["detail"].as_str().unwrap().contains("low, high"),
        "{problem}"
    );
    // A known mode passes the checks: the session fails only where this agent cannot run.
    let problem = api
        .post(
            "/v1/sessions/m3",
            json!({"agent": "modal", "agentMode": "plan", "variant": "high"}),
        )
        .await
        .problem(400);
    assert!(
        problem["detail"].as_str().unwrap().contains("never runs")
            || problem["detail"].as_str().unwrap().contains("warm"),
        "{problem}"
    );
}

/// The generic ACP kind runs only the command line a session names: with none in the server's
/// session defaults it is listed as not installed, naming the option and how to give it; with
/// one it is installed.
#[tokio::test]
async fn an_agent_that_needs_an_option_the_defaults_lack_is_listed_not_installed_saying_which() {
    let gateway = || {
        let mut gateway = agent_api::Gateway::new();
        gateway
            .register(std::sync::Arc::new(
                agent_api_scripted::ScriptedBackend::new(),
            ))
            .unwrap();
        gateway
            .register(std::sync::Arc::new(agent_api_acp::AcpBackend::new(
                agent_api_acp::AcpConfig::default(),
            )))
            .unwrap();
        gateway
    };
    let acp = |agents: &Value| {
        agents["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == "acp")
            .cloned()
            .unwrap()
    };
    let memory = || async { agent_api_server::StoreUrl::Memory.open().await.unwrap() };

    let api = serve_gateway(
        gateway(),
        ServerConfig::default(),
        memory().await,
        agent_api::RunRequest::new(""),
    )
    .await;
    let listed = acp(&api.get("/v1/agents").await.json());
    assert_eq!(listed["installed"], false, "{listed}");
    assert_eq!(listed["needsOption"], "backend.acp.command", "{listed}");
    let reason = listed["reason"].as_str().unwrap();
    assert!(
        reason.contains("backend.acp.command") && reason.contains("--client-option"),
        "{reason}"
    );
    let scripted = api.get("/v1/agents").await.json()["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "scripted")
        .cloned()
        .unwrap();
    assert_eq!(scripted["installed"], true);
    assert!(
        scripted.get("reason").is_none() && scripted.get("needsOption").is_none(),
        "{scripted}"
    );

    // Clients may name it here: still nothing to run by default, and the reason says where to name it.
    let config = ServerConfig::default().with_client_option("backend.acp.command");
    let api = serve_gateway(
        gateway(),
        config,
        memory().await,
        agent_api::RunRequest::new(""),
    )
    .await;
    let listed = acp(&api.get("/v1/agents").await.json());
    assert_eq!(listed["installed"], false);
    assert!(
        listed["reason"].as_str().unwrap().contains("`options`"),
        "{listed}"
    );

    // The server's session defaults name a command: it runs as configured.
    let defaults = agent_api::RunRequest::new("")
        .with_options(&agent_api_acp::AcpOptions::default().command(["some-agent", "acp"]));
    let api = serve_gateway(gateway(), ServerConfig::default(), memory().await, defaults).await;
    let listed = acp(&api.get("/v1/agents").await.json());
    assert_eq!(listed["installed"], true, "{listed}");
    assert!(listed.get("needsOption").is_none(), "{listed}");
}
