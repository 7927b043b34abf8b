//! Scoped tokens kept in the store: each names a [`Scope`] and, optionally, the tenant whose
//! sessions it sees (`spec/http-api.md`, Auth).
//!
//! A token is `aat_<id>_<secret>`: its id (public, what `agent-api token list` shows and
//! `revoke` takes) and 32 random bytes. The store keeps the SHA-256 of the whole token, never the
//! token: a request's token is found by its id and its hash compared in constant time. The token
//! is shown once, when it is made ([`issue`]).
//!
//! ```
//! use agent_api_server::tokens::{issue, Scope};
//! let issued = issue(Some("team-a"), Scope::Read).unwrap();
//! assert!(issued.token.starts_with(&format!("aat_{}_", issued.record.id)));
//! assert!(issued.record.matches(&issued.token));
//! assert!(!issued.record.matches("aat_x_y"));
//! assert!(!issued.record.hash.contains(&issued.token));
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::store::{StoreError, StoreUrl};

/// What a token may do; each scope may do what the ones before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Scope {
    /// List and follow sessions: read their info and events, follow their streams.
    Read,
    /// Also create sessions, send messages, reply, steer, cancel, terminate, resume.
    Operate,
    /// Also `GET /metrics`, installing agents, and (untenanted) every tenant's sessions.
    Admin,
}

impl Scope {
    /// Its name: `read`, `operate` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Operate => "operate",
            Self::Admin => "admin",
        }
    }

    /// The scope `text` names.
    pub fn parse(text: &str) -> Result<Self, TokenError> {
        match text {
            "read" => Ok(Self::Read),
            "operate" => Ok(Self::Operate),
            "admin" => Ok(Self::Admin),
            other => Err(TokenError::Scope(agent_api::display::line(other, 64))),
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A token as the store keeps it: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenRecord {
    /// Its public id (`aat_<id>_…`).
    pub id: String,
    /// The tenant whose sessions it sees; `None`: every session (as the server's `--token`).
    pub tenant: Option<String>,
    /// What it may do.
    pub scope: Scope,
    /// The SHA-256 of the token, as 64 hex digits.
    pub hash: String,
    /// When it was made (unix seconds).
    pub created_at: i64,
    /// When a server last took it (unix seconds; written at most once a minute per server).
    pub last_used_at: Option<i64>,
    /// When it was revoked (unix seconds); a revoked token is refused.
    pub revoked_at: Option<i64>,
}

impl TokenRecord {
    /// Whether `token` is this one (its hash compared in constant time).
    pub fn matches(&self, token: &str) -> bool {
        bool::from(hash(token).as_bytes().ct_eq(self.hash.as_bytes()))
    }
}

/// A token just made: its record (for the store) and the token (shown once, never stored).
#[derive(Clone)]
#[non_exhaustive]
pub struct IssuedToken {
    /// What the store keeps.
    pub record: TokenRecord,
    /// The token, for its holder.
    pub token: String,
}

impl std::fmt::Debug for IssuedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedToken")
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

/// What making or naming a token can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// A scope that is not `read`, `operate` or `admin`.
    #[error("scope `{0}`: give read, operate or admin")]
    Scope(String),
    /// A tenant name that is not one.
    #[error("tenant `{0}`: 1 to 64 letters, digits, `-`, `_` or `.`, not starting with `.`")]
    Tenant(String),
    /// A `read` or `operate` token needs a tenant.
    #[error("a {0} token names its tenant (--tenant T): only an admin token sees every tenant")]
    NoTenant(Scope),
    /// The operating system gave no random bytes.
    #[error("no random bytes: {0}")]
    Random(String),
}

/// The prefix of every stored token.
const PREFIX: &str = "aat_";

/// Checks a tenant's name: 1 to 64 of `A-Z a-z 0-9 - _ .`, not starting with `.` (a name that is
/// safe in a path, a log and a header).
pub fn check_tenant(name: &str) -> Result<(), TokenError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    match ok {
        true => Ok(()),
        false => Err(TokenError::Tenant(agent_api::display::line(name, 64))),
    }
}

