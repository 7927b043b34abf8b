//! `agent-api serve` keeps its token and its store's URL from its agents and from other local
//! users (issue 46): both come from a file or the environment, never need the command line, are
//! gone from the environment its agents inherit and hidden from a `--via bwrap` sandbox; a fake
//! agent in that sandbox tries every way the red team used to act on its own server, and fails;
//! `--no-token` is refused when agents run under a launcher; `--open` puts no token on
//! `xdg-open`'s command line; a CORS origin that is not one origin is refused at start.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A running `agent-api serve`, killed when dropped.
struct Served {
    child: Child,
    address: String,
    token: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `agent-api serve` (port 0) from `command`; returns once it says where it listens.
fn serve(mut command: Command, args: &[&str], token: &str) -> Served {
    let child = command
        .arg("serve")
        .args(["--port", "0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut served = Served {
        child,
        address: String::new(),
        token: token.into(),
    };
    let mut lines = BufReader::new(served.child.stderr.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let line = lines
            .next()
            .expect("the server says where it listens")
            .unwrap();
        if let Some(address) = line.strip_prefix("agent-api: listening on http://") {
            served.address = address.to_string();
            std::thread::spawn(move || for _ in lines.by_ref() {});
            return served;
        }
    }
    panic!("the server did not say where it listens");
}

impl Served {
    /// One request with `token` (none: no header); the status and the JSON body.
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let host = &self.address;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{auth}\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    fn authorized(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call(method, path, body, Some(&self.token.clone()))
    }
}

/// A fake Claude Code: `script` runs as the agent (it answers `--version` like the real one).
fn fake_agent(dir: &Path, script: &str) -> PathBuf {
    let path = dir.join("claude");
    std::fs::write(
        &path,
        format!("#!/bin/bash\nif [ \"$1\" = \"--version\" ]; then echo '2.0.0 (Claude Code)'; exit 0; fi\n{script}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Waits for the file `path` to end with `done`; returns it.
fn report(path: &Path) -> String {
    // Generous: the agent asks every listening port of the machine, two seconds each that
    // accepts and says nothing (a database), and a loaded CI machine has many.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.trim_end().ends_with("== done") {
                return text;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the fake agent wrote no whole report at {}: {:?}",
            path.display(),
            std::fs::read_to_string(path)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `agent-api serve ARGS` (port 0) for at most 10 s: its exit code (`None`: it was still
/// serving, and was killed) and its stderr.
fn start_briefly(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-api"))
        .args(["serve", "--port", "0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
    (code, stderr)
}

/// Whether `text` holds `secret` as it is, or as `/proc`'s NUL-separated forms turned readable.
fn leaks(text: &str, secret: &str) -> bool {
    text.contains(secret)
}

#[test]
fn serve_takes_its_secrets_from_the_environment_or_a_file_and_its_agents_never_see_them() {
    let dir = tempfile::tempdir().unwrap();
    let token = "tok-from-the-environment-5f1c";
    let agent = fake_agent(
        dir.path(),
        "{ echo \"== argv: $*\"; echo '== env'; env; echo '== done'; } > \"$PWD/agent-env.txt\"",
    );
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-api"));
    command
        .env("AGENT_API_TOKEN", token)
        .env("AGENT_API_STORE", "memory")
        .env("AGENT_API_CLAUDE_CODE_BIN", &agent)
        .current_dir(dir.path());
    let served = serve(command, &[], token);

    // Not on the server's command line, which every local user reads.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", served.child.id())).unwrap();
    assert!(!leaks(&String::from_utf8_lossy(&cmdline), token));
    assert_eq!(served.call("GET", "/v1/sessions", None, None).0, 401);
    assert_eq!(served.authorized("GET", "/v1/sessions", None).0, 200);

    // An agent run here (Local: it inherits the server's environment) gets neither variable.
    let (status, body) = served.authorized(
        "POST",
        "/v1/sessions/s",
        Some(json!({"agent": "claude_code"})),
    );
    assert_eq!(status, 200, "{body}");
    let _ = served.authorized(
        "POST",
        "/v1/sessions/s/messages",
        Some(json!({"message": "hi"})),
    );
    let seen = report(&dir.path().join("agent-env.txt"));
    assert!(!leaks(&seen, token), "the agent saw the token: {seen}");
    assert!(
        !seen.contains("AGENT_API_TOKEN") && !seen.contains("AGENT_API_STORE"),
        "{seen}"
    );
    drop(served);

    // From a file: the same, and a token on the command line is only warned about.
    let file = dir.path().join("token");
    std::fs::write(&file, "tok-from-a-file-77a2\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-api"));
    command.current_dir(dir.path());
    let served = serve(
        command,
        &["--store", "memory", "--token-file", file.to_str().unwrap()],
        "tok-from-a-file-77a2",
    );
    assert_eq!(served.authorized("GET", "/v1/sessions", None).0, 200);
    assert_eq!(
        served.call("GET", "/v1/sessions", None, Some("wrong")).0,
        401
    );
}

#[test]
fn a_fake_agent_under_bwrap_cannot_act_on_its_own_server_in_any_way_the_red_team_used() {
    if Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "true"])
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        panic!(
            "bubblewrap cannot run here: tests/launchers/setup.sh installs it (this test needs it)"
        );
    }
    // Outside /tmp, which the sandbox replaces anyway: the files must be hidden on purpose.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let token = "tok-the-agent-must-not-find-93e0";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let store = dir.path().join("store.sqlite3");

    // With no token, no launcher may run agents: a sandboxed one shares the network.
    let (code, stderr) = start_briefly(&["--store", "memory", "--no-token", "--via", "bwrap"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--no-token with --via"), "{stderr}");

    // The attack, as the red team ran it: find the server in /proc/net/tcp, look for the token
    // in its own environment, every process's command line and environment, the token file and
    // the store; then call the API without a token, with a forged Host and Origin, and with
    // whatever it found: list sessions, create one running its own program, answer permissions.
    let script = format!(
        r#"out="$PWD/attack.txt"
{{
echo "== env"; env
echo "== cmdlines"; for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f" 2>/dev/null; echo; done
echo "== environs"; for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null; done
echo "== token file"; cat '{token_file}' 2>&1
echo "== store bytes: $(cat '{store}' 2>/dev/null | wc -c)"
found=$(grep -hoE 'tok-[a-z0-9-]+' /proc/[0-9]*/cmdline /proc/[0-9]*/environ '{token_file}' 2>/dev/null | head -1)
echo "== found token: [$found]"
for hex in $(awk 'NR > 1 && $4 == "0A" {{ split($2, a, ":"); print a[2] }}' /proc/net/tcp | sort -u); do
  port=$((16#$hex))
  # Each probe in a process of its own, bounded as a whole: a listener that never accepts (its
  # backlog full, as some other test's can be on a busy machine) would hold a bare connect for
  # minutes, and the report would never end.
  ask() {{
    line=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit; printf "$1" >&3; IFS= read -r -t 2 l <&3; printf "%s" "$l"' "$port" "$1")
    echo "port $port $2: $line"
  }}
  ask "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:$port\r\nConnection: close\r\n\r\n" health
  # Only an agent-api server answers its health check: the others are left alone.
  case "$line" in "HTTP/1.1 200"*) ;; *) continue ;; esac
  body='{{"agent":"acp","options":{{"backend.acp.command":["sh","-c","touch /proc/pwned"]}}}}'
  for auth in "" "Authorization: Bearer $found\r\n"; do
    ask "GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1:$port\r\n${{auth}}Connection: close\r\n\r\n" "list[$auth]"
    ask "POST /v1/sessions/pwn HTTP/1.1\r\nHost: 127.0.0.1:$port\r\n${{auth}}Content-Type: application/json\r\nContent-Length: ${{#body}}\r\nConnection: close\r\n\r\n$body" "create[$auth]"
    ask "POST /v1/sessions/s/permissions/p1/reply HTTP/1.1\r\nHost: evil.example\r\nOrigin: http://evil.example\r\n${{auth}}Content-Type: application/json\r\nContent-Length: 16\r\nConnection: close\r\n\r\n{{\"reply\":\"once\"}}" "approve[$auth]"
  done
done
echo "== done"
}} > "$out" 2>&1"#,
        token_file = token_file.display(),
        store = store.display(),
    );
    let agent = fake_agent(dir.path(), &script);
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-api"));
    command
        .env("AGENT_API_CLAUDE_CODE_BIN", &agent)
        .current_dir(&work);
    let store_arg = format!("sqlite:{}", store.display());
    let served = serve(
        command,
        &[
            "--token-file",
            token_file.to_str().unwrap(),
            "--store",
            &store_arg,
            "--via",
            "bwrap",
            "--cwd",
            work.to_str().unwrap(),
        ],
        token,
    );
    let port = served.address.rsplit_once(':').unwrap().1.to_string();
    let (status, body) = served.authorized(
        "POST",
        "/v1/sessions/s",
        Some(json!({"agent": "claude_code"})),
    );
    assert_eq!(status, 200, "{body}");
    let _ = served.authorized(
        "POST",
        "/v1/sessions/s/messages",
        Some(json!({"message": "hi"})),
    );
    let attack = report(&work.join("attack.txt"));

    assert!(
        !leaks(&attack, token),
        "the agent found the token:\n{attack}"
    );
    assert!(attack.contains("== found token: []"), "{attack}");
    assert!(
        attack.contains("== store bytes: 0"),
        "the store is hidden:\n{attack}"
    );
    // It did find its server, and every call it made was refused.
    let calls: Vec<&str> = attack
        .lines()
        .filter(|l| l.starts_with(&format!("port {port} ")))
        .collect();
    assert!(
        calls.iter().any(|l| l.contains("health: HTTP/1.1 200")),
        "the agent found its server's port in /proc/net/tcp:\n{attack}"
    );
    let acts: Vec<&&str> = calls.iter().filter(|l| !l.contains(" health: ")).collect();
    assert_eq!(acts.len(), 6, "{attack}");
    for act in acts {
        assert!(
            act.trim_end().ends_with("HTTP/1.1 401 Unauthorized")
                || act.trim_end().ends_with("HTTP/1.1 403 Forbidden"),
            "{act}\n{attack}"
        );
    }
    assert_eq!(served.authorized("GET", "/v1/sessions/pwn", None).0, 404);
}

#[test]
fn open_gives_xdg_open_a_private_page_and_never_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let seen = dir.path().join("xdg-open-argv");
    let fake = bin.join("xdg-open");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{0}.tmp'\ncat \"$1\" > '{0}.page' 2>/dev/null\nstat -c '%a' \"$1\" > '{0}.mode'\nstat -c '%a' \"$(dirname \"$1\")\" > '{0}.dirmode'\nmv '{0}.tmp' '{0}'\n",
            seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-api"));
    command
        .env("PATH", path)
        .env("DISPLAY", ":99")
        .env("AGENT_API_TOKEN", "tok-opened-4b8d");
    let _served = serve(command, &["--store", "memory", "--open"], "tok-opened-4b8d");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.exists() {
        assert!(Instant::now() < deadline, "xdg-open was not run");
        std::thread::sleep(Duration::from_millis(50));
    }
    let argv = std::fs::read_to_string(&seen).unwrap();
    assert!(
        !argv.contains("tok-opened-4b8d"),
        "the token is on xdg-open's command line: {argv}"
    );
    let page = std::fs::read_to_string(format!("{}.page", seen.display())).unwrap();
    assert!(page.contains("/ui/#token=tok-opened-4b8d"), "{page}");
    let mode =
        |suffix: &str| std::fs::read_to_string(format!("{}.{suffix}", seen.display())).unwrap();
    assert_eq!(mode("mode").trim(), "600");
    assert_eq!(mode("dirmode").trim(), "700");
}

#[test]
fn serve_refuses_a_cors_origin_that_is_not_one_origin_with_a_clear_error() {
    for origin in ["*", "null", "example.com", "https://app.example/path"] {
        let (code, stderr) = start_briefly(&["--store", "memory", "--cors-origin", origin]);
        assert_eq!(code, Some(2), "{origin}: {stderr}");
        assert!(stderr.contains("CORS origin"), "{origin}: {stderr}");
    }
}
