//! [`ApiError`]: every failure a handler returns, served as the reference's `ProblemDetails`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::store::StoreError;
use crate::wire::ProblemDetails;

/// A failure answered with a status and a `ProblemDetails` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The kind: a reference `ErrorType` name or one of this server's (`turn_in_progress`, …).
    pub kind: &'static str,
    /// What happened, for a person (inert text: it is never markup).
    pub detail: String,
}

impl ApiError {
    /// An error of `kind` with `status`.
    pub fn new(status: StatusCode, kind: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            detail: agent_api::display::line(&detail.into(), 2048),
        }
    }

    /// 400 `invalid_request`.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", detail)
    }

    /// 413 `payload_too_large`.
    pub fn too_large() -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "the request body is larger than the server takes",
        )
    }

    /// 404 `session_not_found`.
    pub fn no_session(id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "session_not_found",
            format!("no session has id `{}`", agent_api::display::line(id, 256)),
        )
    }

    /// 500 `stream_error`: the store failed.
    pub fn store(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(id) => Self::no_session(&id),
            StoreError::Duplicate(id) => Self::new(
                StatusCode::CONFLICT,
                "session_already_exists",
                format!(
                    "a session with id `{}` already exists",
                    agent_api::display::line(&id, 256)
                ),
            ),
            StoreError::NotOwner { owner, .. } => Self::elsewhere(&owner),
            StoreError::LeaseLost { .. } => Self::elsewhere(""),
            other => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "stream_error",
                other.to_string(),
            ),
        }
    }

    /// 409 `session_elsewhere`: the server `owner`, sharing the store, runs the session.
    pub fn elsewhere(owner: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "session_elsewhere",
            format!(
                "the session is run by the server `{}` sharing this store: send to that one",
                agent_api::display::line(owner, 128)
            ),
        )
    }

    /// The library's error, with the status that says whose fault it is.
    pub fn agent(error: &agent_api::AgentError) -> Self {
        use agent_api::AgentError as E;
        let (status, kind) = match error {
            E::UnknownBackend { .. } | E::InvalidAgentKind { .. } => {
                (StatusCode::BAD_REQUEST, "unsupported_agent")
            }
            E::UnsupportedCapability { .. }
            | E::UnknownExtension { .. }
            | E::InvalidExtension { .. }
            | E::InvalidRequest { .. }
            | E::PermissionModeRefused { .. }
            | E::UnquotableArgument { .. } => (StatusCode::BAD_REQUEST, "invalid_request"),
            E::UnknownMode { .. } => (StatusCode::BAD_REQUEST, "mode_not_supported"),
            E::UnknownVariant { .. } => (StatusCode::BAD_REQUEST, "invalid_request"),
            E::BinaryNotFound { .. } => (StatusCode::BAD_REQUEST, "agent_not_installed"),
            E::UnknownPermission { .. } | E::UnknownQuestion { .. } => {
                (StatusCode::NOT_FOUND, "invalid_request")
            }
            E::AlreadyResolved { .. } | E::TurnInProgress => {
                (StatusCode::CONFLICT, "invalid_request")
            }
            E::RunFinished => (StatusCode::NOT_FOUND, "invalid_request"),
            E::NoTurnRunning | E::TurnEndedBeforeSteer => (StatusCode::CONFLICT, "no_turn_running"),
            E::SteerRefused { .. } => (StatusCode::CONFLICT, "steer_refused"),
            E::SessionClosed => (StatusCode::CONFLICT, "agent_process_exited"),
            E::SessionNotFound { .. } => (StatusCode::NOT_FOUND, "session_not_found"),
            E::Timeout { .. } => (StatusCode::GATEWAY_TIMEOUT, "timeout"),
            _ => (StatusCode::BAD_GATEWAY, "agent_process_exited"),
        };
        Self::new(status, kind, error.to_string())
    }

    /// The same error, its detail naming the request's field it is about.
    pub fn about(mut self, field: &str) -> Self {
        self.detail = agent_api::display::line(&format!("{field}: {}", self.detail), 2048);
        self
    }

    fn title(&self) -> &'static str {
        match self.kind {
            "invalid_request" => "Invalid request",
            "unsupported_agent" => "Unsupported agent",
            "agent_not_installed" => "Agent not installed",
            "install_failed" => "Install failed",
            "agent_process_exited" => "Agent process exited",
            "token_invalid" => "Token invalid",
            "permission_denied" => "Permission denied",
            "session_not_found" => "Session not found",
            "session_already_exists" => "Session already exists",
            "mode_not_supported" => "Mode not supported",
            "timeout" => "Timeout",
            "turn_in_progress" => "Turn in progress",
            "queue_full" => "Queue full",
            "message_dropped" => "Message dropped",
            "turn_not_found" => "Turn not found",
            "no_turn_running" => "No turn running",
            "steer_refused" => "Steer refused",
            "session_ended" => "Session ended",
            "session_elsewhere" => "Session run by another server",
            "owner_unavailable" => "Session owner unavailable",
            "fleet_full" => "No server has room",
            "turn_interrupted" => "Turn interrupted",
            "session_released" => "Session released",
            "too_many_subscribers" => "Too many subscribers",
            "payload_too_large" => "Payload too large",
            "not_found" => "Not found",
            "scope_insufficient" => "Scope insufficient",
            "token_not_found" => "Token not found",
            _ => "Stream error",
        }
    }

    /// The body.
    pub fn problem(&self) -> ProblemDetails {
        ProblemDetails {
            kind: format!("urn:agent-api:error:{}", self.kind),
            title: self.title().into(),
            status: self.status.as_u16(),
            detail: Some(self.detail.clone()),
            instance: None,
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.title(),
            self.status.as_u16(),
            self.detail
        )
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.problem())).into_response();
        response.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/problem+json"),
        );
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            // Every 503 says when to try again: the fleet's admission, an owner that did not
            // take a command, a full server.
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        // Read by the fleet's forwarding (an internal `session_elsewhere` never reaches a client).
        response.extensions_mut().insert(ErrorKind(self.kind));
        response
    }
}

/// The kind of the [`ApiError`] a response was made from (a response extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ErrorKind(pub(crate) &'static str);

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        Self::store(error)
    }
}

/// A JSON body, its rejections answered as `ProblemDetails` (413 past the body limit).
#[derive(Debug)]
pub(crate) struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(
        request: axum::extract::Request,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(ApiError::too_large())
            }
            Err(rejection) => Err(ApiError::new(
                rejection.status(),
                "invalid_request",
                rejection.body_text(),
            )),
        }
    }
}

/// A query string, its rejections answered as `ProblemDetails`.
#[derive(Debug)]
pub(crate) struct QueryOf<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequestParts<S>
    for QueryOf<T>
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| Self(value))
            .map_err(|rejection| ApiError::invalid(rejection.body_text()))
    }
}
