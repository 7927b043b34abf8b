//! `agent-api serve` as a process: killed with SIGKILL mid-turn and started again on the same
//! store (SQLite, and PostgreSQL from `tests/postgres/setup.sh`), it serves every event it had
//! served; three of them on one PostgreSQL act as one fleet (front doors, placement, admission,
//! takeover), and on the real, pinned Claude Code (a permission answered and SSE followed through
//! servers that do not run the session, its owner killed, the session resumed natively
//! elsewhere); its token and host rules; SIGTERM stops it cleanly; and the real Claude Code on
//! the bench's model server driven over HTTP only (two turns, a permission request answered, a
//! tenant's session run beneath the tenant's root with the tenant's own home).
//! The end-to-end tests start with `agent_bench::e2e_enabled_or_explain` (they fail with install
//! instructions when the CLI is missing, unless `AGENT_API_E2E=skip`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A running `agent-api serve`, killed when dropped.
struct Served {
    child: Child,
    address: String,
    token: Option<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(args: &[&str]) -> Served {
    serve_with(Command::new(env!("CARGO_BIN_EXE_agent-api")), args)
}

/// Starts `agent-api serve` from `command` (its environment and directory) with `args`.
fn serve_with(mut command: Command, args: &[&str]) -> Served {
    let child = command
        .arg("serve")
        .args(["--port", "0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Owned at once: a failing step below kills it.
    let mut served = Served {
        child,
        address: String::new(),
        token: None,
    };
    let mut lines = BufReader::new(served.child.stderr.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "the server did not say where it listens"
        );
        let line = lines
            .next()
            .expect("the server printed its address")
            .unwrap();
        if let Some(token) = line.strip_prefix("agent-api: token: ") {
            served.token = Some(token.to_string());
        }
        if let Some(address) = line.strip_prefix("agent-api: listening on http://") {
            served.address = address.to_string();
            // Keep reading stderr so that the server never blocks on it.
            std::thread::spawn(move || for _ in lines.by_ref() {});
            return served;
        }
    }
}

impl Served {
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        self.try_call(method, path, body, token, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// [`Served::call`] waiting up to `wait` for the answer, an error instead of a panic when
    /// none comes (a server going away).
    fn try_call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
        wait: Duration,
    ) -> std::io::Result<(u16, Value)> {
        let mut stream = TcpStream::connect(&self.address)?;
        stream.set_read_timeout(Some(wait))?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let auth = token
            .or(self.token.as_deref())
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{auth}\r\n{body}",
            self.address,
            body.len()
        );
        stream.write_all(request.as_bytes())?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        let broken = || std::io::Error::other(format!("not an HTTP answer: {response:?}"));
        let (head, body) = response.split_once("\r\n\r\n").ok_or_else(broken)?;
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(broken)?;
        let body = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(body).map_err(std::io::Error::other)?
        };
        Ok((status, body))
    }

    fn events(&self, session: &str) -> Vec<Value> {
        self.events_as(session, None)
    }

    /// A session's events as `token` reads them (else the server's own).
    fn events_as(&self, session: &str, token: Option<&str>) -> Vec<Value> {
        let (status, page) = self.call(
            "GET",
            &format!("/v1/sessions/{session}/events?include_raw=true&limit=1000"),
            None,
            token,
        );
        assert_eq!(status, 200, "{page}");
        page["events"].as_array().unwrap().clone()
    }
}

#[test]
fn serve_killed_with_sigkill_mid_turn_serves_every_event_again_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    killed_and_restarted(
        &format!("sqlite:{}", dir.path().join("server.sqlite3").display()),
        "kept",
    );
}

