//! `agent-api serve`: the universal session API over HTTP and SSE (`agent_api_server`), with the
//! agents this tool knows and `run`'s request flags as every session's defaults.
//!
//! Secure by default: a token is required unless the host is loopback, the agents run here
//! unsandboxed (no `--via`), and `--no-token` is given; without one a random token is made and
//! printed. The token and the store's URL (a PostgreSQL password) come from a file or the
//! environment (`AGENT_API_TOKEN`, `AGENT_API_STORE`), never need the command line (which every
//! local user reads in `/proc`), are taken out of this process's environment before any agent
//! starts, and are hidden from a `--via bwrap` sandbox. SIGINT, SIGTERM and SIGHUP stop the
//! server: its sessions' agents are stopped and the sessions stay resumable (the next message, to
//! this server started again or to another on the same store, brings them back). Killed with
//! SIGKILL, its agents are stopped by its watchdog (`agent-api __watchdog`, a process of its own
//! that sees the server's pipe close), else at the next server's start.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
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
    /// The bearer token clients send (`Authorization: Bearer T`). Every local user reads it in
    /// /proc/PID/cmdline: prefer --token-file or AGENT_API_TOKEN. Default: AGENT_API_TOKEN, else
    /// a random one, printed.
    #[arg(long, value_name = "T", conflicts_with_all = ["no_token", "token_file"])]
    token: Option<String>,
    /// Read the bearer token from this file (its first line).
    #[arg(long, value_name = "PATH", conflicts_with = "no_token")]
    token_file: Option<PathBuf>,
    /// Take requests without a token: only on a loopback host and with agents run here (no
    /// --via), where every local process of yours is trusted as you are.
    #[arg(long)]
    no_token: bool,
    /// Where sessions are kept: sqlite:PATH (default: agent-api/server.sqlite3 in the user's data
    /// directory), postgres://USER@HOST:PORT/DB (shared by several servers; TLS with a verified
    /// certificate when the server offers it, `?sslmode=verify-full&sslrootcert=CA.pem` to insist)
    /// or memory (nothing survives the server). A URL with a password is better in AGENT_API_STORE or --store-file.
    #[arg(long, value_name = "URL", conflicts_with = "store_file")]
    store: Option<String>,
    /// Read the store's URL from this file (its first line).
    #[arg(long, value_name = "PATH")]
    store_file: Option<PathBuf>,
    /// A tenant's working-directory root (repeatable): its sessions work beneath DIR (a
    /// session's `cwd` resolves there). A tenant's token (`agent-api token create --tenant T`)
    /// reads its tenant's sessions; it opens sessions only for a tenant with a root here.
    #[arg(long = "tenant-root", value_name = "TENANT=DIR")]
    tenant_roots: Vec<String>,
    /// A tenant's agent home (repeatable; made 0700 when missing): the HOME and XDG base
    /// directories of its agents. Default: agent-api/tenants/TENANT/home in the user's data
    /// directory.
    #[arg(long = "tenant-home", value_name = "TENANT=DIR")]
    tenant_homes: Vec<String>,
    /// A host name clients reach this server by (repeatable; beyond its IP addresses and
    /// localhost): a request naming another Host is refused (DNS rebinding).
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// What clients may set beyond their own (repeatable): a backend option key such as
    /// backend.acp.command, permissionMode (any mode, looser than --approve too), allowedTools,
    /// or * for all. Default: none of those.
    #[arg(long = "client-option", value_name = "KEY")]
    client_options: Vec<String>,
    /// Live sessions at once (503 past it).
    #[arg(long, value_name = "N", default_value_t = 256)]
    max_sessions: usize,
    /// Messages a session queues while its turn runs (429 queue_full past it; 0: a message
    /// during a turn is 409 turn_in_progress).
    #[arg(long, value_name = "N", default_value_t = 8)]
    max_queue: usize,
    /// Open connections at once (a new one past it is answered 503 and closed).
    #[arg(long, value_name = "N", default_value_t = 512)]
    max_connections: usize,
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
    /// In a store shared with other servers (PostgreSQL): this server's lease, how long it
    /// counts as running after its last heartbeat; past it, the store refuses its writes and
    /// another server may claim its sessions (fencing). Give every server of a fleet the same.
    #[arg(
        long,
        visible_alias = "lease-ttl",
        value_name = "SECS",
        default_value_t = 30
    )]
    server_lease: u64,
    /// How often the heartbeat (the lease) is renewed, in milliseconds; default: a third of the
    /// lease.
    #[arg(long, value_name = "MS")]
    heartbeat: Option<u64>,
    /// An API-only front door: run no agents, hand every session to the servers sharing the
    /// store (PostgreSQL), answer the rest here.
    #[arg(long)]
    no_agents: bool,
    /// Once asked to stop (SIGTERM), after --drain: how many seconds running turns may go on
    /// before they are cancelled; meanwhile no session is opened here and idle ones are released
    /// for the other servers.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    drain_timeout: u64,
    /// A browser origin allowed by CORS (repeatable); default: no CORS.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// The largest request body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    max_body: usize,
    /// How log lines are written on stderr: text (warnings and errors) or json (one object a
    /// line, from `info`: a line per request and per turn, with the session id and trace id).
    /// AGENT_API_LOG (a tracing filter, such as `debug`) sets the level. Traces go over OTLP when
    /// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set.
    #[arg(long, value_enum, default_value_t = LogFormatArg::Text)]
    log_format: LogFormatArg,
    /// Once asked to stop (SIGTERM), serve on this many seconds, not ready
    /// (`GET /v1/health/ready` answers 503), so that a load balancer stops sending work first.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    drain: u64,
    /// Post events to this http:// or https:// URL, signed (Standard Webhooks), at least once and in order
    /// per session (repeatable). Which events: `URL;events=NAME[,NAME…]` with turn.ended,
    /// permission.requested, question.requested, session.ended, error; default: all of them.
    #[arg(long = "webhook", value_name = "URL[;events=…]")]
    webhooks: Vec<String>,
    /// The webhooks' signing secret, whsec_ and base64 (the Standard Webhooks form). Every local
    /// user reads the command line: prefer --webhook-secret-file or AGENT_API_WEBHOOK_SECRET.
    #[arg(long, value_name = "whsec_…", conflicts_with = "webhook_secret_file")]
    webhook_secret: Option<String>,
    /// Read the webhooks' signing secret from this file (its first line).
    #[arg(long, value_name = "PATH")]
    webhook_secret_file: Option<PathBuf>,
    /// Verify https:// webhook endpoints' certificates against the CAs of this PEM file (a
    /// private receiver's CA) instead of the system's. Certificates are always verified.
    #[arg(long, value_name = "FILE", requires = "webhooks")]
    webhook_ca: Option<PathBuf>,
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

