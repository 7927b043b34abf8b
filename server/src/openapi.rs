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
        crate::api::openapi,
        crate::access::whoami,
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
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_document_builds() {
        let doc = serde_json::to_value(super::document()).unwrap();
        assert!(doc["paths"]["/v1/health"].is_object());
    }
}
