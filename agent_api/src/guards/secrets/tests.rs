use super::*;

/// Each row: text an agent might print, and the secret that must not survive redaction.
const LEAKS: &[(&str, &str)] = &[
    ("Incorrect API key provided: sk-test.", "sk-test"),
    ("key sk-ant-api03-AbCdEf_123-xyz in use", "AbCdEf_123"),
    ("project key sk-proj-ZZZ999aaa", "ZZZ999aaa"),
    ("api_key=sk-live-12345", "12345"),
    ("api_key=plainvalue42", "plainvalue42"),
    ("key:\nsk-abc123456", "abc123456"),
    ("key:\n   hunter2hunter2", "hunter2hunter2"),
    ("key=\"quoted secret value\"", "quoted secret value"),
    ("{\"api_key\": \"abcdef123456\"}", "abcdef123456"),
    ("x-api-key: 0123456789abcdef", "0123456789abcdef"),
    (
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
        "eyJhbGciOiJIUzI1NiJ9",
    ),
    ("bearer abc.def.ghi failed", "abc.def.ghi"),
    ("password='p@ss w0rd'", "p@ss w0rd"),
    (
        "GET https://h.example/v1/responses?key=abc&x=1 failed",
        "key=abc",
    ),
    ("session sess-AbCdEf0123 expired", "AbCdEf0123"),
    ("the turn ended with error_sk-proj-SECRET777", "SECRET777"),
    (
        "retrying: xsk-ant-api03-Q2x9vLmN4pR7tY1wZ8",
        "Q2x9vLmN4pR7tY1wZ8",
    ),
    (
        "rerouted=tokensk-proj-AbCdEfGh12345678XyZ",
        "AbCdEfGh12345678XyZ",
    ),
    (
        "tool mcp__vaultsk_live_9f8e7d6c5b4a39281706",
        "9f8e7d6c5b4a39281706",
    ),
];

#[test]
fn every_known_secret_shape_is_masked() {
    for (text, secret) in LEAKS {
        let out = redact(text);
        assert!(
            !out.contains(secret),
            "{text:?} → {out:?} still holds {secret:?}"
        );
        assert!(
            out.contains(REDACTED) || text.contains("https://"),
            "{text:?} → {out:?}"
        );
    }
}

#[test]
fn ordinary_text_is_left_alone_and_borrowed() {
    for text in [
        "task-list done in 3 turns",
        "max_tokens: 5000 input_tokens: 12",
        "the monkey= banana",
        "press any key to go on",
        "open task-management-dashboard-for-everyone",
        "a desk-internationalization pass",
        "see risk_assessment_document_2024",
    ] {
        assert!(
            matches!(redact(text), Cow::Borrowed(_)),
            "{text:?} → {:?}",
            redact(text)
        );
    }
}

proptest::proptest! {
    /// The cheap look for trigger words never lets through a text the patterns would change.
    #[test]
    fn the_trigger_check_lets_nothing_through_that_the_patterns_change(
        text in "([a-zA-Z0-9 _=:\"'/?.-]|sk-|Bearer |api_key|TOKEN|https://h/x\\?q=1|pass|word){0,12}"
    ) {
        if !may_hold_secret(&text) {
            proptest::prop_assert_eq!(apply_rules(&text), Cow::Borrowed(text.as_str()));
        }
    }
}

#[test]
fn the_trigger_check_skips_ordinary_text_and_takes_every_known_shape() {
    for text in [
        "session started",
        "session ended: completed",
        "permission approved: shell: ls -la",
    ] {
        assert!(!may_hold_secret(text), "{text:?}");
    }
    for (text, _) in LEAKS {
        assert!(may_hold_secret(text), "{text:?}");
    }
}

#[test]
fn redaction_is_idempotent_and_bounded() {
    for (text, _) in LEAKS {
        let once = redact(text).into_owned();
        assert_eq!(redact(&once), once);
    }
    let long = format!("sk-{}", "a".repeat(10_000));
    let cut = redact_bounded(&long, 64);
    assert!(cut.len() <= 64 && !cut.contains("aaaa"), "{cut}");
}

#[test]
fn env_names_never_show_values() {
    let env = BTreeMap::from([("ANTHROPIC_API_KEY".to_string(), "sk-ant-secret".to_string())]);
    let shown = format!("{:?}", EnvNames(&env));
    assert_eq!(shown, "{\"ANTHROPIC_API_KEY\": [redacted]}");
}

#[test]
fn debug_of_requests_and_command_specs_never_prints_env_values() {
    let request = crate::RunRequest::new("hi").with_env("ANTHROPIC_API_KEY", "sk-ant-live-999");
    let spec = crate::kit::CommandSpec::new("agent-cli").env("OPENAI_API_KEY", "plain-value-888");
    for shown in [
        format!("{request:?}"),
        format!("{spec:?}"),
        format!("{request:#?}"),
    ] {
        assert!(
            !shown.contains("sk-ant-live-999") && !shown.contains("plain-value-888"),
            "{shown}"
        );
        assert!(shown.contains("_API_KEY"), "the names stay: {shown}");
    }
}

#[test]
fn secret_values_come_from_secret_named_variables_and_arguments_only() {
    let env = [
        ("OPENAI_API_KEY", "live-value-1"),
        ("AGENT_SERVER_PASSWORD", "pw-value-2"),
        ("HOME", "/root/home"),
    ];
    let args: Vec<String> = [
        "--api-key",
        "flag-value-3",
        "--token=eq-value-4",
        "-c",
        "api_key=\"quoted-value-5\"",
        "--model",
        "gpt-model-6",
    ]
    .map(String::from)
    .to_vec();
    let values = secret_values(env, &args);
    for wanted in [
        "live-value-1",
        "pw-value-2",
        "flag-value-3",
        "eq-value-4",
        "quoted-value-5",
    ] {
        assert!(
            values.iter().any(|v| v == wanted),
            "{wanted} missing from {values:?}"
        );
    }
    assert!(
        !values
            .iter()
            .any(|v| v == "/root/home" || v == "gpt-model-6"),
        "{values:?}"
    );
    let masked = redact_with(
        "echo: OPENAI_API_KEY is live-value-1 and argv flag-value-3",
        &values,
    );
    assert!(
        !masked.contains("live-value-1") && !masked.contains("flag-value-3"),
        "{masked}"
    );
}