/// `--log-format`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The variable the token may come from.
const TOKEN_VAR: &str = "AGENT_API_TOKEN";
/// The variable the store's URL may come from.
const STORE_VAR: &str = "AGENT_API_STORE";
/// The variable the webhooks' secret may come from.
const WEBHOOK_SECRET_VAR: &str = "AGENT_API_WEBHOOK_SECRET";

/// The first line of the secret file `path` (`what` names it in errors).
fn read_secret(path: &Path, what: &str) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{what} {shown}: {e}"))?;
    let line = text.lines().next().unwrap_or_default().trim().to_string();
    if line.is_empty() {
        return Err(format!("{what} {shown} is empty"));
    }
    if std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
        eprintln!("agent-api: warning: {what} {shown} can be read by other users: chmod 600 it");
    }
    Ok(line)
}

/// The store `--store`, `--store-file` or `AGENT_API_STORE` (`var`) names, in that order; the
/// default SQLite file without any.
pub(crate) fn store_url(
    store: Option<&str>,
    store_file: Option<&Path>,
    var: Option<String>,
) -> Result<StoreUrl, String> {
    let url = match (store, store_file, var) {
        (Some(url), _, _) => Some(url.to_string()),
        (None, Some(path), _) => Some(read_secret(path, "--store-file")?),
        (None, None, url) => url,
    };
    match &url {
        Some(url) => StoreUrl::parse(url).map_err(|e| e.to_string()),
        None => StoreUrl::default_sqlite()
            .ok_or_else(|| "no user data directory for the store: pass --store sqlite:PATH".into()),
    }
}

