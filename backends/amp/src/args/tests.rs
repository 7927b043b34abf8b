use super::*;
use crate::options::{AgentMode, Visibility};

fn config() -> AmpConfig {
    // The helper path only has to exist: the channel links to it.
    AmpConfig::default()
        .with_inherit_env(false)
        .with_env(API_KEY_VAR, "sk-test")
        .with_delegate_helper("/bin/true")
}

fn argv(inv: &Invocation) -> Vec<String> {
    inv.spec
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

#[tokio::test]
async fn two_way_keeps_the_prompt_off_the_command_line_and_delegates_through_its_settings() {
    let inv = invocation(&config(), &RunRequest::new("-rf secret prompt"), false)
        .await
        .unwrap();
    let args = argv(&inv);
    assert_eq!(&args[..1], ["--execute"]);
    assert!(args.iter().any(|a| a == "--stream-json-input"), "{args:?}");
    assert!(
        !args.iter().any(|a| a.contains("secret prompt")),
        "{args:?}"
    );
    assert!(inv.spec.stdin);
    let at = args.iter().position(|a| a == "--settings-file").unwrap();
    let settings: Value = serde_json::from_slice(&std::fs::read(&args[at + 1]).unwrap()).unwrap();
    let program = inv.files.channel.as_ref().unwrap().program();
    assert_eq!(
        settings["amp.permissions"],
        json!([{ "tool": "*", "action": "delegate", "to": program.to_string_lossy() }])
    );
    assert!(
        !inv.spec.env.keys().any(|k| k.starts_with("AGENT_API")),
        "nothing is added to amp's environment"
    );
}

#[tokio::test]
async fn one_way_puts_the_prompt_after_execute_and_options_map_to_flags() {
    let options = AmpOptions::default()
        .interface(Interface::OneWay)
        .mode(AgentMode::Ultra)
        .label("a")
        .label("b")
        .visibility(Visibility::Private)
        .no_archive(true)
        .log_file("/tmp/amp.log")
        .mcp_config("{}")
        .thinking(false);
    let request = RunRequest::new("hello")
        .with_options(&options)
        .with_session(SessionSelector::Resume("T-123".into()));
    let inv = invocation(&config(), &request, false).await.unwrap();
    let args = argv(&inv).join(" ");
    assert!(
        args.starts_with("threads continue T-123 --execute hello --stream-json --settings-file "),
        "{args}"
    );
    for want in [
        "--mode ultra",
        "--label a --label b",
        "--visibility private",
        "--no-archive-after-execute",
        "--log-file /tmp/amp.log",
    ] {
        assert!(args.contains(want), "{want} missing from {args}");
    }
    assert!(
        !args.contains("--stream-json-input") && !args.contains("thinking"),
        "{args}"
    );
    assert!(!inv.spec.stdin);
}

#[tokio::test]
async fn dangerously_allow_all_is_a_setting_with_no_channel() {
    let request =
        RunRequest::new("hi").with_options(&AmpOptions::default().dangerously_allow_all(true));
    let inv = invocation(&config(), &request, false).await.unwrap();
    assert!(inv.files.channel.is_none());
    let args = argv(&inv);
    let at = args.iter().position(|a| a == "--settings-file").unwrap();
    let settings: Value = serde_json::from_slice(&std::fs::read(&args[at + 1]).unwrap()).unwrap();
    assert_eq!(settings, json!({ "amp.dangerouslyAllowAll": true }));
    // The policy never means it.
    let approve_all =
        RunRequest::new("hi").with_permissions(agent_api::PermissionPolicy::ApproveAll);
    assert!(invocation(&config(), &approve_all, false)
        .await
        .unwrap()
        .files
        .channel
        .is_some());
}

#[tokio::test]
async fn no_key_is_a_typed_auth_error_before_anything_is_built() {
    let bare = AmpConfig::default()
        .with_inherit_env(false)
        .with_delegate_helper("/bin/true");
    let err = invocation(&bare, &RunRequest::new("hi"), false)
        .await
        .unwrap_err();
    assert!(matches!(err, AgentError::Auth { .. }), "{err:?}");
    assert!(check_credentials(&bare, &RunRequest::new("hi").with_env(API_KEY_VAR, "k")).is_ok());
    assert!(check_credentials(
        &bare.clone().with_credentials_configured(true),
        &RunRequest::new("hi")
    )
    .is_ok());
    assert!(check_credentials(&bare, &RunRequest::new("hi").with_env(API_KEY_VAR, " ")).is_err());
}

#[tokio::test]
async fn last_thread_and_fork_are_refused() {
    for session in [
        SessionSelector::ResumeLast,
        SessionSelector::Fork("T-1".into()),
    ] {
        let err = invocation(
            &config(),
            &RunRequest::new("hi").with_session(session),
            false,
        )
        .await
        .unwrap_err();
        assert!(matches!(err, AgentError::InvalidRequest { .. }), "{err:?}");
    }
}

#[tokio::test]
async fn denied_tools_join_the_callers_disabled_tools_in_the_run_settings() {
    let dir = tempfile::tempdir().unwrap();
    let own = dir.path().join("settings.json");
    std::fs::write(
        &own,
        r#"{"amp.tools.disable": ["browser"], "amp.notifications.enabled": false}"#,
    )
    .unwrap();
    let options = AmpOptions::default().settings_file(own.to_string_lossy());
    let portable = agent_api::PortableOptions::default().deny_tool("Bash");
    let inv = invocation(
        &config(),
        &RunRequest::new("hi")
            .with_options(&options)
            .with_portable(portable),
        false,
    )
    .await
    .unwrap();
    let args = argv(&inv);
    let at = args.iter().position(|a| a == "--settings-file").unwrap();
    let settings: Value = serde_json::from_slice(&std::fs::read(&args[at + 1]).unwrap()).unwrap();
    assert_eq!(settings[TOOLS_DISABLE], json!(["browser", "Bash"]));
    assert_eq!(
        settings["amp.notifications.enabled"],
        json!(false),
        "the caller's settings stay"
    );
}

#[tokio::test]
async fn mcp_servers_join_the_callers_servers_in_the_run_settings_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let own = dir.path().join("settings.json");
    std::fs::write(
        &own,
        r#"{"amp.mcpServers": {"docs": {"command": "docs-mcp"}}}"#,
    )
    .unwrap();
    let options = AmpOptions::default().settings_file(own.to_string_lossy());
    let mut http = agent_api::request::McpServer::http("http://127.0.0.1:9/mcp");
    if let agent_api::request::McpServer::Http { headers, .. } = &mut http {
        headers.insert("Authorization".into(), "Bearer run-secret".into());
    }
    let portable = agent_api::PortableOptions::default()
        .mcp_server(
            "files",
            agent_api::request::McpServer::stdio("mcp-files", ["--root", "/srv"]),
        )
        .mcp_server("caller", http);
    let inv = invocation(
        &config(),
        &RunRequest::new("hi")
            .with_options(&options)
            .with_portable(portable),
        false,
    )
    .await
    .unwrap();
    let args = argv(&inv);
    let path = &args[args.iter().position(|a| a == "--settings-file").unwrap() + 1];
    let settings: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(
        settings[MCP_SERVERS]["docs"],
        json!({"command": "docs-mcp"}),
        "the caller's server stays"
    );
    assert_eq!(
        settings[MCP_SERVERS]["files"],
        json!({"command": "mcp-files", "args": ["--root", "/srv"], "env": {}})
    );
    assert_eq!(
        settings[MCP_SERVERS]["caller"]["headers"]["Authorization"],
        "Bearer run-secret"
    );
    let private =
        |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o077 == 0;
    let path = std::path::Path::new(path);
    assert!(
        private(path) || private(path.parent().unwrap()),
        "only the owner reads the servers' secrets"
    );
    assert!(
        !args.iter().any(|a| a.contains("run-secret")),
        "no secret on the command line"
    );
}

