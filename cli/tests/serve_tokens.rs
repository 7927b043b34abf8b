//! `agent-api token` and a tenant's sessions under `agent-api serve` (issue 49, item 4): tokens
//! made, listed and revoked on the SQLite store of a running server, the token printed once on
//! `create`'s last line and nowhere else (not `list`, not the server's log at the debug level,
//! not the store's file); a tenant's session run by a real process in the tenant's root and
//! agent home; a revoked token refused at its next request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// `agent-api token ARGS` on `store`: its stdout (it must succeed).
fn token(store: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .arg("token")
        .args(args)
        .args(["--store", store])
        .env_remove("AGENT_API_STORE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "agent-api token {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// One HTTP/1.1 request to `address` with `token`: the status and the JSON body.
fn call(address: &str, method: &str, path: &str, body: Option<Value>, token: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\nAuthorization: Bearer {token}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Waits for the file `path` to end with `== done`; returns it.
fn report(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.trim_end().ends_with("== done") {
                return text;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the agent wrote no report at {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn tokens_are_made_listed_and_revoked_beside_a_running_server_and_shown_only_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("server.sqlite3");
    let store = format!("sqlite:{}", db.display());
    let root = dir.path().join("a-root");
    let home = dir.path().join("a-home");
    std::fs::create_dir_all(root.join("proj")).unwrap();

    // Made before the server starts, and refused when they make no sense.
    let made = token(&store, &["create", "--tenant", "a", "--scope", "operate"]);
    let operate = made.lines().last().unwrap().to_string();
    assert!(operate.starts_with("aat_"), "{made}");
    assert_eq!(made.matches(&operate).count(), 1, "shown once: {made}");
    let refused = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args(["token", "create", "--scope", "read", "--store", &store])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--tenant"));

    // The agent: a real process that says where it works and what its home is.
    let agent = dir.path().join("claude");
    std::fs::write(
        &agent,
        "#!/bin/bash\nif [ \"$1\" = \"--version\" ]; then echo '2.0.0 (Claude Code)'; exit 0; fi\n{ echo \"pwd=$PWD\"; echo \"home=$HOME\"; echo \"config=$XDG_CONFIG_HOME\"; echo '== done'; } > \"$PWD/agent-report.txt\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args([
            "serve",
            "--port",
            "0",
            "--store",
            &store,
            "--log-format",
            "json",
        ])
        .arg(format!("--tenant-root=a={}", root.display()))
        .arg(format!("--tenant-home=a={}", home.display()))
        .env("AGENT_API_TOKEN", "the-servers-own-token-71c3")
        .env("AGENT_API_LOG", "debug")
        .env("AGENT_API_CLAUDE_CODE_BIN", &agent)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let address = loop {
        let line = lines
            .next()
            .expect("the server says where it listens")
            .unwrap();
        log.lock().unwrap().push_str(&line);
        if let Some(address) = line.strip_prefix("agent-api: listening on http://") {
            break address.to_string();
        }
    };
    let reader = {
        let log = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        })
    };

    // Made while it runs (its SQLite file is held): taken at once.
    let made = token(&store, &["create", "--tenant", "a", "--scope", "read"]);
    let read = made.lines().last().unwrap().to_string();
    let id = read.split('_').nth(1).unwrap().to_string();
    let (status, me) = call(&address, "GET", "/v1/whoami", None, &read);
    assert_eq!(
        (status, me["tenant"].as_str(), me["scope"].as_str()),
        (200, Some("a"), Some("read"))
    );

    // The tenant's session runs in its root and its home.
    let (status, body) = call(
        &address,
        "POST",
        "/v1/sessions/s-1",
        Some(json!({ "agent": "claude_code", "cwd": "proj" })),
        &operate,
    );
    assert_eq!(status, 200, "{body}");
    let _ = call(
        &address,
        "POST",
        "/v1/sessions/s-1/messages",
        Some(json!({ "message": "hi" })),
        &operate,
    );
    let seen = report(&root.join("proj/agent-report.txt"));
    let real_root = root.canonicalize().unwrap();
    assert!(
        seen.contains(&format!("pwd={}\n", real_root.join("proj").display())),
        "{seen}"
    );
    assert!(
        seen.contains(&format!("home={}\n", home.display())),
        "{seen}"
    );
    assert!(
        seen.contains(&format!("config={}\n", home.join(".config").display())),
        "{seen}"
    );
    // The read token follows but does not act.
    assert_eq!(
        call(&address, "GET", "/v1/sessions/s-1", None, &read).0,
        200
    );
    let (status, body) = call(&address, "POST", "/v1/sessions/s-1/cancel", None, &read);
    assert_eq!(status, 403, "{body}");

    // Listed without a token; revoked while the server runs: refused at the next request.
    let listed = token(&store, &["list"]);
    assert!(
        listed.contains(&id) && !listed.contains(&read) && !listed.contains(&operate),
        "{listed}"
    );
    let revoked = token(&store, &["revoke", &id]);
    assert!(revoked.contains(&id), "{revoked}");
    assert_eq!(call(&address, "GET", "/v1/sessions", None, &read).0, 401);
    let listed = token(&store, &["list"]);
    let row = listed.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(
        !row.trim_end().ends_with('-'),
        "its revoke time is listed: {row}"
    );
    let unknown = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args(["token", "revoke", "ffffffffffffffff", "--store", &store])
        .output()
        .unwrap();
    assert!(!unknown.status.success());

    let _ = call(
        &address,
        "GET",
        "/v1/sessions",
        None,
        "aat_ffffffffffffffff_0000",
    );
    terminate(child.id());
    let _ = child.wait();
    reader.join().unwrap();
    let log = log.lock().unwrap().clone();
    assert!(
        log.contains("/v1/sessions"),
        "the debug log has the requests: {log}"
    );
    for secret in [&read, &operate] {
        assert!(
            !log.contains(secret.as_str()),
            "a token in the server's log"
        );
    }
    // The store's file holds hashes, never a token.
    let mut bytes = Vec::new();
    for suffix in ["", "-wal"] {
        let mut name = db.clone().into_os_string();
        name.push(suffix);
        bytes.extend(std::fs::read(&name).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains(&read) && !text.contains(&operate));
}

/// Stops the server with SIGTERM (it stops its agents and says so).
fn terminate(pid: u32) {
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}