/// The tenants `--tenant-root` and `--tenant-home` name: each root an existing directory, each
/// home one of a tenant with a root (default: [`agent_api_server::Tenant::default_home`]).
fn tenants(
    roots: &[String],
    homes: &[String],
) -> Result<Vec<(String, agent_api_server::Tenant)>, String> {
    let pair = |flag: &str, text: &str| -> Result<(String, PathBuf), String> {
        let (name, dir) = text
            .split_once('=')
            .filter(|(n, d)| !n.is_empty() && !d.is_empty())
            .ok_or_else(|| {
                format!(
                    "{flag} {}: give TENANT=DIR",
                    agent_api::display::line(text, 128)
                )
            })?;
        agent_api_server::tokens::check_tenant(name).map_err(|e| format!("{flag}: {e}"))?;
        Ok((name.to_string(), PathBuf::from(dir)))
    };
    let mut homes: std::collections::BTreeMap<String, PathBuf> = homes
        .iter()
        .map(|text| pair("--tenant-home", text))
        .collect::<Result<_, _>>()?;
    let mut tenants = Vec::new();
    for text in roots {
        let (name, root) = pair("--tenant-root", text)?;
        let root = root
            .canonicalize()
            .ok()
            .filter(|r| r.is_dir())
            .ok_or_else(|| format!("--tenant-root {name}={}: not a directory", root.display()))?;
        let home = match homes.remove(&name) {
            Some(home) => home,
            None => agent_api_server::Tenant::default_home(&name).ok_or_else(|| {
                format!("no user data directory for the agent home of tenant {name}: pass --tenant-home {name}=DIR")
            })?,
        };
        tenants.push((name, agent_api_server::Tenant::new(root).with_home(home)));
    }
    if let Some(name) = homes.keys().next() {
        return Err(format!(
            "--tenant-home {name}=…: that tenant has no --tenant-root"
        ));
    }
    Ok(tenants)
}

