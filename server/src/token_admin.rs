//! Token management over HTTP for an `admin` token (`spec/http-api.md`, "Auth"): `GET /v1/tokens`,
//! `POST /v1/tokens`, `POST /v1/tokens/{token_id}/revoke`. The same store functions as
//! `agent-api token create | list | revoke` ([`crate::tokens`]): the token is shown once, in the
//! answer that made it; the store keeps its SHA-256.
//!
//! An admin token of a tenant manages that tenant's tokens only: it lists them only, makes tokens
//! of its tenant only (never one of every tenant: no way up), and another tenant's token id is
//! answered 404 `token_not_found` exactly as an id no token has. An admin of no tenant (the
//! server's own token) manages every token. `read` and `operate` never reach these handlers
//! (403 `scope_insufficient` in [`crate::access`]).

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::Caller;
use crate::error::{ApiError, JsonBody};
use crate::state::Server;
use crate::store::tokens::{self, Scope, TokenRecord, TokenStore};
use crate::wire::ProblemDetails;

/// A token as `GET /v1/tokens` shows it: never the token, never its hash.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TokenInfo {
    /// Its public id (`aat_<id>_…`), what revoking takes.
    id: String,
    /// The tenant whose sessions it sees; absent: every tenant (an admin token).
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
    /// `read`, `operate` or `admin`.
    scope: String,
    /// When it was made (RFC 3339).
    created_at: String,
    /// When a server last took it (RFC 3339; written at most once a minute per server).
    last_used_at: Option<String>,
    /// When it was revoked (RFC 3339).
    revoked_at: Option<String>,
}

impl From<TokenRecord> for TokenInfo {
    fn from(record: TokenRecord) -> Self {
        let when = |secs: i64| crate::wire::rfc3339_ms(secs.saturating_mul(1000));
        Self {
            id: record.id,
            tenant: record.tenant,
            scope: record.scope.as_str().into(),
            created_at: when(record.created_at),
            last_used_at: record.last_used_at.map(when),
            revoked_at: record.revoked_at.map(when),
        }
    }
}

/// `GET /v1/tokens`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TokenListResponse {
    /// The tokens the caller manages, oldest first.
    tokens: Vec<TokenInfo>,
}

/// `POST /v1/tokens`.
#[derive(Debug, Deserialize, ToSchema)]
pub(crate) struct CreateTokenRequest {
    /// `read`, `operate` or `admin`.
    scope: String,
    /// The tenant whose sessions it sees. A tenant's admin: its own (the default; another is
    /// 403). An admin of every tenant: any, or none for an admin token of every tenant.
    tenant: Option<String>,
}

/// The token just made: shown here once, never again.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct CreateTokenResponse {
    /// The token, for its holder (`Authorization: Bearer …`).
    token: String,
    /// What `GET /v1/tokens` shows of it.
    #[serde(flatten)]
    info: TokenInfo,
}

/// The store's tokens; a store that keeps none (only a custom [`crate::Store`]) answers 501.
fn store(server: &Server) -> Result<&dyn TokenStore, ApiError> {
    server.inner.store.token_store().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "invalid_request",
            "this server's store keeps no tokens",
        )
    })
}

/// 404 `token_not_found`: said the same for an unknown id and another tenant's token.
fn no_token(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "token_not_found",
        format!("no token has id `{}`", agent_api::display::line(id, 64)),
    )
}

#[utoipa::path(get, path = "/v1/tokens", operation_id = "list_tokens",
    responses((status = 200, body = TokenListResponse), (status = 401, body = ProblemDetails),
        (status = 403, body = ProblemDetails), (status = 500, body = ProblemDetails)))]
pub(crate) async fn list(
    State(server): State<Server>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<TokenListResponse>, ApiError> {
    let all = store(&server)?.tokens().await?;
    Ok(Json(TokenListResponse {
        tokens: all
            .into_iter()
            .filter(|t| caller.sees(t.tenant.as_deref()))
            .map(TokenInfo::from)
            .collect(),
    }))
}

#[utoipa::path(post, path = "/v1/tokens", operation_id = "create_token",
    request_body = CreateTokenRequest,
    responses((status = 200, body = CreateTokenResponse), (status = 400, body = ProblemDetails),
        (status = 401, body = ProblemDetails), (status = 403, body = ProblemDetails),
        (status = 500, body = ProblemDetails)))]
pub(crate) async fn create(
    State(server): State<Server>,
    Extension(caller): Extension<Caller>,
    JsonBody(body): JsonBody<CreateTokenRequest>,
) -> Result<Response, ApiError> {
    let scope = Scope::parse(&body.scope).map_err(|e| ApiError::invalid(e.to_string()))?;
    let tenant = match (caller.tenant, body.tenant) {
        (Some(own), None) => Some(own),
        (Some(own), Some(named)) if named == own => Some(own),
        (Some(_), Some(_)) => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "scope_insufficient",
                "a tenant's admin token makes tokens of its own tenant only",
            ))
        }
        (None, named) => named,
    };
    let issued =
        tokens::issue(tenant.as_deref(), scope).map_err(|e| ApiError::invalid(e.to_string()))?;
    store(&server)?.create_token(issued.record.clone()).await?;
    let mut response = Json(CreateTokenResponse {
        token: issued.token,
        info: issued.record.into(),
    })
    .into_response();
    // Shown once: no cache between here and the caller keeps it.
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

#[utoipa::path(post, path = "/v1/tokens/{token_id}/revoke", operation_id = "revoke_token",
    params(("token_id" = String, Path, description = "The token's id (`GET /v1/tokens`)")),
    responses((status = 204), (status = 401, body = ProblemDetails), (status = 403, body = ProblemDetails),
        (status = 404, body = ProblemDetails), (status = 500, body = ProblemDetails)))]
pub(crate) async fn revoke(
    State(server): State<Server>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let tokens = store(&server)?;
    match tokens.token(&id).await? {
        Some(record) if caller.sees(record.tenant.as_deref()) => {}
        _ => return Err(no_token(&id)),
    }
    // Revoking a revoked token keeps its first time; gone meanwhile: as unknown.
    if !tokens.revoke_token(&id, crate::store::unix_now()).await? {
        return Err(no_token(&id));
    }
    Ok(StatusCode::NO_CONTENT)
}