#[tokio::test]
async fn the_request_mode_is_amps_mode_flag_and_the_extension_wins() {
    let chosen = invocation(
        &config(),
        &RunRequest::new("hi").with_mode(agent_api::request::AgentMode::parse("ultra")),
        false,
    )
    .await
    .unwrap();
    assert!(
        argv(&chosen).join(" ").contains("--mode ultra"),
        "{:?}",
        argv(&chosen)
    );
    let both = RunRequest::new("hi")
        .with_mode(agent_api::request::AgentMode::parse("ultra"))
        .with_options(&AmpOptions::default().mode(AgentMode::Low));
    let both = argv(&invocation(&config(), &both, false).await.unwrap()).join(" ");
    assert!(
        both.contains("--mode low") && !both.contains("ultra"),
        "{both}"
    );
    let none = argv(
        &invocation(&config(), &RunRequest::new("hi"), false)
            .await
            .unwrap(),
    )
    .join(" ");
    assert!(!none.contains("--mode"), "{none}");
}

#[test]
fn plan_mode_and_variants_are_refused_before_spawn() {
    use agent_api::AgentBackend;
    let backend = crate::AmpBackend::new(config());
    let err = backend
        .validate(&RunRequest::new("hi").with_mode(agent_api::request::AgentMode::Plan))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("default, low, medium, high, ultra"),
        "{err}"
    );
    let err = backend
        .validate(&RunRequest::new("hi").with_variant("high"))
        .unwrap_err();
    assert!(
        matches!(err, AgentError::UnsupportedCapability { .. }),
        "{err}"
    );
}