/// Runs the server until a signal.
pub(crate) async fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    // Read, then taken out of this process's environment before any agent starts: an agent run
    // here inherits the rest of it. (No other thread reads the environment yet.)
    let token_var = std::env::var(TOKEN_VAR)
        .ok()
        .filter(|t| !t.trim().is_empty());
    let store_var = std::env::var(STORE_VAR)
        .ok()
        .filter(|s| !s.trim().is_empty());
    let webhook_secret_var = std::env::var(WEBHOOK_SECRET_VAR)
        .ok()
        .filter(|s| !s.trim().is_empty());
    std::env::remove_var(TOKEN_VAR);
    std::env::remove_var(STORE_VAR);
    std::env::remove_var(WEBHOOK_SECRET_VAR);
    let format = match args.log_format {
        LogFormatArg::Text => agent_api_server::telemetry::LogFormat::Text,
        LogFormatArg::Json => agent_api_server::telemetry::LogFormat::Json,
    };
    // Kept to the end: dropping it sends the spans still buffered.
    let telemetry = agent_api_server::telemetry::init(format).map_err(|e| e.to_string())?;
    let local_agents = args
        .request
        .via
        .as_ref()
        .is_none_or(|via| *via == agent_api::request::Launcher::Local);
    let token = match (&args.token, &args.token_file, token_var, args.no_token) {
        (Some(token), _, _, _) if token.trim().is_empty() => return Err("--token is empty".into()),
        (Some(token), _, _, _) => {
            eprintln!("agent-api: warning: --token is on the command line, which every local user reads (/proc/PID/cmdline): use --token-file or {TOKEN_VAR}");
            Some(token.trim().to_string())
        }
        (None, Some(path), _, _) => Some(read_secret(path, "--token-file")?),
        (None, None, Some(token), false) => Some(token.trim().to_string()),
        (None, None, _, true) if !is_loopback(&args.host) => {
            return Err(format!(
                "--no-token needs a loopback --host, not {}",
                agent_api::display::line(&args.host, 128)
            ))
        }
        (None, None, _, true) if !local_agents => {
            return Err(
                "--no-token with --via: an agent in a sandbox or elsewhere could reach this server's port and act on it (approve its own requests, start sessions); give it a token (AGENT_API_TOKEN or --token-file)"
                    .into(),
            )
        }
        (None, None, _, true) => None,
        (None, None, None, false) => {
            let token = ServerConfig::random_token()
                .map_err(|e| format!("cannot make a random token: {e}"))?;
            eprintln!("agent-api: token: {token}");
            Some(token)
        }
    };
    let store = store_url(args.store.as_deref(), args.store_file.as_deref(), store_var)?;
    let mut config = ServerConfig::default()
        .with_max_body_bytes(args.max_body)
        .with_drain(std::time::Duration::from_secs(args.drain));
    let token_for_page = token.clone();
    config.token = token;
    config.cors_origins = args.cors_origins.clone();
    config.allowed_hosts = args.allowed_hosts.clone();
    config.client_options = args.client_options.clone();
    config.max_sessions = args.max_sessions;
    config.max_queue = args.max_queue;
    config.max_connections = args.max_connections;
    if let Some(id) = &args.daemon_id {
        config = config.with_daemon_id(id);
    }
    config = config
        .with_idle_release(
            Some(std::time::Duration::from_secs(args.idle_release)).filter(|d| !d.is_zero()),
        )
        .with_session_idle_ttl(args.session_idle_ttl.map(std::time::Duration::from_secs))
        .with_server_lease(std::time::Duration::from_secs(args.server_lease.max(1)))
        .with_heartbeat(args.heartbeat.map(std::time::Duration::from_millis))
        .with_drain_timeout(std::time::Duration::from_secs(args.drain_timeout))
        .with_agents(!args.no_agents);
    if args
        .heartbeat
        .is_some_and(|ms| ms == 0 || ms >= args.server_lease.max(1) * 1000)
    {
        return Err("--heartbeat must be above 0 and well below the lease (--server-lease)".into());
    }
    if args.no_agents && !matches!(store, StoreUrl::Postgres(_)) {
        return Err(
            "--no-agents needs a store shared with servers that run agents (--store postgres://…)"
                .into(),
        );
    }
    for (name, tenant) in tenants(&args.tenant_roots, &args.tenant_homes)? {
        config = config.with_tenant(name, tenant);
    }
    if let Some(webhooks) = webhooks(&args, webhook_secret_var)? {
        config = config.with_webhooks(webhooks);
    }
    config.check().map_err(|e| e.to_string())?;
    // What a sandboxed agent must not read although it sees the whole filesystem: the files the
    // token and the store's URL came from, and the store with every session's transcript.
    let mut secret_files: Vec<PathBuf> = [
        &args.token_file,
        &args.store_file,
        &args.webhook_secret_file,
    ]
    .into_iter()
    .flatten()
    .cloned()
    .collect();
    if let StoreUrl::Sqlite(path) = &store {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = path.clone().into_os_string();
            name.push(suffix);
            secret_files.push(PathBuf::from(name));
        }
    }
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
        via: args.request.via.clone().map(|via| hide(via, &secret_files)),
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
    if telemetry.exporting() {
        eprintln!("agent-api: traces: exported over OTLP (OTEL_* variables)");
    }
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
    drop(telemetry);
    eprintln!("agent-api: stopped");
    Ok(ExitCode::SUCCESS)
}

