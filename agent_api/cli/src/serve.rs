//! `agent-api serve`: the universal session API over HTTP and SSE (`agent_api_server`), with the
//! agents this tool knows and `run`'s request flags as every session's defaults.
//!
//! Secure by default: a token is required unless the host is loopback and `--no-token` is
//! given; without `--token` a random one is made and printed. SIGINT, SIGTERM and SIGHUP stop the
//! server: its sessions' agents are stopped and the sessions stay resumable (the next message, to
//! this server started again or to another on the same store, brings them back). Killed with
//! SIGKILL, its agents are stopped by its watchdog (`agent-api __watchdog`, a process of its own
//! that sees the server's pipe close), else at the next server's start.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

use agent_api_server::{ServerConfig, StoreUrl};
use clap::Args;

use crate::run::RunOptions;
use crate::{Format, View};

/// What `serve` takes.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The port to listen on (0: any free port, printed).
    #[arg(long, default_value_t = 2468)]
    port: u16,
    /// The bearer token clients send (`Authorization: Bearer T`); default: a random one, printed.
    #[arg(long, value_name = "T", conflicts_with = "no_token")]
    token: Option<String>,
    /// Take requests without a token (only on a loopback host).
    #[arg(long)]
    no_token: bool,
    /// Where sessions are kept: sqlite:PATH (default: agent-api/server.sqlite3 in the user's data
    /// directory), postgres://USER@HOST:PORT/DB (shared by several servers) or memory (nothing
    /// survives the server).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// This server's name in a store shared with others (PostgreSQL); its identity adds what
    /// no other process shares (its pid and a random part). Default: the host's name.
    #[arg(long, value_name = "NAME")]
    daemon_id: Option<String>,
    /// Stop an idle session's agent after this many seconds with no turn and no subscriber (its
    /// snapshot kept; the next message resumes it); 0: never.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    idle_release: u64,
    /// End a session after this many seconds with no turn; default: a session ends only when a
    /// client terminates it.
    #[arg(long, value_name = "SECS")]
    session_idle_ttl: Option<u64>,
    /// In a store shared with other servers (PostgreSQL): how long this one counts as running
    /// after its last heartbeat (renewed every third of it); past it, its sessions may be brought
    /// back by another.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    server_lease: u64,
    /// A browser origin allowed by CORS (repeatable); default: no CORS.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// The largest request body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    max_body: usize,
    /// Print the inspector's address with the token (in the fragment: never sent to a server or
    /// a log) and, on a desktop, open it in the browser.
    #[arg(long)]
    open: bool,
    /// The request flags (`run`'s), as every session's defaults; `--approve ask` (the default)
    /// leaves each permission request to the client's reply over HTTP.
    #[command(flatten)]
    request: crate::RequestFlags,
    #[command(flatten)]
    limits: crate::fleet::RunLimits,
}

fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Runs the server until a signal.
pub(crate) async fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    let token = match (&args.token, args.no_token) {
        (Some(token), _) if token.trim().is_empty() => return Err("--token is empty".into()),
        (Some(token), _) => Some(token.clone()),
        (None, true) if is_loopback(&args.host) => None,
        (None, true) => {
            return Err(format!(
                "--no-token needs a loopback --host, not {}",
                agent_api::display::line(&args.host, 128)
            ))
        }
        (None, false) => {
            let token = ServerConfig::random_token()
                .map_err(|e| format!("cannot make a random token: {e}"))?;
            eprintln!("agent-api: token: {token}");
            Some(token)
        }
    };
    let store = match &args.store {
        Some(url) => StoreUrl::parse(url).map_err(|e| e.to_string())?,
        None => StoreUrl::default_sqlite()
            .ok_or("no user data directory for the store: pass --store sqlite:PATH")?,
    };
    let mut config = ServerConfig::default().with_max_body_bytes(args.max_body);
    let token_for_page = token.clone();
    config.token = token;
    config.cors_origins = args.cors_origins.clone();
    if let Some(id) = &args.daemon_id {
        config = config.with_daemon_id(id);
    }
    config = config
        .with_idle_release(
            Some(std::time::Duration::from_secs(args.idle_release)).filter(|d| !d.is_zero()),
        )
        .with_session_idle_ttl(args.session_idle_ttl.map(std::time::Duration::from_secs))
        .with_server_lease(std::time::Duration::from_secs(args.server_lease.max(1)));
    let options = RunOptions {
        agent: None,
        format: Format::Jsonl,
        view: View::Universal,
        include_raw: true,
        cwd: args.request.cwd.clone(),
        model: args.request.model.clone(),
        approve: args.request.approve,
        timeout: args.request.timeout,
        acp_command: None,
        via: args.request.via.clone(),
        options: Vec::new(),
        variant: None,
        mode: None,
        fleet: crate::fleet::FleetFlags::with_limits(args.limits.clone()),
        prompt: String::new().into(),
        answers: false,
        // A session waits for its client: no default start-up or idle timeout.
        one_shot: false,
        portable: Default::default(),
    };
    let defaults = crate::run::base_request(&options);
    let opened = store.open().await.map_err(|e| e.to_string())?;
    // Held until this process ends, however it ends: then the watchdog stops its agents.
    let _watchdog = start_watchdog();
    let server = agent_api_server::Server::new(crate::agents::gateway(), defaults, opened, config)
        .await
        .map_err(|e| e.to_string())?
        .with_probes(agent_api_builtin::probes().to_vec());
    let host: IpAddr = match args.host.as_str() {
        "localhost" => IpAddr::from([127, 0, 0, 1]),
        host => host.parse().map_err(|_| {
            format!(
                "--host {}: not an IP address",
                agent_api::display::line(host, 128)
            )
        })?,
    };
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(host, args.port))
        .await
        .map_err(|e| format!("cannot listen on {host}:{}: {e}", args.port))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("agent-api: store: {store}");
    eprintln!("agent-api: listening on http://{address}");
    let page = inspector_url(address, token_for_page.as_deref(), args.open);
    eprintln!("agent-api: inspector: {page}");
    if args.open {
        open_in_browser(&page);
    }
    let stop =
        crate::signals::Stop::listen().map_err(|e| format!("cannot listen for signals: {e}"))?;
    let shutdown = async move { stop.cancel.cancelled().await };
    agent_api_server::serve(listener, server, shutdown)
        .await
        .map_err(|e| format!("the server failed: {e}"))?;
    eprintln!("agent-api: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Starts `agent-api __watchdog` in a process group of its own, its stdin a pipe this process
/// holds: killed with SIGKILL, this process leaves agents it cannot stop itself, and the
/// watchdog, seeing its stdin close, stops them. `None` (said) when it cannot start: the next
/// server's start stops them instead.
fn start_watchdog() -> Option<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().ok()?;
    let started = std::process::Command::new(exe)
        .arg("__watchdog")
        .arg(agent_api::kit::process::owner_token())
        .env_remove(agent_api::kit::process::OWNER_VAR)
        // Out of the agents' working directory: nothing of the server's is found there.
        .current_dir("/")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .process_group(0)
        .spawn();
    match started {
        Ok(child) => Some(child),
        Err(error) => {
            eprintln!("agent-api: cannot start the watchdog ({error}): agents of a killed server are stopped at the next start");
            None
        }
    }
}

/// `agent-api __watchdog OWNER`: waits for stdin to close, then for `owner` to be gone, then
/// stops every agent it left.
pub(crate) fn watchdog(owner: &str) -> ExitCode {
    use std::io::Read;
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    // The pipe closes as the process exits: wait (a little) until it is gone, then stop what it
    // left, and look once more for a child forked meanwhile.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while agent_api::kit::process::owner_alive(owner) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut stopped = agent_api::kit::process::stop_orphans_of(owner);
    std::thread::sleep(std::time::Duration::from_millis(200));
    stopped += agent_api::kit::process::stop_orphans_of(owner);
    if stopped > 0 {
        eprintln!("agent-api: the server is gone; stopped {stopped} agent processes it left");
    }
    ExitCode::SUCCESS
}

/// The inspector's address for a person on this machine (a wildcard host reached on loopback);
/// with `with_token`, the token rides in the fragment (`#token=…`), which a browser never sends.
fn inspector_url(address: SocketAddr, token: Option<&str>, with_token: bool) -> String {
    let host = match address.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => IpAddr::from([127, 0, 0, 1]),
        ip if ip.is_unspecified() => IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let base = format!("http://{}/ui/", SocketAddr::new(host, address.port()));
    match token {
        Some(token) if with_token => format!("{base}#token={}", fragment_escaped(token)),
        _ => base,
    }
}

/// `token` safe in a URL fragment read by `URLSearchParams`: unreserved characters as they are,
/// every other byte percent-encoded.
fn fragment_escaped(token: &str) -> String {
    token
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// Opens `url` with `xdg-open` when a display is there (argv, no shell); a failure is said, not fatal.
fn open_in_browser(url: &str) {
    if std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none() {
        eprintln!("agent-api: no display: open the address above in a browser");
        return;
    }
    let opened = std::process::Command::new("xdg-open")
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match opened {
        // Reaped on a thread of its own: xdg-open returns once the browser has the page.
        Ok(mut child) => drop(std::thread::spawn(move || child.wait())),
        Err(error) => eprintln!(
            "agent-api: cannot run xdg-open ({error}): open the address above in a browser"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inspector_url_carries_the_token_in_its_fragment_only_when_asked() {
        let address: SocketAddr = "0.0.0.0:2468".parse().unwrap();
        assert_eq!(
            inspector_url(address, Some("t0k"), false),
            "http://127.0.0.1:2468/ui/"
        );
        assert_eq!(
            inspector_url(address, Some("a b&c#"), true),
            "http://127.0.0.1:2468/ui/#token=a%20b%26c%23"
        );
        assert_eq!(
            inspector_url("[::1]:9".parse().unwrap(), None, true),
            "http://[::1]:9/ui/"
        );
    }
}
