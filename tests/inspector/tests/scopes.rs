//! The inspector with a scoped token (issue 49, item 4): it asks the server what its token may
//! do (`GET /v1/whoami`), says so, and hides what the scope cannot do. A tenant's operate token
//! creates a session that waits on a permission; the same tenant's read token then sees the
//! session and its waiting permission, with no New tab, no message box, no Cancel or Terminate
//! and no answer buttons; another tenant's token does not see it at all.

use agent_api_inspector_tests::*;
use agent_api_server::tokens::{issue, Scope};
use agent_api_server::{ServerConfig, Tenant};

/// A token of `scope` for `tenant`, kept in `store`.
async fn token(
    store: &std::sync::Arc<dyn agent_api_server::Store>,
    tenant: &str,
    scope: Scope,
) -> String {
    let issued = issue(Some(tenant), scope).expect("a token");
    store
        .token_store()
        .expect("the memory store keeps tokens")
        .create_token(issued.record.clone())
        .await
        .expect("the token is kept");
    issued.token
}

/// Whether the element `css` is shown (it and its ancestors not hidden).
async fn shown(browser: &Browser, css: &str) -> bool {
    let script = format!(
        "const e = document.querySelector({css:?}); return !!e && e.getClientRects().length > 0;"
    );
    browser.js(&script, vec![]).await == serde_json::json!(true)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_token_sees_the_session_and_its_waiting_permission_but_no_control() {
    let root = tempfile::tempdir().expect("a root");
    let store = agent_api_server::StoreUrl::Memory
        .open()
        .await
        .expect("the memory store");
    let config = ServerConfig::default()
        .with_token(TOKEN)
        .with_tenant("team-a", Tenant::new(root.path()))
        .with_tenant("team-b", Tenant::new(root.path()))
        // Its turn waits for a permission when the test stops the server: no drain to wait out.
        .with_drain_timeout(std::time::Duration::ZERO);
    let served = Served::start_with(gateway(), store.clone(), config, "127.0.0.1:0").await;
    let operate = token(&store, "team-a", Scope::Operate).await;
    let read = token(&store, "team-a", Scope::Read).await;
    let other = token(&store, "team-b", Scope::Read).await;

    // The operate token: everything a person acts with, and its scope said.
    let mut browser = Browser::start("scope-operate").await;
    browser
        .goto(&page_with(&served.base, "/ui/", &operate))
        .await;
    browser.wait_text("#status", "connected").await;
    browser.wait_text("#scope", "operate · tenant team-a").await;
    assert!(shown(&browser, ".tabs button[data-tab=new]").await);
    create(
        &mut browser,
        "waits",
        "scripted",
        "ask",
        &scripted_options("permission", 0),
    )
    .await;
    say(&browser, "go").await;
    browser.wait_text(".row.permission", "echo hi").await;
    assert!(shown(&browser, ".pane .composer").await);
    assert!(shown(&browser, ".pane .terminate").await);
    assert!(shown(&browser, ".pane .row.permission .answer button").await);
    browser.shot("operate").await;
    browser.finish().await;

    // The read token: the session and the permission it waits on, and no control at all.
    let mut browser = Browser::start("scope-read").await;
    browser
        .goto(&page_with(&served.base, "/ui/sessions/waits", &read))
        .await;
    browser.wait_text("#status", "connected").await;
    browser.wait_text("#scope", "read · tenant team-a").await;
    browser.wait_text(".row.permission", "echo hi").await;
    for hidden in [
        ".tabs button[data-tab=new]",
        ".pane .composer",
        ".pane .cancel",
        ".pane .terminate",
        ".pane .row.permission .answer button",
    ] {
        assert!(
            !shown(&browser, hidden).await,
            "{hidden} is hidden from a read token"
        );
    }
    browser.wait_text("#sessions", "waits").await;
    browser.shot("read").await;
    browser.finish().await;

    // Another tenant's token: the session is not listed, and its link finds nothing.
    let mut browser = Browser::start("scope-other").await;
    browser
        .goto(&page_with(&served.base, "/ui/sessions/waits", &other))
        .await;
    browser.wait_text("#status", "connected").await;
    browser.wait_text("#scope", "read · tenant team-b").await;
    browser.wait_text("#notice", "no session has id").await;
    let listed = browser.texts("#sessions li").await;
    assert!(
        listed.iter().all(|row| !row.contains("waits")),
        "{listed:?}"
    );
    browser.shot("other-tenant").await;
    browser.end(served, &["404"]).await;
}
