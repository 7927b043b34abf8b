//! The inspector page of `agent-api serve` (`spec/inspector.md`) driven in a real browser:
//! headless Chromium from Debian's packages through its `chromedriver`, with `fantoccini`.
//!
//! - [`Served`]: a server on 127.0.0.1 with the scripted agent and the [`hostile`] one.
//! - [`Browser`]: a fresh Chromium showing the page, with helpers that wait for what the page
//!   shows, and a screenshot of each step under `target/inspector-screenshots/`.
//!
//! Chromium missing is a failure naming the packages to install (`tests/run.sh` installs them),
//! never a skip.

pub mod hostile;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

/// How long one step may take before the test fails instead of hanging.
pub const STEP: Duration = Duration::from_secs(30);

/// The token of every test server.
pub const TOKEN: &str = "inspector-test-token";

/// A server on 127.0.0.1 (port 0), stopped by [`Served::stop`].
#[derive(Debug)]
pub struct Served {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// The agents of the tests: the scripted one and the hostile one.
pub fn gateway() -> agent_api::Gateway {
    let mut gateway = agent_api::Gateway::new();
    gateway
        .register(Arc::new(agent_api_scripted::ScriptedBackend::new()))
        .expect("the scripted agent registers");
    gateway
        .register(Arc::new(hostile::HostileBackend))
        .expect("the hostile agent registers");
    gateway
}

impl Served {
    /// Serves `gateway` on `store` with [`TOKEN`].
    pub async fn start(
        gateway: agent_api::Gateway,
        store: Arc<dyn agent_api_server::Store>,
    ) -> Served {
        Self::start_at(gateway, store, "127.0.0.1:0").await
    }

    /// Serves `gateway` on `store` with [`TOKEN`] at `address` (`127.0.0.1:PORT`: a server
    /// started again where the page knew it).
    pub async fn start_at(
        gateway: agent_api::Gateway,
        store: Arc<dyn agent_api_server::Store>,
        address: &str,
    ) -> Served {
        // A test stops the server at once, whatever its turns are doing (no drain to wait out).
        let config = agent_api_server::ServerConfig::default()
            .with_token(TOKEN)
            .with_drain_timeout(Duration::ZERO);
        Self::start_with(gateway, store, config, address).await
    }

    /// Serves `gateway` on `store` with `config` (its token: the page's) at `address`.
    pub async fn start_with(
        gateway: agent_api::Gateway,
        store: Arc<dyn agent_api_server::Store>,
        config: agent_api_server::ServerConfig,
        address: &str,
    ) -> Served {
        let server =
            agent_api_server::Server::new(gateway, agent_api::RunRequest::new(""), store, config)
                .await
                .expect("the server starts");
        let deadline = Instant::now() + STEP;
        let listener = loop {
            match tokio::net::TcpListener::bind(address).await {
                Ok(listener) => break listener,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("cannot listen on {address}: {e}"),
            }
        };
        let base = format!("http://{}", listener.local_addr().expect("its address"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(agent_api_server::serve(listener, server, async move {
            let _ = stopped.await;
        }));
        Served {
            base,
            stop: Some(stop),
            task,
        }
    }

    /// The scripted and hostile agents on the memory store.
    pub async fn memory() -> Served {
        let store = agent_api_server::StoreUrl::Memory
            .open()
            .await
            .expect("the memory store");
        Self::start(gateway(), store).await
    }

    /// The page's address, the token in its fragment as `agent-api serve --open` prints it.
    pub fn page(&self, path: &str) -> String {
        page_at(&self.base, path)
    }

    /// Stops the server as a signal would: live sessions terminated and stored as ended.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = &mut self.task;
        tokio::time::timeout(STEP, task)
            .await
            .expect("the server stops in time")
            .expect("the server task")
            .expect("the server ran");
    }
}

/// A TCP relay in front of a server whose connections a test cuts: the page sees its network
/// break (a reset mid-stream) while the server and its sessions go on.
#[derive(Debug)]
pub struct Relay {
    /// `http://127.0.0.1:PORT`: the page's origin when it goes through the relay.
    pub base: String,
    connections: Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

impl Relay {
    /// Relays 127.0.0.1:PORT to `upstream` (`http://HOST:PORT`).
    pub async fn start(upstream: &str) -> Relay {
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("its address"));
        let connections: Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let held = connections.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                held.lock()
                    .expect("the relay's list")
                    .push(task.abort_handle());
            }
        });
        Relay {
            base,
            connections,
            accept,
        }
    }

    /// Cuts every connection open now (new ones are relayed again).
    pub fn cut(&self) {
        for task in self.connections.lock().expect("the relay's list").drain(..) {
            task.abort();
        }
    }
}

/// The page at `path` of the server at `base`, the token in the fragment.
pub fn page_at(base: &str, path: &str) -> String {
    page_with(base, path, TOKEN)
}

