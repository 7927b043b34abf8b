//! Scoped tokens and tenants (issue 49, item 4): every operation × every scope × a session of the
//! token's own tenant and of another, a revoked token refused at the next request and its open
//! stream ended, a tenant's sessions placed beneath its root with its own agent home, and no
//! token in an answer.

mod common;

use std::sync::Arc;
use std::time::Duration;

use agent_api_server::tokens::{issue, Scope};
use agent_api_server::{ServerConfig, Store, Tenant};
use common::*;
use hyper::Method;
use serde_json::{json, Value};

/// A problem's kind: its `type` without the URN's prefix.
fn kind(problem: &Value) -> &str {
    let kind = problem["type"].as_str().unwrap_or_default();
    kind.rsplit(':').next().unwrap_or(kind)
}

/// The server's own token: an admin of every tenant.
const SERVER_TOKEN: &str = "the-servers-own-token";

struct Tenants {
    api: Api,
    store: Arc<dyn Store>,
    dir: tempfile::TempDir,
    /// Tenant `a`'s tokens by scope.
    a: Vec<(Scope, String)>,
    /// Tenant `b`'s operate token.
    b: String,
    counter: std::sync::atomic::AtomicUsize,
}

async fn token(store: &Arc<dyn Store>, tenant: Option<&str>, scope: Scope) -> String {
    let issued = issue(tenant, scope).unwrap();
    store
        .token_store()
        .expect("the memory store keeps tokens")
        .create_token(issued.record.clone())
        .await
        .unwrap();
    issued.token
}