/// The test database's URL and a name part no other run used (the database outlives test runs);
/// `None` (said) when `AGENT_API_POSTGRES=skip`.
fn postgres(what: &str) -> Option<(String, String)> {
    if std::env::var("AGENT_API_POSTGRES").as_deref() == Ok("skip") {
        eprintln!("SKIPPED: AGENT_API_POSTGRES=skip: {what} was not tested");
        return None;
    }
    let url = std::env::var("AGENT_API_TEST_POSTGRES_URL").expect(
        "AGENT_API_TEST_POSTGRES_URL names the test database: run `bash tests/postgres/setup.sh` and export it (tests/run.sh does)",
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    Some((url, format!("{}-{}", std::process::id(), now.as_nanos())))
}

#[test]
fn serve_on_postgres_killed_with_sigkill_mid_turn_serves_every_event_again_after_a_restart() {
    let Some((url, tag)) = postgres("serve on PostgreSQL") else {
        return;
    };
    killed_and_restarted(&url, &format!("kept-{tag}"));
}

/// A database of the test's own on the PostgreSQL server of `url`, dropped with it.
struct OwnDatabase {
    admin: String,
    name: String,
    url: String,
}

impl OwnDatabase {
    fn new(url: &str, tag: &str) -> Self {
        let name = format!("agent_api_cli_{}", tag.replace('-', "_"));
        run_sql(url, &format!("CREATE DATABASE {name}"));
        let (base, _) = url
            .rsplit_once('/')
            .expect("a database URL names its database");
        Self {
            admin: url.to_string(),
            url: format!("{base}/{name}"),
            name,
        }
    }
}

impl Drop for OwnDatabase {
    fn drop(&mut self) {
        run_sql(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

/// Runs one SQL statement on the database of `url`.
fn run_sql(url: &str, statement: &str) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
            tokio::spawn(connection);
            client
                .batch_execute(statement)
                .await
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
        });
}

/// Three `agent-api serve` processes on one PostgreSQL, as an operator starts them (issue 48):
/// one that runs agents (`--max-sessions 1`) and two API-only front doors (`--no-agents`), with a
/// 1 s lease. A session created through a front door runs on the worker; a message sent through
/// the other door runs there too; a second session finds the fleet full (503 `fleet_full`); the
/// worker killed with SIGKILL and another started, the next message through a door brings the
/// session back on it (one `session_resumed`, its log gap-free, both turns completed).
#[test]
fn three_serve_processes_on_postgres_act_as_one_fleet() {
    let Some((shared, tag)) = postgres("a fleet of serve processes") else {
        return;
    };
    // Every server of a database counts in its placement: on a database of its own, the test's
    // servers are the only ones (servers other tests start on the shared one take no session).
    let database = OwnDatabase::new(&shared, &tag);
    let url = database.url.clone();
    let fleet = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "--store",
            url.as_str(),
            "--no-token",
            "--server-lease",
            "1",
            "--daemon-id",
            name,
        ];
        args.extend_from_slice(extra);
        serve(&args)
    };
    let (worker, doors) = (
        format!("worker-{tag}"),
        [format!("door1-{tag}"), format!("door2-{tag}")],
    );
    let first_worker = fleet(&worker, &["--max-sessions", "1"]);
    let door = fleet(&doors[0], &["--no-agents"]);
    let other_door = fleet(&doors[1], &["--no-agents"]);
    let echo = json!({"agent": "scripted", "options": {"backend.scripted.scenario": "echo", "backend.scripted.delay_ms": 0}});
    let id = format!("fleet-{tag}");
    let session = format!("/v1/sessions/{id}");
    let (status, body) = door.call("POST", &session, Some(echo.clone()), None);
    assert_eq!(status, 200, "{body}");
    let owner = |served: &Served| served.call("GET", &session, None, None).1["owner"].clone();
    assert!(
        owner(&other_door)
            .as_str()
            .is_some_and(|o| o.starts_with(&worker)),
        "a front door runs no agent: {}",
        owner(&other_door)
    );
    let message = |served: &Served, text: &str| {
        served
            .call(
                "POST",
                &format!("{session}/messages"),
                Some(json!({"message": text})),
                None,
            )
            .0
    };
    assert_eq!(message(&other_door, "one"), 204);
    wait_turns(&door, &id, 1);
    let (status, body) = other_door.call(
        "POST",
        &format!("/v1/sessions/full-{tag}"),
        Some(echo),
        None,
    );
    assert_eq!(
        (status, &body["type"]),
        (503, &json!("urn:agent-api:error:fleet_full")),
        "{body}"
    );

    drop(first_worker); // SIGKILL
    let second_worker = format!("worker2-{tag}");
    let _worker = fleet(&second_worker, &[]);
    assert_eq!(message(&door, "two"), 204);
    let events = wait_turns(&other_door, &id, 2);
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, (1..=events.len() as u64).collect::<Vec<_>>());
    let resumed = events
        .iter()
        .filter(|e| {
            e["type"] == "item.completed"
                && e["data"]["item"]["content"][0]["label"] == "session_resumed"
        })
        .count();
    assert_eq!(resumed, 1, "{events:#?}");
    assert!(
        owner(&door)
            .as_str()
            .is_some_and(|o| o.starts_with(&second_worker)),
        "{}",
        owner(&door)
    );
}