/// The page at `path` of the server at `base`, `token` in the fragment.
pub fn page_with(base: &str, path: &str, token: &str) -> String {
    format!("{base}{path}#token={token}")
}

/// The legacy `se/log` command of chromedriver: the browser console's entries since the last
/// call (fantoccini has no command for it; W3C WebDriver has none).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.into()))
    }
}

/// A fresh headless Chromium (its own profile) under its own chromedriver, killed when dropped.
#[derive(Debug)]
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
    shots: PathBuf,
    test: String,
    step: u32,
    console: Vec<Value>,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Where the screenshots go: `$CARGO_TARGET_DIR/inspector-screenshots`, or the target folder
/// this test binary was built in.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().expect("the test binary's path");
            // target/debug/deps/<test binary>
            exe.ancestors()
                .nth(3)
                .expect("the test binary lives in target/<profile>/deps")
                .to_path_buf()
        });
    target.join("inspector-screenshots")
}

fn find_program(name: &str, variable: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        return PathBuf::from(path);
    }
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "`{name}` is not installed: the inspector's browser tests need Debian's `chromium` and `chromium-driver` packages \
             (`apt-get install -y chromium chromium-driver`; tests/run.sh installs them), or {variable} naming it"
        )
    })
}

impl Browser {
    /// Starts Chromium at 1280x800 for the test `test` (its screenshots are named after it).
    pub async fn start(test: &str) -> Browser {
        let chromium = find_program("chromium", "AGENT_API_CHROMIUM");
        let chromedriver = find_program("chromedriver", "AGENT_API_CHROMEDRIVER");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromedriver.display()));
        let profile = tempfile::tempdir().expect("a profile folder");
        let shots = screenshot_dir();
        std::fs::create_dir_all(&shots).expect("the screenshot folder");
        // The machine's network is closed: without these Chromium waits on lookups of its own
        // services (sync, updates, field trials) and the first page load hangs.
        let args = vec![
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1280,800".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({ "binary": chromium, "args": args }),
        );
        capabilities.insert("goog:loggingPrefs".into(), json!({ "browser": "ALL" }));
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + STEP;
        let mut driver = Some(driver);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(error) if Instant::now() < deadline => {
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => {
                    if let Some(mut driver) = driver.take() {
                        let _ = driver.kill();
                    }
                    panic!("chromedriver did not start Chromium: {error}");
                }
            }
        };
        println!("inspector screenshots: {}", shots.display());
        Browser {
            client,
            driver: driver.take().expect("the driver"),
            _profile: profile,
            shots,
            test: test.into(),
            step: 0,
            console: Vec::new(),
        }
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("cannot open {url}: {e}"));
    }

    /// Saves a screenshot as `NN-<test>-<what>.png`; returns its path.
    pub async fn shot(&mut self, what: &str) -> PathBuf {
        self.step += 1;
        let png = self.client.screenshot().await.expect("a screenshot");
        let path = self
            .shots
            .join(format!("{}-{:02}-{what}.png", self.test, self.step));
        std::fs::write(&path, png).expect("the screenshot is written");
        path
    }

    /// Runs `script` (a function body: `arguments[i]`, `return …`) in the page.
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("the script failed: {e}\n{script}"))
    }

    /// The text of every element matching `css`.
    pub async fn texts(&self, css: &str) -> Vec<String> {
        let found = self
            .js(
                "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent)",
                vec![json!(css)],
            )
            .await;
        serde_json::from_value(found).expect("a list of strings")
    }

    /// Waits until an element matching `css` holds `needle`; returns its text. On a timeout the
    /// page's text is in the panic, and a screenshot is saved.
    pub async fn wait_text(&mut self, css: &str, needle: &str) -> String {
        let deadline = Instant::now() + STEP;
        loop {
            let texts = self.texts(css).await;
            if let Some(found) = texts.iter().find(|t| t.contains(needle)) {
                return found.clone();
            }
            if Instant::now() > deadline {
                let shot = self.shot("FAILED").await;
                let body = self.js("return document.body.innerText", vec![]).await;
                panic!(
                    "no `{css}` holds {needle:?} (screenshot {}); the page shows:\n{}",
                    shot.display(),
                    body.as_str().unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `script` returns true.
    pub async fn wait_until(&mut self, what: &str, script: &str) {
        let deadline = Instant::now() + STEP;
        while self.js(script, vec![]).await != Value::Bool(true) {
            if Instant::now() > deadline {
                let shot = self.shot("FAILED").await;
                let body = self.js("return document.body.innerText", vec![]).await;
                panic!(
                    "{what}: not true in time (screenshot {}); the page shows:\n{}",
                    shot.display(),
                    body.as_str().unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks the element matching `css` (as a person would: it must be visible and enabled).
    pub async fn click(&self, css: &str) {
        let element = self
            .client
            .wait()
            .at_most(STEP)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"));
        element
            .click()
            .await
            .unwrap_or_else(|e| panic!("cannot click {css}: {e}"));
    }

    /// Clicks the button whose text is `label` inside the element matching the XPath `within`.
    pub async fn click_button(&self, within: &str, label: &str) {
        let xpath = format!("{within}//button[normalize-space()='{label}']");
        let element = self
            .client
            .wait()
            .at_most(STEP)
            .for_element(Locator::XPath(&xpath))
            .await
            .unwrap_or_else(|e| panic!("no {xpath}: {e}"));
        element
            .click()
            .await
            .unwrap_or_else(|e| panic!("cannot click {xpath}: {e}"));
    }

    /// Types `text` into the element matching `css` (WebDriver keys: "\u{E007}" is Enter,
    /// "\u{E00C}" Escape).
    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self
            .client
            .wait()
            .at_most(STEP)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"));
        element
            .send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("cannot type into {css}: {e}"));
    }

    /// Sets a form field's value (select, text) by typing nothing: for `<select>`.
    pub async fn select(&self, css: &str, value: &str) {
        let element = self
            .client
            .wait()
            .at_most(STEP)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"));
        element
            .select_by_value(value)
            .await
            .unwrap_or_else(|e| panic!("cannot choose {value} in {css}: {e}"));
    }

    /// The console's entries since the page opened (kept across calls).
    pub async fn console(&mut self) -> Vec<Value> {
        let entries = self
            .client
            .issue_cmd(BrowserLog)
            .await
            .expect("chromedriver's browser log");
        self.console
            .extend(entries.as_array().cloned().unwrap_or_default());
        self.console.clone()
    }

    /// The console's errors (and CSP violations, which Chromium reports as errors), except those
    /// holding one of `expected` (a failed request a test caused on purpose: "status of 409").
    pub async fn console_errors(&mut self, expected: &[&str]) -> Vec<String> {
        self.console()
            .await
            .into_iter()
            .filter(|e| e["level"] == "SEVERE")
            .filter_map(|e| e["message"].as_str().map(String::from))
            .filter(|m| !expected.iter().any(|known| m.contains(known)))
            .collect()
    }

    /// Resizes the window.
    pub async fn resize(&self, width: u32, height: u32) {
        self.client
            .set_window_size(width, height)
            .await
            .expect("the window resizes");
    }

    /// Ends the browser session.
    pub async fn finish(self) {
        let _ = self.client.clone().close().await;
    }

    /// Ends a test: no console error (but those holding one of `expected`), the browser closed,
    /// the server stopped.
    pub async fn end(mut self, served: Served, expected: &[&str]) {
        let errors = self.console_errors(expected).await;
        assert!(errors.is_empty(), "console errors: {errors:#?}");
        self.finish().await;
        served.stop().await;
    }
}

/// A scripted session's backend options: `scenario`, with `delay_ms` between words.
pub fn scripted_options(scenario: &str, delay_ms: u64) -> String {
    json!({ "backend.scripted.scenario": scenario, "backend.scripted.delay_ms": delay_ms })
        .to_string()
}

/// The Enter key, for [`Browser::type_into`].
pub const ENTER: &str = "\u{E007}";
/// The Escape key, for [`Browser::type_into`].
pub const ESCAPE: &str = "\u{E00C}";

/// The pane showing the session `id` (XPath, for buttons by their label).
pub fn pane(id: &str) -> String {
    format!("//section[contains(@class,'pane')][.//strong[@class='name' and text()='{id}']]")
}

/// Opens the page with the token in its fragment and waits until it is connected.
pub async fn connected(browser: &mut Browser, served: &Served) {
    connected_at(browser, &served.base).await;
}

/// Opens the page of the server at `base` and waits until it is connected.
pub async fn connected_at(browser: &mut Browser, base: &str) {
    browser.goto(&page_at(base, "/ui/")).await;
    browser.wait_text("#status", "connected").await;
}

/// Creates a session from the page's form.
pub async fn create(browser: &mut Browser, id: &str, agent: &str, permission: &str, options: &str) {
    browser.click(".tabs button[data-tab=new]").await;
    browser
        .js("document.querySelector('#new-id').value = ''", vec![])
        .await;
    browser.type_into("#new-id", id).await;
    browser.select("#new-agent", agent).await;
    browser.select("#new-permission", permission).await;
    browser
        .js("document.querySelector('#new-options').value = ''", vec![])
        .await;
    if !options.is_empty() {
        browser.type_into("#new-options", options).await;
    }
    browser.click("#create button[type=submit]").await;
    browser.wait_text(".pane-head .name", id).await;
}

/// Types `message` in the pane's box and presses Enter.
pub async fn say(browser: &Browser, message: &str) {
    browser
        .type_into(".pane textarea", &format!("{message}{ENTER}"))
        .await;
}
