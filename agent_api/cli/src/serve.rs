//! `agent-api serve`: the universal session API over HTTP and SSE (`agent_api_server`), with the
//! agents this tool knows and `run`'s request flags as every session's defaults.
//!
//! Secure by default: a token is required unless the host is loopback and `--no-token` is
//! given; without `--token` a random one is made and printed. SIGINT, SIGTERM and SIGHUP stop the
//! server: live sessions are terminated (their agents stopped) and recorded as ended.

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
    /// This server's name in a store shared with others (PostgreSQL): a server starting again
    /// ends the sessions its name left live, and only those. Default: the host's name.
    #[arg(long, value_name = "NAME")]
    daemon_id: Option<String>,
    /// A browser origin allowed by CORS (repeatable); default: no CORS.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// The largest request body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    max_body: usize,
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
        (None, true) => return Err(format!("--no-token needs a loopback --host, not {}", agent_api::display::line(&args.host, 128))),
        (None, false) => {
            let token = ServerConfig::random_token().map_err(|e| format!("cannot make a random token: {e}"))?;
            eprintln!("agent-api: token: {token}");
            Some(token)
        }
    };
    let store = match &args.store {
        Some(url) => StoreUrl::parse(url).map_err(|e| e.to_string())?,
        None => StoreUrl::default_sqlite().ok_or("no user data directory for the store: pass --store sqlite:PATH")?,
    };
    let mut config = ServerConfig::default().with_max_body_bytes(args.max_body);
    config.token = token;
    config.cors_origins = args.cors_origins.clone();
    if let Some(id) = &args.daemon_id {
        config = config.with_daemon_id(id);
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
    let server = agent_api_server::Server::new(crate::agents::gateway(), defaults, opened, config)
        .await
        .map_err(|e| e.to_string())?
        .with_probes(agent_api_builtin::probes().to_vec());
    let host: IpAddr = match args.host.as_str() {
        "localhost" => IpAddr::from([127, 0, 0, 1]),
        host => host.parse().map_err(|_| format!("--host {}: not an IP address", agent_api::display::line(host, 128)))?,
    };
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(host, args.port))
        .await
        .map_err(|e| format!("cannot listen on {host}:{}: {e}", args.port))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("agent-api: store: {store}");
    eprintln!("agent-api: listening on http://{address}");
    let stop = crate::signals::Stop::listen().map_err(|e| format!("cannot listen for signals: {e}"))?;
    let shutdown = async move { stop.cancel.cancelled().await };
    agent_api_server::serve(listener, server, shutdown).await.map_err(|e| format!("the server failed: {e}"))?;
    eprintln!("agent-api: stopped");
    Ok(ExitCode::SUCCESS)
}