async fn tenants() -> Tenants {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["a/work/sub", "b/work"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let config = ServerConfig::default()
        .with_token(SERVER_TOKEN)
        .with_max_sessions(1000)
        .with_tenant(
            "a",
            Tenant::new(dir.path().join("a/work")).with_home(dir.path().join("a/home")),
        )
        .with_tenant("b", Tenant::new(dir.path().join("b/work")));
    let store = agent_api_server::StoreUrl::Memory.open().await.unwrap();
    let api = start_on(config, store.clone()).await;
    let mut a = Vec::new();
    for scope in [Scope::Read, Scope::Operate, Scope::Admin] {
        a.push((scope, token(&store, Some("a"), scope).await));
    }
    let b = token(&store, Some("b"), Scope::Operate).await;
    Tenants {
        api,
        store,
        dir,
        a,
        b,
        counter: Default::default(),
    }
}

impl Tenants {
    /// A new session of the tenant whose operate token is `token`.
    async fn session(&self, token: &str, scenario: &str) -> String {
        let n = self
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let id = format!("s-{n}");
        let answer = self
            .api
            .with_token(Some(token))
            .post(&format!("/v1/sessions/{id}"), scripted(scenario))
            .await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
        id
    }

    fn a_token(&self, scope: Scope) -> &str {
        &self.a.iter().find(|(s, _)| *s == scope).unwrap().1
    }
}

/// One operation: its method, its path (`{id}` the session), its body, the scope it needs, and
/// what its own tenant's session answers with that scope (status, and `type` when an error).
struct Op {
    method: Method,
    path: &'static str,
    body: Option<Value>,
    needs: Scope,
    ok: u16,
    stream: bool,
}

fn op(method: Method, path: &'static str, body: Option<Value>, needs: Scope, ok: u16) -> Op {
    Op {
        method,
        path,
        body,
        needs,
        ok,
        stream: path.ends_with("/sse") || path.ends_with("/stream"),
    }
}

fn ops() -> Vec<Op> {
    let message = || Some(json!({ "message": "hello" }));
    vec![
        op(Method::GET, "/v1/sessions/{id}", None, Scope::Read, 200),
        op(
            Method::GET,
            "/v1/sessions/{id}/events",
            None,
            Scope::Read,
            200,
        ),
        op(
            Method::GET,
            "/v1/sessions/{id}/events/sse",
            None,
            Scope::Read,
            200,
        ),
        op(
            Method::POST,
            "/v1/sessions/{id}/messages",
            message(),
            Scope::Operate,
            204,
        ),
        op(
            Method::POST,
            "/v1/sessions/{id}/messages/stream",
            message(),
            Scope::Operate,
            200,
        ),
        op(
            Method::POST,
            "/v1/sessions/{id}/messages",
            Some(json!({ "message": "hello", "agentMode": "plan" })),
            Scope::Operate,
            204,
        ),
        // No request of these ids waits: the handler's own 404, not the session's.
        op(
            Method::POST,
            "/v1/sessions/{id}/permissions/p-1/reply",
            Some(json!({ "reply": "once" })),
            Scope::Operate,
            404,
        ),
        op(
            Method::POST,
            "/v1/sessions/{id}/questions/q-1/reply",
            Some(json!({ "answers": [["yes"]] })),
            Scope::Operate,
            404,
        ),
        op(
            Method::POST,
            "/v1/sessions/{id}/questions/q-1/reject",
            None,
            Scope::Operate,
            404,
        ),
        // The scripted agent cannot be steered: the handler's own 400 naming the capability.
        op(
            Method::POST,
            "/v1/sessions/{id}/steer",
            message(),
            Scope::Operate,
            400,
        ),
        op(
            Method::POST,
            "/v1/sessions/{id}/cancel",
            None,
            Scope::Operate,
            204,
        ),
        op(
            Method::POST,
            "/v1/sessions/{id}/resume",
            None,
            Scope::Operate,
            200,
        ),
        op(
            Method::POST,
            "/v1/sessions/{id}/terminate",
            None,
            Scope::Operate,
            204,
        ),
    ]
}

/// Sends `op` on `session` with `token`: its status and, unless it is a stream, its body.
async fn call(api: &Api, token: &str, op: &Op, session: &str) -> (u16, Value) {
    let path = op.path.replace("{id}", session);
    let api = api.with_token(Some(token));
    let body = op.body.as_ref().map(|b| bytes::Bytes::from(b.to_string()));
    let response = api.send(op.method.clone(), &path, body, &[]).await;
    let status = response.status().as_u16();
    if op.stream && status == 200 {
        // A stream of a live session does not end: its status is the answer.
        return (status, Value::Null);
    }
    let answer = {
        use http_body_util::BodyExt;
        tokio::time::timeout(STEP, response.into_body().collect())
            .await
            .expect("the body ends in time")
            .unwrap()
            .to_bytes()
    };
    let body = serde_json::from_slice(&answer).unwrap_or(Value::Null);
    (status, body)
}

#[tokio::test]
async fn every_operation_by_every_scope_on_its_own_tenants_session_and_on_anothers() {
    let t = tenants().await;
    let mut checked = 0;
    for op in ops() {
        for scope in [Scope::Read, Scope::Operate, Scope::Admin] {
            for own in [true, false] {
                let owner = match own {
                    true => t.a_token(Scope::Operate).to_string(),
                    false => t.b.clone(),
                };
                let session = t.session(&owner, "text").await;
                let case = format!(
                    "{} {} as a's {scope} on {}",
                    op.method,
                    op.path,
                    match own {
                        true => "a's own session",
                        false => "b's session",
                    }
                );
                let (status, body) = call(&t.api, t.a_token(scope), &op, &session).await;
                if scope < op.needs {
                    assert_eq!(status, 403, "{case}: {body}");
                    assert_eq!(kind(&body), "scope_insufficient", "{case}");
                } else if !own {
                    // Exactly what an id no session has is answered: nothing says it exists.
                    let (unknown_status, unknown) =
                        call(&t.api, t.a_token(scope), &op, "no-such-session").await;
                    assert_eq!(status, 404, "{case}: {body}");
                    assert_eq!(kind(&body), "session_not_found", "{case}");
                    assert_eq!(unknown_status, 404, "{case}");
                    assert_eq!(
                        body["detail"].as_str().unwrap().replace(&session, "ID"),
                        unknown["detail"]
                            .as_str()
                            .unwrap()
                            .replace("no-such-session", "ID"),
                        "{case}"
                    );
                } else {
                    assert_eq!(status, op.ok, "{case}: {body}");
                    assert_ne!(kind(&body), "session_not_found", "{case}");
                }
                // The other tenant's session is untouched: still there, not ended, no turn.
                if !own {
                    let info = t
                        .api
                        .with_token(Some(&t.b))
                        .get(&format!("/v1/sessions/{session}"))
                        .await
                        .json();
                    assert_eq!(info["ended"], false, "{case}: {info}");
                    // Its one event: the `session.started` written when it was created.
                    assert_eq!(info["eventCount"], 1, "{case}: {info}");
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, ops().len() * 6);
}

#[tokio::test]
async fn routes_of_no_session_need_their_scope_and_lists_show_the_tenants_own() {
    let t = tenants().await;
    let a_session = t.session(t.a_token(Scope::Operate), "text").await;
    let b_session = t.session(&t.b, "text").await;
    let mut theirs = vec![json!(a_session)];
    for (scope, token) in &t.a {
        let api = t.api.with_token(Some(token));
        // Read: agents, modes, who am I, the list (its tenant's sessions only).
        assert_eq!(api.get("/v1/agents").await.status, 200);
        assert_eq!(api.get("/v1/agents/scripted/modes").await.status, 200);
        let me = api.get("/v1/whoami").await.json();
        assert_eq!(
            me,
            json!({ "tenant": "a", "scope": scope.as_str(), "tokenId": me["tokenId"] })
        );
        let ids: Vec<Value> = api.get("/v1/sessions").await.json()["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].clone())
            .collect();
        assert_eq!(ids, theirs, "{scope}");
        // Operate: create.
        let created = api
            .post(&format!("/v1/sessions/new-{scope}"), scripted("text"))
            .await;
        match scope {
            Scope::Read => assert_eq!(kind(&created.problem(403)), "scope_insufficient"),
            _ => {
                assert_eq!(created.status, 200, "{scope}");
                theirs.push(json!(format!("new-{scope}")));
            }
        }
        // Admin: metrics, installing an agent.
        let metrics = api.get("/metrics").await;
        let install = api.post("/v1/agents/scripted/install", json!({})).await;
        match scope {
            Scope::Admin => {
                assert_eq!(metrics.status, 200);
                assert_ne!(install.status.as_u16(), 403);
            }
            _ => {
                assert_eq!(kind(&metrics.problem(403)), "scope_insufficient");
                assert_eq!(kind(&install.problem(403)), "scope_insufficient");
            }
        }
    }
    // A session id another tenant holds cannot be taken (ids are one namespace): 409, which
    // says the id is taken and nothing of the session.
    let taken = t
        .api
        .with_token(Some(t.a_token(Scope::Operate)))
        .post(&format!("/v1/sessions/{b_session}"), scripted("text"))
        .await;
    let problem = taken.problem(409);
    assert_eq!(kind(&problem), "session_already_exists");
    // The server's own token sees every tenant's sessions.
    let all = t
        .api
        .with_token(Some(SERVER_TOKEN))
        .get("/v1/sessions")
        .await
        .json();
    assert!(all["sessions"].as_array().unwrap().len() >= 4, "{all}");
    assert_eq!(
        t.api
            .with_token(Some(SERVER_TOKEN))
            .get("/v1/whoami")
            .await
            .json(),
        json!({ "scope": "admin" })
    );
    // A tenant's agent history shows none of another's agent sessions.
    let b_native = t
        .api
        .with_token(Some(&t.b))
        .get(&format!("/v1/sessions/{b_session}"))
        .await
        .json()["nativeSessionId"]
        .clone();
    if let Some(native) = b_native.as_str() {
        let answer = t
            .api
            .with_token(Some(t.a_token(Scope::Read)))
            .get(&format!("/v1/agents/scripted/history/{native}/events"))
            .await;
        assert_eq!(kind(&answer.problem(404)), "session_not_found");
    }
}

#[tokio::test]
async fn a_tenants_session_works_beneath_its_root_in_its_own_home_and_hostile_cwds_are_refused() {
    let t = tenants().await;
    let api = t.api.with_token(Some(t.a_token(Scope::Operate)));
    let root = t.dir.path().join("a/work").canonicalize().unwrap();
    let home = t.dir.path().join("a/home");
    assert!(!home.exists());
    let mut body = scripted("text");
    body["cwd"] = json!("sub");
    assert_eq!(api.post("/v1/sessions/placed", body).await.status, 200);
    let record = t.store.session("placed").await.unwrap().unwrap();
    assert_eq!(record.tenant.as_deref(), Some("a"));
    assert_eq!(
        record.working_dir.as_deref(),
        Some(root.join("sub").to_str().unwrap())
    );
    // The tenant's agent home is made, private, when its first session opens.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&home).unwrap().permissions().mode() & 0o777,
        0o700
    );
    // No cwd: the root itself.
    assert_eq!(
        api.post("/v1/sessions/rooted", scripted("text"))
            .await
            .status,
        200
    );
    let record = t.store.session("rooted").await.unwrap().unwrap();
    assert_eq!(record.working_dir.as_deref(), Some(root.to_str().unwrap()));

    std::os::unix::fs::symlink(t.dir.path().join("b/work"), root.join("to-b")).unwrap();
    let b_root = t.dir.path().join("b/work").to_string_lossy().into_owned();
    for (n, (cwd, status, expected)) in [
        (json!(".."), 403, "cwd_outside_root"),
        (json!("sub/../../../b/work"), 403, "cwd_outside_root"),
        (json!(b_root), 403, "cwd_outside_root"),
        (json!("to-b"), 403, "cwd_outside_root"),
        (json!("/"), 403, "cwd_outside_root"),
        (json!("missing"), 400, "cwd_invalid"),
        (json!("sub\u{0}x"), 400, "cwd_invalid"),
        (json!(""), 400, "cwd_invalid"),
        (json!("x".repeat(5000)), 400, "cwd_invalid"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut body = scripted("text");
        body["cwd"] = cwd.clone();
        let answer = api.post(&format!("/v1/sessions/hostile-{n}"), body).await;
        let problem = answer.problem(status);
        assert_eq!(kind(&problem), expected, "{cwd}");
        assert!(t
            .store
            .session(&format!("hostile-{n}"))
            .await
            .unwrap()
            .is_none());
        // The root's own path is the operator's: never told.
        assert!(!problem["detail"]
            .as_str()
            .unwrap()
            .contains(root.to_str().unwrap()));
    }
    // A tenant this server has no root for reads, but opens nothing.
    let c = token(&t.store, Some("c"), Scope::Operate).await;
    let answer = t
        .api
        .with_token(Some(&c))
        .post("/v1/sessions/c-1", scripted("text"))
        .await;
    assert_eq!(kind(&answer.problem(403)), "tenant_not_configured");
    assert_eq!(
        t.api.with_token(Some(&c)).get("/v1/sessions").await.json()["sessions"],
        json!([])
    );
}

#[tokio::test]
async fn a_revoked_token_is_refused_at_its_next_request_and_its_open_stream_ends() {
    let t = tenants().await;
    let issued = issue(Some("a"), Scope::Read).unwrap();
    let tokens = t.store.token_store().unwrap();
    tokens.create_token(issued.record.clone()).await.unwrap();
    let session = t.session(t.a_token(Scope::Operate), "text").await;
    let api = t.api.with_token(Some(&issued.token));
    assert_eq!(api.get("/v1/sessions").await.status, 200);
    let mut stream = api
        .sse(
            Method::GET,
            &format!("/v1/sessions/{session}/events/sse"),
            None,
            &[],
        )
        .await;

    assert!(tokens.revoke_token(&issued.record.id, 1).await.unwrap());
    let refused = api.get("/v1/sessions").await;
    let problem = refused.problem(401);
    assert_eq!(kind(&problem), "token_invalid");
    assert!(!String::from_utf8_lossy(&refused.body).contains(&issued.token));
    assert_eq!(
        api.get(&format!("/v1/sessions/{session}")).await.status,
        401
    );
    // The stream it opened ends (checked every two seconds) though the session lives on.
    stream.rest_or_cut().await;
    assert_eq!(
        t.api
            .with_token(Some(t.a_token(Scope::Read)))
            .get(&format!("/v1/sessions/{session}"))
            .await
            .json()["ended"],
        false
    );
    // Revoking again keeps its first time; an unknown id is no token.
    assert!(tokens.revoke_token(&issued.record.id, 99).await.unwrap());
    assert_eq!(
        tokens
            .token(&issued.record.id)
            .await
            .unwrap()
            .unwrap()
            .revoked_at,
        Some(1)
    );
    assert!(!tokens.revoke_token("0000000000000000", 1).await.unwrap());
}

#[tokio::test]
async fn a_wrong_or_forged_token_is_refused_and_never_echoed() {
    let t = tenants().await;
    let real = t.a_token(Scope::Admin).to_string();
    // The right id with another secret; a token of the right shape no store holds; garbage.
    let id = real.split('_').nth(1).unwrap();
    let forged = format!("aat_{id}_{}", "0".repeat(64));
    let unknown = format!("aat_{}_{}", "1".repeat(16), "2".repeat(64));
    for wrong in [forged.as_str(), unknown.as_str(), "nonsense", ""] {
        let answer = t.api.with_token(Some(wrong)).get("/v1/sessions").await;
        answer.problem(401);
        assert_eq!(answer.headers["www-authenticate"], "Bearer");
        if !wrong.is_empty() {
            assert!(
                !String::from_utf8_lossy(&answer.body).contains(wrong),
                "{wrong}"
            );
        }
    }
    // The store holds the hash, never the token.
    let stored = t.store.token_store().unwrap().tokens().await.unwrap();
    assert_eq!(stored.len(), 4);
    for record in &stored {
        assert_eq!(record.hash.len(), 64);
        assert!(!t.a.iter().any(|(_, token)| token.contains(&record.hash)));
        assert!(!format!("{record:?}").contains(&real));
    }
    // Its last use is recorded (at most once a minute per server).
    let _ = t.api.with_token(Some(&real)).get("/v1/whoami").await;
    let used = tokio::time::timeout(STEP, async {
        loop {
            let record = t
                .store
                .token_store()
                .unwrap()
                .token(id)
                .await
                .unwrap()
                .unwrap();
            if record.last_used_at.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(used.is_ok(), "the token's last use is recorded");
}

/// The ids `GET /v1/tokens` answers `token` with.
async fn listed(api: &Api, token: &str) -> Vec<String> {
    let answer = api.with_token(Some(token)).get("/v1/tokens").await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    answer.json()["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

/// The public id of a stored token (`aat_<id>_…`).
fn id_of(token: &str) -> String {
    token.split('_').nth(1).unwrap().to_string()
}

#[tokio::test]
async fn only_an_admin_token_manages_tokens_over_http_and_a_tenants_admin_only_its_own_tenants() {
    let t = tenants().await;
    let a_admin = t.a_token(Scope::Admin).to_string();
    let a_read_id = id_of(t.a_token(Scope::Read));
    let b_id = id_of(&t.b);

    // Read and operate: 403 on every token route, whatever the id; nothing is revoked.
    for scope in [Scope::Read, Scope::Operate] {
        let api = t.api.with_token(Some(t.a_token(scope)));
        for answer in [
            api.get("/v1/tokens").await,
            api.post("/v1/tokens", json!({ "scope": "read" })).await,
            api.post_empty(&format!("/v1/tokens/{a_read_id}/revoke"))
                .await,
            api.post_empty(&format!("/v1/tokens/{b_id}/revoke")).await,
        ] {
            assert_eq!(kind(&answer.problem(403)), "scope_insufficient", "{scope}");
        }
    }
    assert_eq!(
        t.store.token_store().unwrap().tokens().await.unwrap().len(),
        4
    );
    assert_eq!(
        t.api
            .with_token(Some(t.a_token(Scope::Read)))
            .get("/v1/whoami")
            .await
            .status,
        200
    );

    // A's admin lists a's tokens only: never b's, never a token or its hash.
    let mut a_ids: Vec<String> = t.a.iter().map(|(_, token)| id_of(token)).collect();
    assert_eq!(listed(&t.api, &a_admin).await, a_ids);
    let raw = t.api.with_token(Some(&a_admin)).get("/v1/tokens").await;
    let text = String::from_utf8_lossy(&raw.body).into_owned();
    assert!(!text.contains(&b_id), "{text}");
    for record in t.store.token_store().unwrap().tokens().await.unwrap() {
        assert!(!text.contains(&record.hash), "{text}");
    }
    for (_, token) in &t.a {
        assert!(!text.contains(token.as_str()), "{text}");
    }
    let first = &raw.json()["tokens"][0];
    assert_eq!(first["tenant"], "a");
    assert_eq!(first["scope"], "read");
    assert!(
        first["createdAt"].as_str().unwrap().ends_with('Z'),
        "{first}"
    );

    // It makes a token of its own tenant, shown once, stored hashed; it works at once.
    let answer = t
        .api
        .with_token(Some(&a_admin))
        .post("/v1/tokens", json!({ "scope": "read" }))
        .await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    assert_eq!(answer.headers["cache-control"], "no-store");
    let made = answer.json();
    let token = made["token"].as_str().unwrap().to_string();
    let id = made["id"].as_str().unwrap().to_string();
    assert_eq!(id_of(&token), id);
    assert_eq!(
        (&made["tenant"], &made["scope"]),
        (&json!("a"), &json!("read"))
    );
    let record = t
        .store
        .token_store()
        .unwrap()
        .token(&id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.hash, agent_api_server::tokens::hash(&token));
    assert!(!format!("{record:?}").contains(&token));
    let me = t
        .api
        .with_token(Some(&token))
        .get("/v1/whoami")
        .await
        .json();
    assert_eq!(me, json!({ "tenant": "a", "scope": "read", "tokenId": id }));
    a_ids.push(id.clone());
    let listed_now = t.api.with_token(Some(&a_admin)).get("/v1/tokens").await;
    assert!(!String::from_utf8_lossy(&listed_now.body).contains(&token));
    assert_eq!(listed(&t.api, &a_admin).await, a_ids);
    // Naming its own tenant is the same; naming another is refused, and so is a bad scope.
    let own = t
        .api
        .with_token(Some(&a_admin))
        .post("/v1/tokens", json!({ "scope": "admin", "tenant": "a" }))
        .await
        .json();
    assert_eq!(
        (&own["tenant"], &own["scope"]),
        (&json!("a"), &json!("admin"))
    );
    a_ids.push(own["id"].as_str().unwrap().to_string());
    let other = t
        .api
        .with_token(Some(&a_admin))
        .post("/v1/tokens", json!({ "scope": "operate", "tenant": "b" }))
        .await;
    assert_eq!(kind(&other.problem(403)), "scope_insufficient");
    let bad = t
        .api
        .with_token(Some(&a_admin))
        .post("/v1/tokens", json!({ "scope": "root" }))
        .await;
    assert_eq!(kind(&bad.problem(400)), "invalid_request");
    assert_eq!(
        t.store.token_store().unwrap().tokens().await.unwrap().len(),
        6
    );

    // B's token is never found by a's admin: 404 exactly as an id no token has; still valid.
    let theirs = t
        .api
        .with_token(Some(&a_admin))
        .post_empty(&format!("/v1/tokens/{b_id}/revoke"))
        .await;
    let unknown = t
        .api
        .with_token(Some(&a_admin))
        .post_empty("/v1/tokens/0000000000000000/revoke")
        .await;
    let (theirs, unknown) = (theirs.problem(404), unknown.problem(404));
    assert_eq!(kind(&theirs), "token_not_found");
    assert_eq!(
        theirs["detail"].as_str().unwrap().replace(&b_id, "ID"),
        unknown["detail"]
            .as_str()
            .unwrap()
            .replace("0000000000000000", "ID")
    );
    assert_eq!(
        t.api.with_token(Some(&t.b)).get("/v1/whoami").await.status,
        200
    );

    // It revokes its tenant's token: refused at its next request, shown revoked in the list.
    let revoked = t
        .api
        .with_token(Some(&a_admin))
        .post_empty(&format!("/v1/tokens/{id}/revoke"))
        .await;
    assert_eq!(revoked.status, 204, "{:?}", revoked.body);
    let refused = t.api.with_token(Some(&token)).get("/v1/whoami").await;
    assert_eq!(kind(&refused.problem(401)), "token_invalid");
    let list = t
        .api
        .with_token(Some(&a_admin))
        .get("/v1/tokens")
        .await
        .json();
    let shown = list["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == json!(id))
        .unwrap()
        .clone();
    assert!(shown["revokedAt"].is_string(), "{shown}");

    // The server's own token manages every tenant's: b's among them, and one of every tenant.
    let server = t.api.with_token(Some(SERVER_TOKEN));
    assert!(listed(&t.api, SERVER_TOKEN).await.contains(&b_id));
    let every = server
        .post("/v1/tokens", json!({ "scope": "admin" }))
        .await
        .json();
    assert!(every.get("tenant").is_none(), "{every}");
    let untenanted_read = server.post("/v1/tokens", json!({ "scope": "read" })).await;
    assert_eq!(kind(&untenanted_read.problem(400)), "invalid_request");
    // A tenant's admin never sees a token of every tenant.
    assert_eq!(listed(&t.api, &a_admin).await, a_ids);
    let every_id = every["id"].as_str().unwrap();
    let hidden = t
        .api
        .with_token(Some(&a_admin))
        .post_empty(&format!("/v1/tokens/{every_id}/revoke"))
        .await;
    assert_eq!(kind(&hidden.problem(404)), "token_not_found");
    let b_by_server = server
        .post_empty(&format!("/v1/tokens/{b_id}/revoke"))
        .await;
    assert_eq!(b_by_server.status, 204);
    assert_eq!(
        t.api.with_token(Some(&t.b)).get("/v1/whoami").await.status,
        401
    );
}
