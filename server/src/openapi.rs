//! The server's OpenAPI document, generated from its handlers and types ([`utoipa`]); the
//! universal event's schema is the project's own `spec/universal-schema.json`.

use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::OpenApi;

#[derive(OpenApi)]
#[openapi(
    info(title = "agent-api serve", description = "The universal session API over HTTP and SSE (spec/http-api.md)."),
    paths(
        crate::api::health,
        crate::health::ready,
        crate::api::list_agents,
        crate::api::agent_modes,
        crate::api::install_agent,
        crate::api::agent_history,
        crate::api::agent_history_events,
        crate::api::list_sessions,
        crate::api::get_session,
        crate::api::create_session,
        crate::api::post_message,
        crate::api::post_message_stream,
        crate::api::get_turn,
        crate::api::get_events,
        crate::api::get_events_sse,
        crate::api::reply_permission,
        crate::api::reply_question,
        crate::api::reject_question,
        crate::api::terminate_session,
        crate::api::cancel_turn,
        crate::api::steer_turn,
        crate::api::resume_session,
        openapi,
        crate::access::whoami,
        crate::token_admin::list,
        crate::token_admin::create,
        crate::token_admin::revoke,
        crate::webhooks::log::deliveries,
    ),
    components(schemas(crate::wire::ErrorType, crate::wire::AgentErrorBody, crate::wire::EventsQuery, crate::wire::TurnStreamQuery, crate::wire::TurnWaitQuery)),
    modifiers(&BearerToken),
)]
struct Document;

struct BearerToken;

impl utoipa::Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let mut bearer = Http::new(HttpAuthScheme::Bearer);
        bearer.description = Some(
            "The server's own token (an admin of every tenant), or a scoped token from the store              (`agent-api token create`): `read` may list and follow (every GET but /metrics),              `operate` may also create, send, reply, steer, cancel, terminate and resume (every              POST but installing an agent), `admin` may also read /metrics, install agents and manage tokens (/v1/tokens: a tenant's admin its tenant's only);              past its scope: 403 scope_insufficient. A tenant's token sees its tenant's sessions              only: another tenant's session id answers 404 session_not_found, as an unknown one.              GET /v1/whoami says what a token may do."
                .into(),
        );
        components.add_security_scheme("token", SecurityScheme::Http(bearer));
        openapi.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
            "token",
            Vec::<String>::new(),
        )]);
    }
}

/// The document `GET /v1/openapi.json` serves.
pub fn document() -> utoipa::openapi::OpenApi {
    Document::openapi()
}

/// Beyond the reference: this document. Its handler lives beside it, not with the others in
/// [`crate::api`], which the document lists: the two files would otherwise need each other.
#[utoipa::path(get, path = "/v1/openapi.json", operation_id = "get_openapi", responses((status = 200, description = "This OpenAPI document")))]
pub(crate) async fn openapi() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(document())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_document_builds() {
        let doc = serde_json::to_value(super::document()).unwrap();
        assert!(doc["paths"]["/v1/health"].is_object());
        assert!(doc["paths"]["/v1/whoami"]["get"].is_object());
        let token = &doc["components"]["securitySchemes"]["token"]["description"];
        assert!(token.as_str().unwrap().contains("scope_insufficient"));
    }
}
