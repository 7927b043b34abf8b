//! Every backend puts the command (and directory) of a shell tool call on the tool items and in
//! the tools facet, typed, from its own recordings: callers never parse argument JSON (issue 22).

use std::path::Path;

use agent_api::kit::replay::{replay_file, Replay};
use agent_api::run::RunSummary;
use agent_api::run::ToolCalls;
use agent_api::universal::{ItemKind, UniversalItem};
use agent_api::{AgentBackend, PermissionPolicy, RunRequest};
use agent_api_acp::{AcpBackend, AcpConfig};
use agent_api_amp::{AmpBackend, AmpConfig};
use agent_api_claude_code::{ClaudeCodeBackend, ClaudeCodeConfig};
use agent_api_codex::{CodexBackend, CodexConfig};
use agent_api_conformance::{record, RunRecord};
use agent_api_gemini::GeminiBackend;
use agent_api_opencode::{OpenCodeBackend, OpenCodeConfig};
use agent_api_scripted::{ScriptedBackend, ScriptedOptions};

const ECHO: &str = "echo hi > out.txt && cat out.txt";

async fn replay(backend: &dyn Replay, fixture: &str) -> RunRecord {
    let path = agent_bench::fixtures_dir().join(fixture);
    assert!(
        Path::new(&path).is_file(),
        "missing fixture {}",
        path.display()
    );
    record(
        replay_file(backend, &path, true)
            .await
            .expect("replay starts"),
    )
    .await
}

fn shell_items(run: &RunRecord, kind: ItemKind) -> Vec<UniversalItem> {
    let shell = |i: &&UniversalItem| {
        i.kind == kind
            && i.tool
                .as_ref()
                .is_some_and(|t| t.kind == "command_execution")
    };
    run.universal
        .iter()
        .filter_map(|e| e.completed_item())
        .filter(shell)
        .cloned()
        .collect()
}

/// The shell call's command (and `cwd`, when given) is on its `tool_call` item, its `tool_result`
/// item, every tools facet of a shell event, and the run summary.
fn assert_command(fixture: &str, run: &RunRecord, command: &str, cwd: Option<&str>) {
    for kind in [ItemKind::ToolCall, ItemKind::ToolResult] {
        let items = shell_items(run, kind);
        assert!(
            !items.is_empty(),
            "{fixture}: no completed shell {kind:?} item"
        );
        for item in items {
            let meta = item.tool.as_ref().unwrap();
            assert_eq!(
                meta.command.as_deref(),
                Some(command),
                "{fixture}: {kind:?} item command"
            );
            if cwd.is_some() {
                assert_eq!(meta.cwd.as_deref(), cwd, "{fixture}: {kind:?} item cwd");
            }
        }
    }
    assert!(
        run.tools_structured,
        "{fixture}: the backend advertises the tools facet"
    );
    let facets: Vec<_> = run
        .wrapper
        .iter()
        .filter_map(|e| e.tools_facet())
        .filter(|f| f.kind == "command_execution")
        .collect();
    assert!(!facets.is_empty(), "{fixture}: no shell tools facet");
    assert!(
        facets.iter().any(|f| f.command.as_deref() == Some(command)),
        "{fixture}: no facet names the command: {facets:?}"
    );
    let summary = RunSummary::from_events(&run.universal, run.completion.as_ref().ok());
    let call = summary
        .tool_calls
        .iter()
        .find(|c| c.kind.as_deref() == Some("command_execution"))
        .expect("a shell call in the summary");
    assert_eq!(
        call.command.as_deref(),
        Some(command),
        "{fixture}: summary command"
    );
    // The wrapper stream folds to the same call as the universal one.
    let mut from_wrapper = ToolCalls::new();
    for event in &run.wrapper {
        from_wrapper.push_wrapper(event);
    }
    let joined = from_wrapper
        .get(&call.call_id)
        .unwrap_or_else(|| panic!("{fixture}: the wrapper fold has no {}", call.call_id));
    assert_eq!(
        (
            joined.command.as_deref(),
            joined.exit_code,
            joined.status,
            joined.category
        ),
        (
            call.command.as_deref(),
            call.exit_code,
            call.status,
            call.category
        ),
        "{fixture}: wrapper fold"
    );
}

#[tokio::test]
async fn scripted_agent_names_its_command() {
    let options = ScriptedOptions::scenario("permission").delay_ms(0);
    let request = RunRequest::new("hi")
        .with_options(&options)
        .with_permissions(PermissionPolicy::ApproveAll);
    let run = record(ScriptedBackend::new().run(request).await.unwrap()).await;
    assert_command("scripted", &run, "echo hi", None);
}

#[tokio::test]
async fn claude_code_names_the_bash_command() {
    let backend = ClaudeCodeBackend::new(ClaudeCodeConfig::default());
    let run = replay(&backend, "claude_code/print/bash_allowed.stdout.jsonl").await;
    assert_command("claude bash_allowed", &run, ECHO, None);
}

#[tokio::test]
async fn codex_names_the_command_and_cwd_in_both_interfaces() {
    let backend = CodexBackend::new(CodexConfig::default());
    let wrapped = format!("/bin/bash -lc '{ECHO}'");
    let run = replay(&backend, "codex/app_server/shell_approve.session.jsonl").await;
    assert_command(
        "codex app_server",
        &run,
        &wrapped,
        Some("/home/dev/work/appserver_shell_approve"),
    );
    let run = replay(&backend, "codex/exec/shell_bypass.stdout.jsonl").await;
    assert_command("codex exec", &run, &wrapped, None);
    let exit = shell_items(&run, ItemKind::ToolResult)[0]
        .tool
        .as_ref()
        .unwrap()
        .exit_code;
    assert_eq!(exit, Some(0), "codex exec: the exit code is typed too");
}

#[tokio::test]
async fn opencode_names_the_command_in_every_interface() {
    let backend = OpenCodeBackend::new(OpenCodeConfig::default());
    let run = replay(&backend, "opencode/run/shell.stdout.jsonl").await;
    assert_command("opencode run", &run, ECHO, None);
    let run = replay(
        &backend,
        "opencode/serve/shell_permission_once.session.jsonl",
    )
    .await;
    assert_command("opencode serve", &run, ECHO, None);
}

#[tokio::test]
async fn acp_agents_name_the_command() {
    let gemini = GeminiBackend::new(AcpConfig::default());
    let run = replay(&gemini, "gemini/acp/bash_allow.session.jsonl").await;
    assert_command("gemini acp", &run, ECHO, None);
    let run = replay(&gemini, "gemini/headless/bash_yolo.stdout.jsonl").await;
    assert_command("gemini headless", &run, ECHO, None);
    // OpenCode over ACP names the command only once the call runs: the result item has it.
    let run = replay(
        &AcpBackend::new(AcpConfig::default()),
        "opencode/acp/shell_allow_once.session.jsonl",
    )
    .await;
    let result = &shell_items(&run, ItemKind::ToolResult)[0];
    let meta = result.tool.as_ref().unwrap();
    assert_eq!(
        meta.command.as_deref(),
        Some(ECHO),
        "opencode acp result command"
    );
    assert_eq!(
        meta.cwd.as_deref(),
        Some("/home/dev/work/ocacp_shell_allow_once"),
        "opencode acp result cwd"
    );
}

#[tokio::test]
async fn amp_names_the_cmd_and_cwd() {
    let run = replay(
        &AmpBackend::new(AmpConfig::default()),
        "amp/shell.stdout.jsonl",
    )
    .await;
    assert_command("amp shell", &run, "echo hello", Some("/work/project"));
}