/// The webhooks `--webhook` asks for, signed with the secret from `--webhook-secret`,
/// `--webhook-secret-file` or the environment (`from_env`); `None` without `--webhook`.
fn webhooks(
    args: &ServeArgs,
    from_env: Option<String>,
) -> Result<Option<agent_api_server::webhooks::WebhookConfig>, String> {
    use agent_api_server::webhooks::{WebhookConfig, WebhookEndpoint, WebhookError, WebhookSecret};
    if args.webhooks.is_empty() {
        return Ok(None);
    }
    let endpoints = args
        .webhooks
        .iter()
        .map(|text| WebhookEndpoint::parse(text))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--webhook: {e}"))?;
    let secret = match (&args.webhook_secret, &args.webhook_secret_file, from_env) {
        (Some(secret), _, _) => {
            eprintln!("agent-api: warning: --webhook-secret is on the command line, which every local user reads (/proc/PID/cmdline): use --webhook-secret-file or {WEBHOOK_SECRET_VAR}");
            secret.clone()
        }
        (None, Some(path), _) => read_secret(path, "--webhook-secret-file")?,
        (None, None, Some(secret)) => secret,
        (None, None, None) => return Err(WebhookError::NoSecret.to_string()),
    };
    let secret = WebhookSecret::parse(&secret).map_err(|e| e.to_string())?;
    let mut config = WebhookConfig::new(endpoints, secret);
    if let Some(ca) = &args.webhook_ca {
        config = config.with_ca_file(ca).map_err(|e| e.to_string())?;
    }
    config.check().map_err(|e| e.to_string())?;
    Ok(Some(config))
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

/// `via` with `files` hidden from its agents, when it is a sandbox on this machine that sees the
/// filesystem.
fn hide(via: agent_api::request::Launcher, files: &[PathBuf]) -> agent_api::request::Launcher {
    match via {
        agent_api::request::Launcher::Sandbox(mut sandbox) => {
            for file in files {
                if !sandbox.hidden.contains(file) {
                    sandbox = sandbox.with_hidden(file.clone());
                }
            }
            agent_api::request::Launcher::Sandbox(sandbox)
        }
        other => other,
    }
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

/// Opens `url` with `xdg-open` when a display is there (argv, no shell); a failure is said, not
/// fatal. The address carries the token, and a command line is every local user's to read: what
/// `xdg-open` is given is a page of the user's own (0600, in a 0700 folder, removed a minute
/// later) that sends the browser on to the address.
fn open_in_browser(url: &str) {
    if std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none() {
        eprintln!("agent-api: no display: open the address above in a browser");
        return;
    }
    let page = match redirect_page(url) {
        Ok(page) => page,
        Err(error) => {
            eprintln!("agent-api: cannot write the page that opens the inspector ({error}): open the address above in a browser");
            return;
        }
    };
    let folder = page.parent().map(Path::to_path_buf);
    drop(std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(60));
        if let Some(folder) = folder {
            let _ = std::fs::remove_dir_all(folder);
        }
    }));
    let opened = std::process::Command::new("xdg-open")
        .arg(&page)
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

/// Writes a page that sends the browser to `url` into a new private folder; returns its path.
fn redirect_page(url: &str) -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let name = ServerConfig::random_token().map_err(|e| std::io::Error::other(e.to_string()))?;
    let folder = std::env::temp_dir().join(format!("agent-api-open-{}", &name[..16]));
    std::fs::DirBuilder::new().mode(0o700).create(&folder)?;
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700))?;
    let page = folder.join("inspector.html");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&page)?;
    // The address is ours (digits, dots, a fragment of unreserved or percent-escaped bytes):
    // nothing in it needs escaping in an attribute, but `"` and `<` are refused all the same.
    if url.contains(['"', '<', '>', '&']) {
        return Err(std::io::Error::other(
            "the address has a character a page cannot hold",
        ));
    }
    writeln!(
        file,
        "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={url}\"><title>agent-api inspector</title><a href=\"{url}\">Open the inspector</a>"
    )?;
    Ok(page)
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
