//! The end-to-end gate never skips silently: a missing CLI fails the test with the install command,
//! unless `AGENT_API_E2E=skip` is set, which turns it into a loud skip.
//!
//! One test in its own binary, because it changes process-wide environment variables.

use agent_bench::{e2e_enabled_or_explain, Cli};

#[test]
fn missing_cli_panics_with_install_hint_unless_skip_is_set() {
    let empty = tempfile::tempdir().unwrap();
    // SAFETY (edition 2021: safe fn): this binary has no other test thread reading the environment.
    std::env::set_var("AGENT_API_CLI_DIR", empty.path());
    std::env::remove_var("AGENT_API_E2E");

    let panic = std::panic::catch_unwind(|| e2e_enabled_or_explain(Cli::Codex))
        .expect_err("must not skip silently");
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        message.contains("bash tests/bench/install-clis.sh"),
        "{message}"
    );
    assert!(message.contains("AGENT_API_E2E=skip"), "{message}");

    std::env::set_var("AGENT_API_E2E", "skip");
    assert_eq!(e2e_enabled_or_explain(Cli::Codex), None);

    std::env::set_var("AGENT_API_E2E", "1");
    assert!(
        std::panic::catch_unwind(|| e2e_enabled_or_explain(Cli::Gemini)).is_err(),
        "only `skip` skips"
    );
}
