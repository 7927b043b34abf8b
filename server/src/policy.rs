//! What a client may ask of a session, and what only the server's operator may: a backend option
//! that names a program, a binary path, an environment variable or a file runs what the client
//! chose as the server's user, and a permission mode or an allowed tool looser than the
//! operator's `--approve` undoes it. Those are refused (403 `option_not_allowed`, naming the
//! option) unless the backend lists the key as safe for clients
//! ([`agent_api::BackendInfo::client_keys`]) or the operator allows it
//! ([`crate::ServerConfig::client_options`]).

use agent_api::request::PermissionRule;
use agent_api::{AgentBackend, PermissionPolicy};
use axum::http::StatusCode;

use crate::config::ServerConfig;
use crate::error::ApiError;
use crate::wire::SessionSettings;

/// How loose a policy is: what a client may ask is at most as loose as the operator's.
fn looseness(policy: &PermissionPolicy) -> u8 {
    match policy {
        PermissionPolicy::DenyAll => 0,
        PermissionPolicy::ByCategory(rules)
            if rules.values().any(|r| *r == PermissionRule::Deny) =>
        {
            0
        }
        PermissionPolicy::ByCategory(rules)
            if !rules.is_empty() && rules.values().all(|r| *r == PermissionRule::Approve) =>
        {
            // Categories not listed are asked: no looser than asking.
            1
        }
        PermissionPolicy::ApproveAll => 2,
        _ => 1,
    }
}

/// 403 naming the first setting the client may not make on a server whose operator's policy is
/// `operator`.
pub(crate) fn check(
    config: &ServerConfig,
    operator: &PermissionPolicy,
    backend: &dyn AgentBackend,
    settings: &SessionSettings,
) -> Result<(), ApiError> {
    let allowed = |option: &str| {
        config
            .client_options
            .iter()
            .any(|o| o == "*" || o == option)
    };
    let refused = |field: String, why: &str| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "option_not_allowed",
            format!(
                "{field}: {why}; this server's operator has not let clients set it (agent-api serve --client-option {})",
                field.strip_prefix("options.").unwrap_or(&field)
            ),
        )
    };
    let mut keys: Vec<&String> = settings.options.iter().flatten().map(|(k, _)| k).collect();
    keys.sort();
    for key in keys {
        if !backend.info().client_keys.contains(&key.as_str()) && !allowed(key) {
            let shown = agent_api::display::line(key, 128);
            return Err(refused(
                format!("options.{shown}"),
                "a backend option may name a program, a path, an environment variable or a policy",
            ));
        }
    }
    let own = looseness(operator);
    let asked = match settings.permission_mode.as_deref() {
        Some("bypass") => 2,
        Some("ask") => 1,
        _ => 0,
    };
    if asked > own && !allowed("permissionMode") {
        return Err(refused(
            "permissionMode".into(),
            "looser than the operator's --approve",
        ));
    }
    let allows_tools = settings
        .allowed_tools
        .as_ref()
        .is_some_and(|t| !t.is_empty());
    if allows_tools && own < 2 && !allowed("allowedTools") {
        return Err(refused(
            "allowedTools".into(),
            "tools approved without asking are looser than the operator's --approve",
        ));
    }
    Ok(())
}