/// Kills a server on `store` with SIGKILL in the middle of session `id`'s turn, starts another on
/// the same store, and checks that it serves every event again, leaves the session resumable,
/// and that the next message closes the interrupted turn and goes on.
fn killed_and_restarted(store: &str, id: &str) {
    // A short lease: on PostgreSQL the killed server counts as running until its heartbeat is
    // that old.
    let first = serve(&["--store", store, "--no-token", "--server-lease", "1"]);
    let create = json!({"agent": "scripted", "options": {"backend.scripted.scenario": "slow", "backend.scripted.delay_ms": 50}});
    assert_eq!(
        first
            .call("POST", &format!("/v1/sessions/{id}"), Some(create), None)
            .0,
        200
    );
    assert_eq!(
        first
            .call(
                "POST",
                &format!("/v1/sessions/{id}/messages"),
                Some(json!({"message": "go slowly"})),
                None
            )
            .0,
        204
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let served = loop {
        let events = first.events(id);
        if events.iter().filter(|e| e["type"] == "item.delta").count() >= 5 {
            break events;
        }
        assert!(Instant::now() < deadline, "the turn did not stream");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        !served.iter().any(|e| e["type"] == "session.ended"),
        "killed mid-turn"
    );
    drop(first); // SIGKILL

    let second = serve(&["--store", store, "--no-token", "--server-lease", "1"]);
    let events = second.events(id);
    assert!(events.len() >= served.len(), "{events:#?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while second
        .call("GET", &format!("/v1/sessions/{id}"), None, None)
        .1["state"]
        == "live"
    {
        assert!(
            Instant::now() < deadline,
            "the killed server's lease did not run out"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        events[..served.len()],
        served[..],
        "every served event, raw payloads included, is still there"
    );
    let (_, info) = second.call("GET", &format!("/v1/sessions/{id}"), None, None);
    assert_eq!(
        (&info["state"], &info["ended"]),
        (&json!("resumable"), &json!(false)),
        "{info}"
    );
    let (status, _) = second.call(
        "POST",
        &format!("/v1/sessions/{id}/messages"),
        Some(json!({"message": "again"})),
        None,
    );
    assert_eq!(status, 204);
    let deadline = Instant::now() + Duration::from_secs(60);
    let events = loop {
        let events = second.events(id);
        let completed = events
            .iter()
            .any(|e| e["data"]["item"]["content"][0]["label"] == "turn_completed");
        if completed {
            break events;
        }
        assert!(Instant::now() < deadline, "{events:#?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let sequences: Vec<u64> = events
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "error" && e["data"]["code"] == "interrupted")
            .count(),
        1,
        "{events:#?}"
    );
}

/// The processes of this user whose environment holds `var`.
fn processes_with(var: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == var.as_bytes()))
        })
        // A zombie holds no environment; one still listed is gone for this purpose.
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
        })
        .collect()
}

/// Waits until `check` holds of the processes carrying `var`.
fn wait_processes(var: &str, what: &str, check: impl Fn(&[i32]) -> bool) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = processes_with(var);
        if check(&found) {
            return found;
        }
        assert!(Instant::now() < deadline, "{what}: {found:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `agent-api serve` whose Claude Code is `fake` (an agent that starts a child and waits), every
/// process it starts marked with `mark` in its environment; a session is opened (in the
/// background: the fake never answers) so that the agent and its child run.
fn serve_fake_agent(fake: &std::path::Path, mark: &str) -> Served {
    let (key, value) = mark.split_once('=').unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-api"));
    command
        .env("AGENT_API_CLAUDE_CODE_BIN", fake)
        .env(key, value);
    let served = serve_with(command, &["--store", "memory", "--no-token"]);
    let address = served.address.clone();
    std::thread::spawn(move || {
        let mut stream = TcpStream::connect(&address).unwrap();
        let body = r#"{"agent":"claude_code"}"#;
        let _ = write!(
            stream,
            "POST /v1/sessions/held HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.read_to_end(&mut Vec::new());
    });
    served
}

#[test]
fn agents_die_with_a_server_killed_with_sigkill_or_at_the_next_start_when_its_watchdog_died_too() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("claude");
    std::fs::write(
        &fake,
        "#!/bin/sh\ncase \"$1\" in --version) echo '2.0.0 (Claude Code)'; exit 0;; esac\nsleep 1000 &\nexec sleep 1001\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mark = format!("AGENT_API_TEST_MARK={}-{}", std::process::id(), line!());
    let agent_processes = |found: &[i32], server: i32| -> Vec<i32> {
        found
            .iter()
            .copied()
            .filter(|pid| *pid != server)
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|cmd| cmd.starts_with(b"sleep"))
            })
            .collect()
    };

    // Killed with SIGKILL: its watchdog stops the agent and the agent's child.
    let served = serve_fake_agent(&fake, &mark);
    let server = served.child.id() as i32;
    let running = wait_processes(&mark, "the agent and its child run", |found| {
        agent_processes(found, server).len() == 2
    });
    let agents = agent_processes(&running, server);
    drop(served); // SIGKILL
    wait_processes(&mark, "the agents died with the server", |found| {
        !agents.iter().any(|pid| found.contains(pid))
    });

    // Its watchdog killed first: the next server's start stops them.
    let served = serve_fake_agent(&fake, &mark);
    let server = served.child.id() as i32;
    let running = wait_processes(&mark, "the agent and its child run", |found| {
        agent_processes(found, server).len() == 2
    });
    let agents = agent_processes(&running, server);
    let watchdogs: Vec<i32> = running
        .iter()
        .copied()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmd| {
                let cmd = String::from_utf8_lossy(&cmd).into_owned();
                cmd.contains("__watchdog") && cmd.contains(&format!("\0{server}."))
            })
        })
        .collect();
    assert_eq!(watchdogs.len(), 1, "the server's watchdog: {running:?}");
    unsafe { libc::kill(watchdogs[0], libc::SIGKILL) };
    drop(served); // SIGKILL
                  // Looked at once the server is gone, without waiting: any server that starts on this
                  // machine meanwhile (another test's, running alongside) rightly stops them too.
    assert!(
        agents.iter().all(|pid| processes_with(&mark).contains(pid)),
        "with no watchdog they outlive the server, until the next start"
    );
    let next = serve(&["--store", "memory", "--no-token"]);
    wait_processes(&mark, "the next start stopped them", |found| {
        !agents.iter().any(|pid| found.contains(pid))
    });
    drop(next);
}

