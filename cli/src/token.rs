//! `agent-api token`: the scoped tokens of a server's store (`agent_api_server::tokens`), made,
//! listed and revoked while the server runs or not. A token is printed once, on the last line of
//! `create`; the store keeps its SHA-256 only. A revoked token is refused at its next request by
//! every server on the store.

use std::path::PathBuf;
use std::process::ExitCode;

use agent_api_server::tokens::{self, Scope, TokenRecord};
use clap::{Args, Subcommand};

/// Where the tokens are: the server's store, named as `serve` takes it.
#[derive(Args)]
pub(crate) struct StoreArgs {
    /// The server's store: sqlite:PATH (default: agent-api/server.sqlite3 in the user's data
    /// directory) or postgres://USER@HOST:PORT/DB. Default: AGENT_API_STORE.
    #[arg(long, value_name = "URL", conflicts_with = "store_file")]
    store: Option<String>,
    /// Read the store's URL from this file (its first line).
    #[arg(long, value_name = "PATH")]
    store_file: Option<PathBuf>,
}

/// `agent-api token …`.
#[derive(Subcommand)]
pub(crate) enum TokenCommand {
    /// Make a token and print it, once, on the last line.
    Create {
        #[command(flatten)]
        store: StoreArgs,
        /// The tenant whose sessions it sees (needed but for an admin token of every tenant).
        #[arg(long, value_name = "T")]
        tenant: Option<String>,
        /// What it may do: read (list and follow), operate (also create, send, reply, cancel,
        /// terminate) or admin (also /metrics and installing agents).
        #[arg(long, value_name = "SCOPE")]
        scope: String,
    },
    /// List the tokens: id, tenant, scope, created, last used, revoked (never a token).
    List {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revoke a token by its id: refused at its next request.
    Revoke {
        #[command(flatten)]
        store: StoreArgs,
        /// The token's id (`agent-api token list`).
        id: String,
    },
}

async fn open(args: &StoreArgs) -> Result<std::sync::Arc<dyn tokens::TokenStore>, String> {
    let var = std::env::var("AGENT_API_STORE")
        .ok()
        .filter(|s| !s.trim().is_empty());
    let url = crate::serve::store_url(args.store.as_deref(), args.store_file.as_deref(), var)?;
    tokens::open(&url)
        .await
        .map_err(|e| format!("store {url}: {e}"))
}

/// The time now, in unix seconds.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A unix time as RFC 3339 (UTC), `-` for none.
fn when(at: Option<i64>) -> String {
    at.and_then(|at| time::OffsetDateTime::from_unix_timestamp(at).ok())
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "-".into())
}

fn row(token: &TokenRecord) -> String {
    format!(
        "{}  {:<16}  {:<7}  {:<20}  {:<20}  {}",
        token.id,
        agent_api::display::line(token.tenant.as_deref().unwrap_or("*"), 64),
        token.scope,
        when(Some(token.created_at)),
        when(token.last_used_at),
        when(token.revoked_at),
    )
}

/// Runs `agent-api token …`.
pub(crate) async fn token(command: TokenCommand) -> Result<ExitCode, String> {
    match command {
        TokenCommand::Create {
            store,
            tenant,
            scope,
        } => {
            let scope = Scope::parse(&scope).map_err(|e| e.to_string())?;
            let issued = tokens::issue(tenant.as_deref(), scope).map_err(|e| e.to_string())?;
            open(&store)
                .await?
                .create_token(issued.record.clone())
                .await
                .map_err(|e| e.to_string())?;
            let whose = issued.record.tenant.as_deref().unwrap_or("every tenant");
            println!(
                "token {} ({scope}, {whose}): shown once, keep it secret",
                issued.record.id
            );
            println!("{}", issued.token);
        }
        TokenCommand::List { store } => {
            let all = open(&store)
                .await?
                .tokens()
                .await
                .map_err(|e| e.to_string())?;
            println!(
                "{:<16}  {:<16}  {:<7}  {:<20}  {:<20}  revoked",
                "id", "tenant", "scope", "created", "last used"
            );
            for token in &all {
                println!("{}", row(token));
            }
        }
        TokenCommand::Revoke { store, id } => {
            let revoked = open(&store)
                .await?
                .revoke_token(&id, now())
                .await
                .map_err(|e| e.to_string())?;
            if !revoked {
                return Err(format!(
                    "no token has id `{}` (agent-api token list)",
                    agent_api::display::line(&id, 64)
                ));
            }
            println!("revoked {}", agent_api::display::line(&id, 64));
        }
    }
    Ok(ExitCode::SUCCESS)
}
