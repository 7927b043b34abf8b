//! The harness: sandboxes are private and point every CLI only at the loopback model server; children run
//! in their own process group with nothing inherited; `for_resume` keeps HOME and the working directory.

use std::path::PathBuf;
use std::time::Duration;

use agent_bench::{e2e_enabled_or_explain, process, Cli, ModelServer, Sandbox};
use serde_json::Value;

/// A sandbox whose "CLI" is `/usr/bin/env`, so a run prints the child's environment.
fn env_sandbox(cli: Cli, server: &ModelServer, scenario: &str) -> Sandbox {
    Sandbox::with_program(cli, PathBuf::from("/usr/bin/env"), server, scenario).unwrap()
}

#[tokio::test]
async fn every_url_in_the_environment_and_flags_points_at_the_loopback_server() {
    let server = ModelServer::start(None).await.unwrap();
    for cli in Cli::ALL {
        let sandbox = env_sandbox(cli, &server, "shell");
        let origin = format!("http://{}/", server.addr());
        let texts = sandbox
            .env
            .iter()
            .map(|(_, v)| v)
            .chain(sandbox.base_args.iter());
        let mut urls = 0;
        for text in texts {
            for (at, _) in text.match_indices("http") {
                urls += 1;
                assert!(
                    text[at..].starts_with(&origin),
                    "{cli}: {text} leaves loopback"
                );
            }
        }
        assert!(urls >= 1, "{cli}: no base URL configured");
        assert!(
            sandbox.base_url.ends_with("/s/shell"),
            "{}",
            sandbox.base_url
        );
    }
}

#[tokio::test]
async fn children_get_only_the_sandbox_environment_and_private_folders() {
    std::env::set_var("AGENT_BENCH_LEAK_CHECK", "leaked");
    let server = ModelServer::start(None).await.unwrap();
    let sandbox = env_sandbox(Cli::ClaudeCode, &server, "text");
    let out = process::run(sandbox.command(&[]), "env", Duration::from_secs(10))
        .await
        .unwrap();
    let lines: Vec<&str> = out.stdout.iter().map(|(_, l)| l.as_str()).collect();
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("AGENT_BENCH_LEAK_CHECK=")),
        "parent variable leaked"
    );
    let var = |k: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{k} unset"))
    };
    let home = sandbox.home.display().to_string();
    assert_eq!(var("HOME"), home);
    for k in [
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
    ] {
        assert!(var(k).starts_with(&home), "{k} outside HOME");
    }
    assert_eq!(var("PWD"), sandbox.cwd.display().to_string());
    assert_eq!(var("ANTHROPIC_BASE_URL"), sandbox.base_url);
    assert!(!var("TMPDIR").starts_with("/tmp"), "TMPDIR is shared");
    assert!(sandbox.cwd.starts_with(&sandbox.home) && sandbox.cwd.is_dir());
}

#[tokio::test]
async fn children_run_in_their_own_process_group_with_stdin_closed() {
    let server = ModelServer::start(None).await.unwrap();
    let sandbox =
        Sandbox::with_program(Cli::ClaudeCode, PathBuf::from("/bin/sh"), &server, "text").unwrap();
    let script = "ps -o pid=,pgid= -p $$; cat; echo eof";
    let out = process::run(
        sandbox.command(&["-c", script]),
        "sh",
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let fields: Vec<&str> = out.stdout[0].1.split_whitespace().collect();
    assert_eq!(
        fields[0], fields[1],
        "the child leads its own process group"
    );
    // SAFETY: getpgrp has no preconditions.
    let ours = unsafe { libc::getpgrp() };
    assert_ne!(fields[1], ours.to_string(), "not the test's group");
    assert_eq!(
        out.stdout[1].1, "eof",
        "stdin is /dev/null, so cat ends at once"
    );
}

#[tokio::test]
async fn gemini_and_qwen_settings_are_written_before_the_first_run() {
    let server = ModelServer::start(None).await.unwrap();
    let gemini = env_sandbox(Cli::Gemini, &server, "text");
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(gemini.home.join(".gemini/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        settings["security"]["auth"]["selectedType"],
        "gemini-api-key"
    );
    assert_eq!(settings["general"]["maxAttempts"], 1);
    assert!(gemini.base_args.iter().any(|a| a == "--skip-trust"));
    let qwen = env_sandbox(Cli::Qwen, &server, "text");
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(qwen.home.join(".qwen/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(settings["memory"]["enableManagedAutoMemory"], false);
}

#[tokio::test]
async fn for_resume_keeps_home_and_cwd_and_points_at_the_new_scenario() {
    let server = ModelServer::start(None).await.unwrap();
    let first = env_sandbox(Cli::Codex, &server, "text");
    let second = first.for_resume("echo.turn-2");
    assert_eq!((&first.home, &first.cwd), (&second.home, &second.cwd));
    assert!(second.base_url.ends_with("/s/echo.turn-2"));
    assert!(
        second
            .base_args
            .iter()
            .any(|a| a.contains("/s/echo.turn-2/v1")),
        "{:?}",
        second.base_args
    );
    assert!(!second.base_args.iter().any(|a| a.contains("/s/text/")));
    let root = first.home.parent().unwrap().to_path_buf();
    drop(first);
    assert!(
        root.exists(),
        "the folders live while a resumed sandbox does"
    );
    drop(second);
    assert!(!root.exists(), "the folders go with the last sandbox");
}

#[tokio::test]
async fn claude_code_resume_sees_the_earlier_turn() {
    let Some(_claude) = e2e_enabled_or_explain(Cli::ClaudeCode) else {
        return;
    };
    let server = ModelServer::start(None).await.unwrap();
    let first = Sandbox::new(Cli::ClaudeCode, &server, "echo.turn-1").unwrap();
    let id = "11111111-2222-4333-8444-555555555555";
    let turn = |sandbox: &Sandbox, prompt: &str, session_flag: &str| {
        let args = [
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            session_flag,
            id,
        ];
        process::run(sandbox.command(&args), "claude", Duration::from_secs(120))
    };
    let out = turn(&first, "remember the word", "--session-id")
        .await
        .unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    let second = first.for_resume("echo.turn-2");
    let out = turn(&second, "what was the word", "--resume")
        .await
        .unwrap();
    let result = out
        .json_lines()
        .into_iter()
        .find(|e| e["type"] == "result")
        .expect("result event");
    assert_eq!(
        result["result"],
        "echo: user_turns=2 messages=3 last=what was the word"
    );
    assert_eq!(result["session_id"], id);
    let tags: Vec<_> = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.tag.clone())
        .collect();
    assert_eq!(
        tags,
        [Some("turn-1".to_string()), Some("turn-2".to_string())]
    );
}