#[test]
fn serve_makes_a_random_token_requires_it_and_stops_cleanly_on_sigterm() {
    let served = serve(&["--store", "memory"]);
    let token = served.token.clone().expect("a random token is printed");
    assert_eq!(token.len(), 64);
    assert_eq!(served.call("GET", "/v1/health", None, Some("")).0, 200);
    assert_eq!(
        served.call("GET", "/v1/sessions", None, Some("wrong")).0,
        401
    );
    assert_eq!(served.call("GET", "/v1/sessions", None, None).0, 200);
    // The reference's agent ids are accepted beside ours.
    let (status, modes) = served.call("GET", "/v1/agents/claude/modes", None, None);
    assert_eq!((status, &modes["modes"][0]["id"]), (200, &json!("build")));
    let (_, agents) = served.call("GET", "/v1/agents", None, None);
    let ids: Vec<&str> = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"scripted") && ids.contains(&"claude_code") && ids.contains(&"codex"),
        "{ids:?}"
    );

    assert_eq!(
        served
            .call(
                "POST",
                "/v1/sessions/s",
                Some(json!({"agent": "scripted"})),
                None
            )
            .0,
        200
    );
    // A client following the session: its stream ends when the server stops, not the other way.
    let mut follower = TcpStream::connect(&served.address).unwrap();
    follower
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let token = served.token.clone().unwrap();
    let host = &served.address;
    write!(follower, "GET /v1/sessions/s/events/sse HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    follower.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    let mut served = served;
    unsafe { libc::kill(served.child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = served.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "SIGTERM did not stop the server");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    let mut rest = Vec::new();
    follower
        .read_to_end(&mut rest)
        .expect("the follower's stream ended");
}

#[test]
fn serve_refuses_no_token_on_a_host_other_than_loopback() {
    let output = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args([
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--no-token",
            "--store",
            "memory",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--no-token needs a loopback --host"));
    let output = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args(["serve", "--store", "mysql://localhost/x"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unsupported store"));
}

/// `agent-api serve` with an `https://` webhook, set up by `tls` (a CA file, the environment): its
/// exit code and standard error, once it stopped (it must refuse to start).
fn serve_https_webhook_refused(tls: impl FnOnce(&mut Command)) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-api"));
    command
        .args([
            "serve",
            "--port",
            "0",
            "--store",
            "memory",
            "--webhook",
            "https://127.0.0.1:9/hooks",
        ])
        .env(
            "AGENT_API_WEBHOOK_SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        )
        .stdin(Stdio::null());
    tls(&mut command);
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");
    stderr
}

#[test]
fn serve_refuses_a_webhook_ca_file_it_cannot_use_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("not-a-ca.pem");
    std::fs::write(&not_pem, "no certificate here\n").unwrap();
    let missing = dir.path().join("missing.pem");
    for (ca, says) in [
        (&missing, "cannot read the CA file"),
        (&not_pem, "holds no certificate"),
    ] {
        let stderr = serve_https_webhook_refused(|command| {
            command.arg("--webhook-ca").arg(ca);
        });
        assert!(
            stderr.contains(says) && stderr.contains(&*ca.to_string_lossy()),
            "{stderr}"
        );
    }
    // No `--webhook-ca` on a machine whose system store holds no CA (rustls-native-certs reads
    // only SSL_CERT_FILE when it is set): nothing could ever be delivered, so refused at start.
    let stderr = serve_https_webhook_refused(|command| {
        command
            .env("SSL_CERT_FILE", &not_pem)
            .env_remove("SSL_CERT_DIR");
    });
    assert!(
        stderr.contains("no CA certificate") && stderr.contains("--webhook-ca FILE"),
        "{stderr}"
    );
}

/// The bench's model server and a sandbox of the pinned Claude Code pointed at its `scenario`;
/// `None` when end-to-end tests are skipped (`agent_bench::e2e_enabled_or_explain`).
async fn claude_on(scenario: &str) -> Option<(agent_bench::ModelServer, agent_bench::Sandbox)> {
    agent_bench::e2e_enabled_or_explain(agent_bench::Cli::ClaudeCode)?;
    let model = agent_bench::ModelServer::start(None).await.unwrap();
    let sandbox =
        agent_bench::Sandbox::new(agent_bench::Cli::ClaudeCode, &model, scenario).unwrap();
    Some((model, sandbox))
}

/// `agent-api serve` on the bench's model server with the pinned Claude Code in `sandbox`: only the
/// sandbox's environment, in its directory.
fn serve_claude(sandbox: &agent_bench::Sandbox) -> Served {
    serve_claude_with(sandbox, &["--store", "memory"])
}

/// [`serve_claude`] with `args` (a store among them) instead of the memory store.
fn serve_claude_with(sandbox: &agent_bench::Sandbox, args: &[&str]) -> Served {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-api"));
    command
        .env_clear()
        .envs(sandbox.env.iter().map(|(k, v)| (k, v)))
        .env("AGENT_API_CLAUDE_CODE_BIN", &sandbox.program)
        .current_dir(&sandbox.cwd);
    let mut all = vec!["--no-token", "--timeout", "120"];
    all.extend_from_slice(args);
    serve_with(command, &all)
}

/// Waits until `turns` turns have completed in the session; returns its events.
fn wait_turns(served: &Served, session: &str, turns: usize) -> Vec<Value> {
    wait_turns_as(served, session, turns, None)
}

/// [`wait_turns`] asking with `token` (else the server's own).
fn wait_turns_as(served: &Served, session: &str, turns: usize, token: Option<&str>) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let events = served.events_as(session, token);
        let done = events.iter().filter(|e| {
            e["type"] == "item.completed"
                && e["data"]["item"]["content"][0]["label"] == "turn_completed"
        });
        if done.count() >= turns || events.iter().any(|e| e["type"] == "session.ended") {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "{turns} turns did not complete: {events:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn answers(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| {
            e["type"] == "item.completed"
                && e["data"]["item"]["role"] == "assistant"
                && e["data"]["item"]["kind"] == "message"
        })
        .filter_map(|e| {
            e["data"]["item"]["content"][0]["text"]
                .as_str()
                .map(String::from)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_serve_holds_two_turns_of_the_real_claude_code_in_one_session() {
    let Some((_model, sandbox)) = claude_on("echo").await else {
        return;
    };
    tokio::task::block_in_place(|| {
        let served = serve_claude(&sandbox);
        // The reference's id for Claude Code.
        let (status, created) = served.call(
            "POST",
            "/v1/sessions/real",
            Some(json!({"agent": "claude"})),
            None,
        );
        assert_eq!(
            (status, &created["healthy"]),
            (200, &json!(true)),
            "{created}"
        );
        assert_eq!(
            served
                .call(
                    "POST",
                    "/v1/sessions/real/messages",
                    Some(json!({"message": "first"})),
                    None
                )
                .0,
            204
        );
        wait_turns(&served, "real", 1);
        assert_eq!(
            served
                .call(
                    "POST",
                    "/v1/sessions/real/messages",
                    Some(json!({"message": "second"})),
                    None
                )
                .0,
            204
        );
        let events = wait_turns(&served, "real", 2);
        let said = answers(&events);
        assert!(
            said.iter()
                .any(|a| a.contains("user_turns=1") && a.contains("last=first")),
            "{said:?}"
        );
        assert!(
            said.iter()
                .any(|a| a.contains("user_turns=2") && a.contains("last=second")),
            "the second turn continues the first: {said:?}"
        );
        let sequences: Vec<u64> = events
            .iter()
            .map(|e| e["sequence"].as_u64().unwrap())
            .collect();
        assert_eq!(sequences, (1..=events.len() as u64).collect::<Vec<_>>());
        assert!(
            events
                .iter()
                .any(|e| e["source"] == "agent" && e["raw"].is_object()),
            "include_raw=true fills raw"
        );
        assert_eq!(
            served
                .call("POST", "/v1/sessions/real/terminate", None, None)
                .0,
            204
        );
        let (_, info) = served.call("GET", "/v1/sessions/real", None, None);
        assert_eq!(
            (&info["ended"], &info["agent"]),
            (&json!(true), &json!("claude"))
        );

        // The agent's own store holds the conversation: listed, and read back as events.
        let native = info["nativeSessionId"]
            .as_str()
            .expect("the native session id")
            .to_string();
        let (status, history) = served.call("GET", "/v1/agents/claude/history", None, None);
        assert_eq!(status, 200, "{history}");
        let stored = history["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == native.as_str())
            .cloned();
        assert_eq!(
            stored.as_ref().and_then(|s| s["firstPrompt"].as_str()),
            Some("first"),
            "{history}"
        );
        let (status, page) = served.call(
            "GET",
            &format!("/v1/agents/claude/history/{native}/events?limit=1000"),
            None,
            None,
        );
        assert_eq!(status, 200, "{page}");
        let read = answers(page["events"].as_array().unwrap());
        assert!(read.iter().any(|a| a.contains("user_turns=2")), "{read:?}");
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_serve_answers_the_real_claude_codes_permission_request_over_http() {
    let Some((_model, sandbox)) = claude_on("shell").await else {
        return;
    };
    tokio::task::block_in_place(|| {
        let served = serve_claude(&sandbox);
        assert_eq!(
            served
                .call(
                    "POST",
                    "/v1/sessions/perm",
                    Some(json!({"agent": "claude_code"})),
                    None
                )
                .0,
            200
        );
        assert_eq!(
            served
                .call(
                    "POST",
                    "/v1/sessions/perm/messages",
                    Some(json!({"message": "go"})),
                    None
                )
                .0,
            204
        );
        let deadline = Instant::now() + Duration::from_secs(120);
        let asked = loop {
            let events = served.events("perm");
            if let Some(asked) = events.iter().find(|e| e["type"] == "permission.requested") {
                break asked.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no permission request: {events:#?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(
            asked["data"]["action"]
                .as_str()
                .unwrap()
                .contains("echo hi > out.txt"),
            "{asked}"
        );
        let id = asked["data"]["permission_id"].as_str().unwrap();
        let (status, _) = served.call(
            "POST",
            &format!("/v1/sessions/perm/permissions/{id}/reply"),
            Some(json!({"reply": "once"})),
            None,
        );
        assert_eq!(status, 204);
        let events = wait_turns(&served, "perm", 1);
        assert!(events
            .iter()
            .any(|e| e["type"] == "permission.resolved" && e["data"]["status"] == "approved"));
        assert!(
            answers(&events).iter().any(|a| a.contains("Tool finished")),
            "{:?}",
            answers(&events)
        );
        assert!(
            sandbox.cwd.join("out.txt").exists(),
            "the approved command ran"
        );
        assert_eq!(
            served
                .call("POST", "/v1/sessions/perm/terminate", None, None)
                .0,
            204
        );
        // Terminated: Claude Code and what it started are gone; the server (in the same directory) stays.
        let server_pid = served.child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left: Vec<i32> = agent_bench::process::processes_in(&sandbox.cwd)
                .into_iter()
                .filter(|pid| *pid != server_pid)
                .collect();
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "processes left after terminate: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    });
}

/// `agent-api token create` on `store`: the token, from the last line it prints.
fn create_token(store: &str, tenant: &str, scope: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args([
            "token", "create", "--store", store, "--tenant", tenant, "--scope", scope,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.lines().last().unwrap().to_string()
}

/// The files beneath `dir` (none when it does not exist).
fn files_beneath(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut left = vec![dir.to_path_buf()];
    while let Some(dir) = left.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => left.push(entry.path()),
                Ok(_) => found.push(entry.path()),
                Err(_) => {}
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn e2e_serve_runs_a_tenants_real_claude_code_beneath_its_root_with_its_own_home() {
    let Some((_model, sandbox)) = claude_on("shell").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (a_root, a_home) = (dir.path().join("a/work"), dir.path().join("a/home"));
    let (b_root, b_home) = (dir.path().join("b/work"), dir.path().join("b/home"));
    for root in [&a_root.join("sub"), &b_root] {
        std::fs::create_dir_all(root).unwrap();
    }
    let store = format!("sqlite:{}", dir.path().join("server.sqlite3").display());
    let a_token = create_token(&store, "a", "operate");
    let flag = |name: &str, dir: &std::path::Path| format!("{name}={}", dir.display());
    let tenants = [
        ("--tenant-root", flag("a", &a_root)),
        ("--tenant-home", flag("a", &a_home)),
        ("--tenant-root", flag("b", &b_root)),
        ("--tenant-home", flag("b", &b_home)),
    ];
    tokio::task::block_in_place(|| {
        let mut args = vec!["--store", &store, "--approve", "all"];
        for (name, value) in &tenants {
            args.extend([*name, value.as_str()]);
        }
        let served = serve_claude_with(&sandbox, &args);
        let a = Some(a_token.as_str());
        let (status, created) = served.call(
            "POST",
            "/v1/sessions/tenant-a",
            Some(json!({"agent": "claude", "cwd": "sub"})),
            a,
        );
        assert_eq!(status, 200, "{created}");
        let (status, _) = served.call(
            "POST",
            "/v1/sessions/tenant-a/messages",
            Some(json!({"message": "run the command"})),
            a,
        );
        assert_eq!(status, 204);
        let events = wait_turns_as(&served, "tenant-a", 1, a);
        assert!(
            answers(&events)
                .iter()
                .any(|a| a.contains("Tool finished") && a.contains("hi")),
            "{events:#?}"
        );

        // The command ran in the tenant's directory beneath its root, nowhere else.
        assert_eq!(
            std::fs::read_to_string(a_root.join("sub/out.txt")).unwrap(),
            "hi\n"
        );
        assert!(!sandbox.cwd.join("out.txt").exists());
        assert!(!a_root.join("out.txt").exists());

        // Claude Code kept its session in the tenant's home ($HOME/.claude/projects/…/ID.jsonl),
        // not in the server's HOME, and the other tenant's home was never made.
        let (_, info) = served.call("GET", "/v1/sessions/tenant-a", None, a);
        let native = info["nativeSessionId"]
            .as_str()
            .expect("the native session id")
            .to_string();
        let transcript = format!("{native}.jsonl");
        let in_home = |home: &std::path::Path| {
            files_beneath(&home.join(".claude/projects"))
                .iter()
                .any(|f| f.file_name().is_some_and(|n| n == transcript.as_str()))
        };
        assert!(in_home(&a_home), "{:?}", files_beneath(&a_home));
        assert!(
            !in_home(&sandbox.home),
            "{:?}",
            files_beneath(&sandbox.home)
        );
        assert!(!b_home.exists());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&a_home).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(
            served
                .call("POST", "/v1/sessions/tenant-a/terminate", None, a)
                .0,
            204
        );
    });
}

/// How long one step of a real agent may take in the fleet test (its process starting on a loaded
/// machine, a session brought back on another server, included).
const AGENT_STEP: Duration = Duration::from_secs(180);

/// One of `up`, picked at random (no sticky routing, as a load balancer does).
fn any_of(up: &[&Served]) -> usize {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    nanos as usize % up.len()
}

/// `method path` sent to a random server of `up`, again while the answer is 503 (the session's
/// owner is gone and its lease still runs) or none comes, within [`AGENT_STEP`].
fn call_any(up: &[&Served], method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let deadline = Instant::now() + AGENT_STEP;
    loop {
        let answer = up[any_of(up)].try_call(method, path, body.clone(), None, AGENT_STEP);
        match answer {
            Ok((status, body)) if status != 503 => return (status, body),
            other => assert!(
                Instant::now() < deadline,
                "{path}: no server took it: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The session's events (as a client reads them: no native payloads) from a random server of
/// `up`, once `done` holds of them (within [`AGENT_STEP`]).
fn events_when(
    up: &[&Served],
    id: &str,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + AGENT_STEP;
    loop {
        let path = format!("/v1/sessions/{id}/events?limit=1000");
        let (status, page) = call_any(up, "GET", &path, None);
        assert_eq!(status, 200, "{page}");
        let events = page["events"].as_array().unwrap().clone();
        if done(&events) {
            return events;
        }
        assert!(Instant::now() < deadline, "{id}: no {what}: {events:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn turns_ended(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| {
            e["type"] == "item.completed"
                && matches!(
                    e["data"]["item"]["content"][0]["label"].as_str(),
                    Some("turn_completed" | "turn_failed")
                )
        })
        .count()
}

/// The frames (id, data) an SSE stream of `served` at `path` delivers, gathered by a thread of
/// its own until the stream closes. HTTP/1.0, so that the body is the bare stream (no chunks).
fn follow_sse(served: &Served, path: &str) -> std::sync::Arc<std::sync::Mutex<Vec<(u64, Value)>>> {
    let frames = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut stream = TcpStream::connect(&served.address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
        served.address
    )
    .unwrap();
    let mut lines = BufReader::new(stream).lines();
    let status = lines.next().unwrap().unwrap();
    assert!(status.contains(" 200 "), "{status}");
    let gathered = frames.clone();
    std::thread::spawn(move || {
        let (mut id, mut data) = (None, String::new());
        let mut body = false;
        for line in lines.map_while(Result::ok) {
            if !body {
                body = line.is_empty();
                continue;
            }
            if let Some(value) = line.strip_prefix("id:") {
                id = value.trim().parse().ok();
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push_str(value.trim_start());
            } else if line.is_empty() {
                if let (Some(id), Ok(value)) = (id.take(), serde_json::from_str(&data)) {
                    gathered.lock().unwrap().push((id, value));
                }
                data.clear();
            }
        }
    });
    frames
}

/// The agent processes on the machine whose HOME is `home`: its processes but the servers and
/// their watchdogs (`agent-api`, what stops a killed server's agents).
fn agents_on(home: &std::path::Path) -> Vec<i32> {
    let home = home.to_string_lossy();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| agent_bench::process::process_env(*pid, "HOME").as_deref() == Some(&*home))
        .filter(|pid| agent_bench::process::process_alive(*pid))
        .filter(|pid| {
            // "… (deleted)" once a build replaced the binary.
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
            !exe.to_string_lossy()
                .starts_with(env!("CARGO_BIN_EXE_agent-api"))
        })
        .collect()
}

/// Waits until no agent runs on the machine whose HOME is `home`.
fn no_agent_on(home: &std::path::Path, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = agents_on(home);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "{why}: {left:?} still run");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The servers of `servers` still up.
fn up(servers: &[Option<Served>]) -> Vec<&Served> {
    servers.iter().flatten().collect()
}

/// Issue 48's done-when on the real binary and a real CLI: three `agent-api serve` processes on
/// one PostgreSQL, each on a machine of its own (a bench sandbox: its own HOME and directory)
/// running the pinned Claude Code on the bench model server's `ask_echo` scenario (a shell call
/// it asks permission for, then how many user turns it saw), every request sent to a random
/// server. The session is followed over SSE through a server that does not run it, and its
/// permission answered through the third; its owner is killed with SIGKILL (its watchdog stops
/// its Claude Code), and the next message, to either other server, brings the session back
/// natively there: the model saw two user turns, the follower got every event as stored, and
/// once the session is terminated no Claude Code runs on any machine.
#[tokio::test(flavor = "multi_thread")]
async fn e2e_three_serve_processes_carry_a_real_claude_code_session_past_a_killed_owner() {
    let Some((shared, tag)) = postgres("a fleet of serve processes running Claude Code") else {
        return;
    };
    let Some((model, _unused)) =
        agent_bench::e2e_bench_or_explain(agent_bench::Cli::ClaudeCode, "ask_echo").await
    else {
        return;
    };
    tokio::task::block_in_place(|| {
        let database = OwnDatabase::new(&shared, &tag);
        let url = database.url.clone();
        let machines: Vec<agent_bench::Sandbox> = (0..3)
            .map(|_| {
                agent_bench::Sandbox::new(agent_bench::Cli::ClaudeCode, &model, "ask_echo").unwrap()
            })
            .collect();
        let names: Vec<String> = (0..3).map(|i| format!("machine{i}-{tag}")).collect();
        let mut servers: Vec<Option<Served>> = (0..3)
            .map(|i| {
                let args = [
                    "--store",
                    url.as_str(),
                    "--server-lease",
                    "2",
                    "--daemon-id",
                    names[i].as_str(),
                ];
                Some(serve_claude_with(&machines[i], &args))
            })
            .collect();

        let id = format!("ada-{tag}");
        let session = format!("/v1/sessions/{id}");
        let create = json!({"agent": "claude_code", "permissionMode": "ask"});
        let (status, body) = call_any(&up(&servers), "POST", &session, Some(create));
        assert_eq!(status, 200, "{body}");
        let owner_of = |servers: &[Option<Served>]| -> usize {
            let (_, info) = call_any(&up(servers), "GET", &session, None);
            let owner = info["owner"].as_str().unwrap_or_default().to_string();
            names
                .iter()
                .position(|name| owner.starts_with(name.as_str()))
                .unwrap_or_else(|| panic!("owned by none of the servers: {info}"))
        };
        let owner = owner_of(&servers);
        let (follower, replier) = ((owner + 1) % 3, (owner + 2) % 3);
        let followed = follow_sse(
            servers[follower].as_ref().unwrap(),
            &format!("{session}/events/sse"),
        );

        let message = |servers: &[Option<Served>], text: &str| {
            let (status, body) = call_any(
                &up(servers),
                "POST",
                &format!("{session}/messages"),
                Some(json!({ "message": text })),
            );
            assert_eq!(status, 204, "{body}");
        };
        message(&servers, "My name is Ada.");
        let asked = events_when(&up(&servers), &id, "permission request", |events| {
            events.iter().any(|e| e["type"] == "permission.requested")
        });
        let permission = asked
            .iter()
            .filter(|e| e["type"] == "permission.requested")
            .find_map(|e| e["data"]["permission_id"].as_str())
            .expect("the request names its id");
        let (status, body) = servers[replier].as_ref().unwrap().call(
            "POST",
            &format!("{session}/permissions/{permission}/reply"),
            Some(json!({"reply": "once"})),
            None,
        );
        assert_eq!(
            status, 204,
            "a reply through a server that does not run it: {body}"
        );
        let served = events_when(&up(&servers), &id, "first turn's end", |e| {
            turns_ended(e) >= 1
        });
        assert!(
            served
                .iter()
                .any(|e| e["type"] == "permission.resolved" && e["data"]["status"] == "approved"),
            "{served:#?}"
        );
        assert!(
            answers(&served).iter().any(|a| a.contains("user_turns=1")),
            "{:?}",
            answers(&served)
        );
        // Its snapshot is in the store before the owner dies: the takeover resumes natively.
        let deadline = Instant::now() + AGENT_STEP;
        while call_any(&up(&servers), "GET", &session, None).1["snapshotTurn"].as_u64() < Some(1) {
            assert!(
                Instant::now() < deadline,
                "no snapshot after the first turn"
            );
            std::thread::sleep(Duration::from_millis(100));
        }

        // SIGKILL: its watchdog stops its Claude Code; the next message, to any server left,
        // brings the session back there.
        drop(servers[owner].take());
        no_agent_on(&machines[owner].home, "the killed server's agents");
        message(&servers, "What is my name?");
        let events = events_when(&up(&servers), &id, "second turn's end", |e| {
            turns_ended(e) >= 2
        });
        assert_eq!(events[..served.len()], served[..], "nothing served changed");
        let seams: Vec<&str> = events
            .iter()
            .filter(|e| {
                e["type"] == "item.completed"
                    && e["data"]["item"]["content"][0]["label"] == "session_resumed"
            })
            .filter_map(|e| e["data"]["item"]["content"][0]["detail"].as_str())
            .collect();
        assert!(
            seams.len() == 1
                && seams[0].contains("how=native")
                && seams[0].contains("after=server_died"),
            "{seams:?}"
        );
        assert!(
            answers(&events).iter().any(|a| a.contains("user_turns=2")),
            "the model saw both user turns: {:?}",
            answers(&events)
        );
        let sequences: Vec<u64> = events
            .iter()
            .map(|e| e["sequence"].as_u64().unwrap())
            .collect();
        assert_eq!(sequences, (1..=events.len() as u64).collect::<Vec<_>>());
        // The follower, on a server that ran none of it, got every event, as stored.
        let deadline = Instant::now() + AGENT_STEP;
        while followed.lock().unwrap().len() < events.len() {
            assert!(
                Instant::now() < deadline,
                "the follower got {} of {} events",
                followed.lock().unwrap().len(),
                events.len()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        for (i, (sequence, data)) in followed
            .lock()
            .unwrap()
            .iter()
            .take(events.len())
            .enumerate()
        {
            assert_eq!(*sequence, i as u64 + 1);
            assert_eq!(data, &events[i], "as stored");
        }

        let (status, body) = call_any(&up(&servers), "POST", &format!("{session}/terminate"), None);
        assert_eq!(status, 204, "{body}");
        for machine in &machines {
            no_agent_on(&machine.home, "an agent outlived its session");
        }
        drop(servers);
        drop(database);
    });
}
