//! `opencode run --format json` end to end: the real pinned opencode 1.18.33 against the bench's
//! scripted model server. Without the CLI these fail with install instructions, unless
//! AGENT_API_E2E=skip.

mod common;

use agent_api::run::Channel;
use agent_api::universal::{ContentPart, ItemKind, ItemStatus};
use agent_api::{PermissionDecision, RunRequest, SessionSelector};
use agent_api_conformance::assert_conformant;
use agent_api_opencode::Interface;
use common::*;

#[tokio::test]
async fn run_text_reasoning_and_usage() {
    let Some((_server, sandbox)) = setup("reasoning").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox, Interface::Run),
        RunRequest::new("think then say hi"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    let done = run.completion.as_ref().expect("the run completes");
    assert_eq!(done.final_text.as_deref(), Some("Hello after thinking"));
    assert!(done
        .native_session_id
        .as_deref()
        .is_some_and(|id| id.starts_with("ses_")));
    assert!(done.usage.as_ref().and_then(|u| u.output_tokens).is_some());
    assert!(
        run.wrapper.iter().any(|e| e.is_on(&Channel::Reasoning)),
        "{:?}",
        run.types()
    );
}

/// Linux refuses one argv string over 128 KiB (`MAX_ARG_STRLEN`); on stdin the prompt has no limit.
#[tokio::test]
async fn run_takes_its_prompt_on_stdin_so_a_prompt_past_the_argv_limit_reaches_the_model_whole() {
    let Some((server, sandbox)) = setup("text").await else {
        return;
    };
    let prompt = format!(
        "{}END-OF-LONG-PROMPT",
        "context line\n".repeat(200 * 1024 / 13)
    );
    assert!(prompt.len() > 128 * 1024);
    let run = drive(
        &backend(&sandbox, Interface::Run),
        RunRequest::new(prompt),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    let done = run.completion.as_ref().expect("the run completes");
    assert_eq!(done.final_text.as_deref(), Some("Hello from mock"));
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.body.to_string().contains("END-OF-LONG-PROMPT")),
        "the whole prompt reached the model"
    );
    wait_until_gone(&sandbox.cwd).await;
}

#[tokio::test]
async fn run_shell_runs_with_exit_code_and_output_size() {
    let Some((_server, sandbox)) = setup("shell").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox, Interface::Run),
        RunRequest::new("run the command"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert_eq!(
        std::fs::read_to_string(sandbox.cwd.join("out.txt"))
            .unwrap()
            .trim(),
        "hi"
    );
    let result = &run.completed_items(ItemKind::ToolResult)[0];
    let tool = result.tool.as_ref().expect("tools facet");
    assert_eq!(
        (tool.kind.as_str(), tool.exit_code, tool.bytes.stdout),
        ("command_execution", Some(0), 3)
    );
    assert_eq!(
        tool.command.as_deref(),
        Some(agent_bench::scenario::SHELL_COMMAND),
        "the typed command"
    );
}

#[tokio::test]
async fn run_file_write_carries_its_diff() {
    let Some((_server, sandbox)) = setup("write_edit").await else {
        return;
    };
    let run = drive(
        &backend(&sandbox, Interface::Run),
        RunRequest::new("create the file"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&run);
    assert!(run.completion.is_ok(), "{:?}", run.completion);
    assert!(sandbox.cwd.join("created.txt").exists());
    let results = run.completed_items(ItemKind::ToolResult);
    let diffs: Vec<&String> = results
        .iter()
        .flat_map(|i| &i.content)
        .filter_map(|p| match p {
            ContentPart::FileRef {
                diff: Some(diff), ..
            } => Some(diff),
            _ => None,
        })
        .collect();
    assert!(!diffs.is_empty(), "a file ref with a diff");
    assert!(results.iter().all(|i| i.status == ItemStatus::Completed));
    assert!(results
        .iter()
        .any(|i| i.tool.as_ref().is_some_and(|t| t.bytes.diff > 0)));
}

#[tokio::test]
async fn run_model_api_401_500_and_overload_end_with_one_typed_terminal_error() {
    model_api_errors_are_typed(Interface::Run).await;
}

#[tokio::test]
async fn run_resumes_continues_and_forks_its_session() {
    let Some((_server, sandbox)) = setup("echo").await else {
        return;
    };
    let backend = backend(&sandbox, Interface::Run);
    let first = drive(
        &backend,
        RunRequest::new("first turn"),
        PermissionDecision::Allow,
        false,
    )
    .await;
    let id = first
        .completion
        .as_ref()
        .unwrap()
        .native_session_id
        .clone()
        .expect("a session id");
    let second = drive(
        &backend,
        RunRequest::new("second turn").with_session(SessionSelector::Resume(id.clone().into())),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&second);
    let done = second.completion.as_ref().unwrap();
    assert_eq!(done.native_session_id.as_deref(), Some(id.as_str()));
    assert!(
        done.final_text
            .as_deref()
            .is_some_and(|t| t.contains("user_turns=2")),
        "{:?}",
        done.final_text
    );
    let last = drive(
        &backend,
        RunRequest::new("third turn").with_session(SessionSelector::ResumeLast),
        PermissionDecision::Allow,
        false,
    )
    .await;
    let done = last.completion.as_ref().unwrap();
    assert_eq!(
        done.native_session_id.as_deref(),
        Some(id.as_str()),
        "the last session"
    );
    assert!(
        done.final_text
            .as_deref()
            .is_some_and(|t| t.contains("user_turns=3")),
        "{:?}",
        done.final_text
    );
    let fork = drive(
        &backend,
        RunRequest::new("fourth turn").with_session(SessionSelector::Fork(id.clone().into())),
        PermissionDecision::Allow,
        false,
    )
    .await;
    assert_conformant(&fork);
    let done = fork.completion.as_ref().unwrap();
    assert!(
        done.native_session_id.as_deref().is_some_and(|f| f != id),
        "a new session: {:?}",
        done.native_session_id
    );
    assert!(
        done.final_text
            .as_deref()
            .is_some_and(|t| t.contains("user_turns=4")),
        "{:?}",
        done.final_text
    );
}
