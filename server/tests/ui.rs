//! The inspector's files over HTTP: served without the token (they hold no data) under a strict
//! Content-Security-Policy, with their content types; its plain links serve the page; the whole
//! page stays under its 200 KB budget. (The page itself is driven in Chromium by
//! `tests/inspector`.)

mod common;

use agent_api_server::ServerConfig;
use common::*;

#[tokio::test]
async fn the_page_is_served_without_a_token_under_a_strict_policy_and_its_links_serve_it() {
    let api = start(ServerConfig::default().with_token("s3cret")).await;
    let anonymous = api.with_token(None);
    for (path, content_type) in [
        ("/ui/", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/api.js", "text/javascript; charset=utf-8"),
        ("/ui/text.js", "text/javascript; charset=utf-8"),
        ("/ui/markdown.js", "text/javascript; charset=utf-8"),
        ("/ui/transcript.js", "text/javascript; charset=utf-8"),
        ("/ui/style.css", "text/css; charset=utf-8"),
        ("/ui/favicon.svg", "image/svg+xml"),
        ("/ui/sessions/s-1", "text/html; charset=utf-8"),
        ("/ui/history/claude_code/abc", "text/html; charset=utf-8"),
    ] {
        let answer = anonymous.get(path).await;
        assert_eq!(answer.status, 200, "{path}");
        assert_eq!(answer.headers["content-type"], content_type, "{path}");
        let policy = answer.headers["content-security-policy"].to_str().unwrap();
        assert_eq!(
            policy,
            agent_api_server::ui::CONTENT_SECURITY_POLICY,
            "{path}"
        );
        assert!(
            policy.starts_with("default-src 'self'") && !policy.contains("unsafe"),
            "{policy}"
        );
        assert!(
            policy.contains("connect-src 'self'") && policy.contains("frame-ancestors 'none'"),
            "{policy}"
        );
        assert_eq!(answer.headers["x-content-type-options"], "nosniff");
        assert_eq!(answer.headers["referrer-policy"], "no-referrer");
    }
    // The page has no inline script or style for the policy to allow.
    let page = String::from_utf8(anonymous.get("/ui/").await.body.to_vec()).unwrap();
    assert!(
        !page.contains("<script>") && !page.contains(" style=") && !page.contains("<style"),
        "{page}"
    );
    assert!(page.contains(r#"<script type="module" src="/ui/app.js"></script>"#));

    let redirect = anonymous.get("/ui").await;
    assert_eq!(
        (redirect.status.as_u16(), &redirect.headers["location"]),
        (308, &"/ui/".parse::<hyper::header::HeaderValue>().unwrap())
    );
    assert_eq!(anonymous.get("/ui/nothing.js").await.status, 404);
    assert_eq!(anonymous.get("/ui/sessions").await.status, 404);
    // The API stays behind the token.
    anonymous.get("/v1/sessions").await.problem(401);
}

#[test]
fn the_whole_page_is_under_200_kb() {
    let bytes = agent_api_server::ui::page_bytes();
    assert!(bytes < 200_000, "the page is {bytes} bytes");
}
