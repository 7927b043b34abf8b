//! One answer to "what is installed" (issue 39): `agent_api_builtin::discover`, `agent-api doctor`
//! and `agent-api run`'s choice of agent find the same CLIs in the same environment, and the test
//! bench's pinned copies are not taken for installed ones.
//!
//! One test in this file: it sets this process's environment for the library call.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn fake_cli(dir: &Path, name: &str, version: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\necho '{version}'\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[tokio::test]
async fn doctor_run_and_the_library_find_the_same_agents() {
    let (path_dir, elsewhere, bench) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    fake_cli(path_dir.path(), "codex", "codex-cli 0.1.0");
    fake_cli(path_dir.path(), "opencode", "1.2.3");
    let gemini = fake_cli(elsewhere.path(), "gemini-dev", "0.61.0");
    // A bench install of Claude Code: pinned for the tests, not an installation.
    let bench_bin = bench.path().join("2026-01-01/node_modules/.bin");
    std::fs::create_dir_all(&bench_bin).unwrap();
    fake_cli(&bench_bin, "claude", "2.1.197 (Claude Code)");
    let search_path = format!("{}:/usr/bin:/bin", path_dir.path().display());
    let env = [
        ("PATH", search_path.as_str()),
        ("AGENT_API_GEMINI_BIN", gemini.to_str().unwrap()),
        ("AGENT_API_CLI_DIR", bench.path().to_str().unwrap()),
    ];
    let agent_api = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agent-api"));
        command
            .args(args)
            .envs(env)
            .env_remove("AGENT_API_CLAUDE_CODE_BIN")
            .env_remove("AGENT_API_CODEX_BIN");
        command.output().unwrap()
    };
    for (key, value) in env {
        std::env::set_var(key, value);
    }
    for kind in ["CLAUDE_CODE", "CODEX", "OPENCODE", "QWEN", "AMP"] {
        std::env::remove_var(format!("AGENT_API_{kind}_BIN"));
    }

    let found = agent_api_builtin::discover().await;
    let kinds: Vec<String> = found.iter().map(|f| f.kind.to_string()).collect();
    assert_eq!(
        kinds,
        ["codex", "opencode", "gemini"],
        "in the order run prefers them: {found:?}"
    );
    assert_eq!(found[2].binary, gemini, "the variable's binary");
    assert!(
        matches!(&found[2].found_by, agent_api::kit::detect::FoundBy::EnvVar(v) if v == "AGENT_API_GEMINI_BIN"),
        "{found:?}"
    );
    assert!(
        matches!(found[0].found_by, agent_api::kit::detect::FoundBy::Path),
        "{found:?}"
    );
    assert_eq!(
        (found[0].version.as_deref(), found[2].supported),
        (Some("0.1.0"), true)
    );

    let doctor = String::from_utf8_lossy(&agent_api(&["doctor"]).stdout).into_owned();
    let rows: Vec<&str> = doctor.lines().collect();
    let installed: Vec<&str> = rows
        .iter()
        .filter(|r| r.contains(" installed ") && !r.contains("not installed"))
        .map(|r| r.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        installed, kinds,
        "doctor lists what the library finds:\n{doctor}"
    );
    for kind in [
        "scripted",
        "claude_code",
        "codex",
        "opencode",
        "gemini",
        "qwen",
        "amp",
    ] {
        assert_eq!(
            rows.iter()
                .filter(|r| r.split_whitespace().next() == Some(kind))
                .count(),
            1,
            "one row per agent:\n{doctor}"
        );
    }
    assert!(
        rows.iter().any(|r| r.starts_with("claude_code")
            && r.contains("not installed")
            && r.contains("test bench")),
        "{doctor}"
    );

    let run = agent_api(&["run", "--timeout", "5", "hi"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("agent-api: using codex ("),
        "run picks the first the library lists: {stderr}"
    );
}
