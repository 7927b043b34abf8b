//! The inspector: a web page served at `/ui/` (`spec/inspector.md`) where a person watches and
//! steers sessions through the public HTTP API, with the token like any client.
//!
//! Its files (`server/ui/`: plain HTML, CSS and JavaScript modules) are embedded in the binary,
//! so a `cargo install` or a fresh clone needs no JavaScript build step and the page needs no
//! network. They are served without a token (they hold no data: the page asks for the token and
//! sends it on every API call) under a strict Content-Security-Policy: scripts, styles, images and
//! connections from this server only, no inline script, no framing.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

/// The Content-Security-Policy of every inspector file: only this server's own files run, and the
/// page connects only to this server (so the token it holds goes nowhere else). No `unsafe-inline`:
/// markup an agent smuggled into the page could not run even if it were ever parsed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

/// Every file of the page: the whole page is these bytes.
const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../ui/index.html"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../ui/style.css"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../ui/app.js"),
    },
    Asset {
        name: "api.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../ui/api.js"),
    },
    Asset {
        name: "text.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../ui/text.js"),
    },
    Asset {
        name: "markdown.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../ui/markdown.js"),
    },
    Asset {
        name: "transcript.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../ui/transcript.js"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("../ui/favicon.svg"),
    },
];

/// The size of the whole page, every file counted once (the budget is 200 KB).
pub fn page_bytes() -> usize {
    ASSETS.iter().map(|a| a.body.len()).sum()
}

/// The first path segments under `/ui/` that are views of the page (its plain links), served
/// the page itself: `sessions/ID`, `history/AGENT/ID`.
const VIEWS: &[&str] = &["sessions", "history"];

fn file(asset: &Asset) -> Response {
    let mut response = (StatusCode::OK, asset.body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // The page's address may name a session: it is not sent to anyone else.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // A new binary serves a new page: never a stale script beside a newer server.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn index() -> Response {
    file(&ASSETS[0])
}

/// `GET /ui`: to the page.
pub(crate) async fn root() -> Redirect {
    Redirect::permanent("/ui/")
}

/// `GET /ui/`: the page.
pub(crate) async fn page() -> Response {
    index()
}

/// `GET /ui/{*path}`: a file of the page, or the page for one of its views, else 404.
pub(crate) async fn asset(Path(path): Path<String>) -> Response {
    if let Some(asset) = ASSETS.iter().find(|a| a.name == path) {
        return file(asset);
    }
    let view = path.split('/').next().unwrap_or_default();
    if VIEWS.contains(&view) && path.contains('/') {
        return index();
    }
    let mut response = (StatusCode::NOT_FOUND, "no such file in the inspector\n").into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