/// The SHA-256 of `token`, as 64 hex digits.
pub fn hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random(len: usize) -> Result<Vec<u8>, TokenError> {
    let mut bytes = vec![0u8; len];
    getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
    Ok(bytes)
}

/// Makes a token of `scope` for `tenant` (`None`: every tenant, admin only).
pub fn issue(tenant: Option<&str>, scope: Scope) -> Result<IssuedToken, TokenError> {
    match tenant {
        Some(tenant) => check_tenant(tenant)?,
        None if scope != Scope::Admin => return Err(TokenError::NoTenant(scope)),
        None => {}
    }
    let id = hex(&random(8)?);
    let token = format!("{PREFIX}{id}_{}", hex(&random(32)?));
    Ok(IssuedToken {
        record: TokenRecord {
            id,
            tenant: tenant.map(str::to_string),
            scope,
            hash: hash(&token),
            created_at: crate::store::unix_now(),
            last_used_at: None,
            revoked_at: None,
        },
        token,
    })
}

/// The id a presented token names, when it has the shape of a stored one.
pub(crate) fn id_of(token: &str) -> Option<&str> {
    let (id, secret) = token.strip_prefix(PREFIX)?.split_once('_')?;
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    (id.len() == 16 && secret.len() == 64 && hex(id) && hex(secret)).then_some(id)
}

/// Where tokens are kept: the store of the sessions they see.
#[async_trait]
pub trait TokenStore: Send + Sync + std::fmt::Debug {
    /// Adds a token.
    async fn create_token(&self, token: TokenRecord) -> Result<(), StoreError>;
    /// The token with this id.
    async fn token(&self, id: &str) -> Result<Option<TokenRecord>, StoreError>;
    /// Every token, oldest first.
    async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError>;
    /// Revokes the token `id` at `at` (unix seconds); false when no token has that id. Revoking
    /// a revoked token keeps its first time.
    async fn revoke_token(&self, id: &str, at: i64) -> Result<bool, StoreError>;
    /// Records that a server took the token at `at`.
    async fn token_used(&self, id: &str, at: i64) -> Result<(), StoreError>;
}

/// The tokens of the store `url`, for `agent-api token`: a SQLite file is opened beside the
/// server that may hold it (tokens are written in their own short transactions); PostgreSQL as
/// any server does; `memory` is refused (a token there would vanish with this process).
pub async fn open(url: &StoreUrl) -> Result<Arc<dyn TokenStore>, StoreError> {
    match url {
        StoreUrl::Memory => Err(StoreError::Backend(
            "a memory store keeps nothing past this command: give the server's --store (sqlite:PATH or postgres://…)".into(),
        )),
        StoreUrl::Sqlite(path) => Ok(Arc::new(
            crate::store::SqliteTokens::open(path.clone()).await?,
        )),
        StoreUrl::Postgres(url) => Ok(Arc::new(crate::store::PostgresStore::open(url).await?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_their_shape_and_tenants_their_names() {
        let issued = issue(Some("a.b-c_1"), Scope::Operate).unwrap();
        assert_eq!(id_of(&issued.token), Some(issued.record.id.as_str()));
        assert_eq!(issued.record.hash.len(), 64);
        assert!(!format!("{issued:?}").contains(&issued.token));
        for bad in [
            "aat_",
            "aat_zz_yy",
            "Bearer x",
            "",
            "aat_0123456789abcdef_00",
        ] {
            assert_eq!(id_of(bad), None, "{bad}");
        }
        for bad in ["", ".", "..", ".hidden", "a/b", "a b", &"x".repeat(65), "é"] {
            assert!(check_tenant(bad).is_err(), "{bad}");
        }
        assert_eq!(
            issue(None, Scope::Read).unwrap_err(),
            TokenError::NoTenant(Scope::Read)
        );
        assert!(issue(None, Scope::Admin).is_ok());
        assert!(Scope::Read < Scope::Operate && Scope::Operate < Scope::Admin);
        assert_eq!(Scope::parse("operate").unwrap(), Scope::Operate);
        assert!(Scope::parse("root").is_err());
    }
}
