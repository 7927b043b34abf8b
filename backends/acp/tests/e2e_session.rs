//! Warm sessions (`spec/run-protocol.md` §8) end to end on the real, pinned Gemini CLI and Qwen
//! Code against the bench's `echo` model: every turn a `session/prompt` on one ACP session of one
//! live process (and, for Qwen, a user message on one live two-way stream-json process).
//! Qwen's first user message is its own environment context, so its model counts one more user
//! turn; its stream-json interface cannot survive an interrupt (the cancelled turn ends the
//! session). Without the CLIs these fail with install instructions, unless AGENT_API_E2E=skip.

use std::time::Duration;

use agent_api::{AgentBackend, RunRequest};
use agent_api_acp::AcpConfig;
use agent_api_conformance::session::e2e;
use agent_api_gemini::GeminiBackend;
use agent_api_qwen::QwenBackend;
use agent_api_qwen::{QwenInterface, QwenOptions};
use agent_bench::process::processes_in;
use agent_bench::sandbox::GEMINI_MODEL;
use agent_bench::{Cli, ModelServer, Sandbox};

async fn bench(cli: Cli) -> Option<(ModelServer, Sandbox)> {
    agent_bench::e2e_bench_or_explain(cli, "echo").await
}

/// The sandbox's CLI with its environment.
fn config(sandbox: &Sandbox) -> AcpConfig {
    sandbox.env.iter().fold(
        AcpConfig::with_binary(&sandbox.program).working_dir(&sandbox.cwd),
        |config, (k, v)| config.env(k, v),
    )
}

/// The sandbox's CLI with its environment, as kind `gemini` or `qwen`.
fn backend(sandbox: &Sandbox, cli: Cli) -> std::sync::Arc<dyn AgentBackend> {
    let config = config(sandbox);
    match cli {
        Cli::Gemini => std::sync::Arc::new(GeminiBackend::new(config)),
        _ => std::sync::Arc::new(QwenBackend::new(config)),
    }
}

fn template(cli: Cli) -> RunRequest {
    let request = RunRequest::new("").with_timeout(Duration::from_secs(150));
    match cli {
        Cli::Gemini => request.with_model(GEMINI_MODEL),
        _ => request,
    }
}

fn stream_json() -> RunRequest {
    template(Cli::Qwen).with_options(&QwenOptions::default().interface(QwenInterface::StreamJson))
}

/// Qwen Code opens every conversation with a user message of its own (the environment context).
const QWEN_CONTEXT_TURNS: usize = 1;

macro_rules! session_tests {
    ($cli:expr, $template:expr, $context:expr, $cancel_check:path, $three:ident, $cancel:ident, $killed:ident, $dropped:ident) => {
        #[tokio::test]
        async fn $three() {
            let Some((_server, sandbox)) = bench($cli).await else {
                return;
            };
            e2e::three_turns_after_context(
                &*backend(&sandbox, $cli),
                $template,
                &|| processes_in(&sandbox.cwd),
                $context,
            )
            .await;
        }

        #[tokio::test]
        async fn $cancel() {
            let Some((_server, sandbox)) = bench($cli).await else {
                return;
            };
            $cancel_check(&*backend(&sandbox, $cli), $template, &|| {
                processes_in(&sandbox.cwd)
            })
            .await;
        }

        #[tokio::test]
        async fn $killed() {
            let Some((_server, sandbox)) = bench($cli).await else {
                return;
            };
            e2e::killed_between_turns(&*backend(&sandbox, $cli), $template, &|| {
                processes_in(&sandbox.cwd)
            })
            .await;
        }

        #[tokio::test]
        async fn $dropped() {
            let Some((_server, sandbox)) = bench($cli).await else {
                return;
            };
            e2e::dropped_leaves_no_process(&*backend(&sandbox, $cli), $template, &|| {
                processes_in(&sandbox.cwd)
            })
            .await;
        }
    };
}

session_tests!(
    Cli::Gemini,
    template(Cli::Gemini),
    0,
    e2e::cancelled_second_turn_then_a_good_third,
    gemini_acp_three_turns_on_one_process_the_model_sees_one_two_three_user_turns,
    gemini_acp_a_cancelled_second_turn_then_a_good_third,
    gemini_acp_killed_between_turns_closes_the_session,
    gemini_acp_dropped_session_leaves_no_process
);

session_tests!(
    Cli::Qwen,
    template(Cli::Qwen),
    QWEN_CONTEXT_TURNS,
    e2e::cancelled_second_turn_then_a_good_third,
    qwen_acp_three_turns_on_one_process_the_model_sees_one_two_three_user_turns,
    qwen_acp_a_cancelled_second_turn_then_a_good_third,
    qwen_acp_killed_between_turns_closes_the_session,
    qwen_acp_dropped_session_leaves_no_process
);

session_tests!(
    Cli::Qwen,
    stream_json(),
    QWEN_CONTEXT_TURNS,
    // Qwen 0.15.10's stream-json interrupt aborts the session's one AbortController, which its
    // input loop then stops on: the process exits (130) and the session with it.
    e2e::cancel_ends_the_session,
    qwen_stream_json_three_turns_on_one_process_the_model_sees_one_two_three_user_turns,
    qwen_stream_json_cancel_ends_the_session,
    qwen_stream_json_killed_between_turns_closes_the_session,
    qwen_stream_json_dropped_session_leaves_no_process
);

/// A session on a one-way interface (Gemini headless, Qwen print) runs each turn as a process of
/// its own that resumes the previous turn's session: the model still sees every earlier turn.
async fn one_way_session_resumes_per_turn(cli: Cli, template: RunRequest) {
    let Some((_server, sandbox)) = bench(cli).await else {
        return;
    };
    let mut session = backend(&sandbox, cli).open_session(template).await.unwrap();
    assert!(!session.is_warm() && session.process_id().is_none());
    let context = if cli == Cli::Qwen {
        QWEN_CONTEXT_TURNS
    } else {
        0
    };
    let mut record = agent_api_conformance::session::SessionRecord::default();
    for (n, prompt) in ["first", "second"].into_iter().enumerate() {
        let done = record.turn(&mut session, prompt).await.as_ref().unwrap();
        let text = done.final_text.clone().unwrap_or_default();
        assert!(
            text.starts_with(&format!("echo: user_turns={} ", context + n + 1))
                && text.ends_with(prompt),
            "{text}"
        );
    }
    record.trailing = session.close().await.unwrap();
    agent_api_conformance::session::assert_session_conformant(&record);
    assert!(processes_in(&sandbox.cwd).is_empty());
}

#[tokio::test]
async fn gemini_headless_session_resumes_per_turn() {
    let options = agent_api_gemini::GeminiOptions::default()
        .interface(agent_api_gemini::GeminiInterface::Headless);
    one_way_session_resumes_per_turn(Cli::Gemini, template(Cli::Gemini).with_options(&options))
        .await;
}

#[tokio::test]
async fn qwen_print_session_resumes_per_turn() {
    let options = QwenOptions::default().interface(QwenInterface::Print);
    one_way_session_resumes_per_turn(Cli::Qwen, template(Cli::Qwen).with_options(&options)).await;
}

/// A warm session switches to plan mode and back between turns: ACP `session/set_mode` with
/// the agent's own id (Gemini CLI, Qwen Code), Qwen's stream-json `set_permission_mode`.
async fn switches_to_plan_and_back(cli: Cli, template: RunRequest) {
    let Some((_server, sandbox)) = agent_bench::e2e_bench_or_explain(cli, "write_edit").await
    else {
        return;
    };
    let template = template.with_permissions(agent_api::PermissionPolicy::ApproveAll);
    e2e::switches_to_plan_and_back(&*backend(&sandbox, cli), template, &sandbox.cwd, &|| {
        processes_in(&sandbox.cwd)
    })
    .await;
}

#[tokio::test]
async fn gemini_acp_a_warm_session_switches_to_plan_and_back() {
    switches_to_plan_and_back(Cli::Gemini, template(Cli::Gemini)).await;
}

#[tokio::test]
async fn qwen_acp_a_warm_session_switches_to_plan_and_back() {
    switches_to_plan_and_back(Cli::Qwen, template(Cli::Qwen)).await;
}

#[tokio::test]
async fn qwen_stream_json_a_warm_session_switches_to_plan_and_back() {
    switches_to_plan_and_back(Cli::Qwen, stream_json()).await;
}

/// The generic `acp` kind switches any ACP agent that advertised modes (here Gemini CLI run as
/// a plain command line) with the agent's own ids, once its session has said them.
#[tokio::test]
async fn generic_acp_a_warm_session_switches_to_plan_and_back() {
    let Some((_server, sandbox)) =
        agent_bench::e2e_bench_or_explain(Cli::Gemini, "write_edit").await
    else {
        return;
    };
    let config = config(&sandbox);
    let command = ["--acp", "--skip-trust", "-m", GEMINI_MODEL].map(String::from);
    let backend = agent_api_acp::AcpBackend::new(config.args(command));
    // The model is on the command line (the generic kind takes none of its own); Gemini writes
    // its files itself (it creates a file by reading it first, which only its own client knows).
    let options = agent_api_acp::AcpOptions::default().fs(false);
    let template = template(Cli::Qwen)
        .with_permissions(agent_api::PermissionPolicy::ApproveAll)
        .with_options(&options);
    e2e::switches_to_plan_and_back_after_a_turn(&backend, template, &sandbox.cwd, &|| {
        processes_in(&sandbox.cwd)
    })
    .await;
}

/// The generic `acp` kind also switches an agent that advertises its modes as the values of a
/// config option of category `mode` (OpenCode's `mode`, build or plan): `session/set_config_option`.
/// OpenCode's own plan agent then refuses the edit before anything is asked, and the model is
/// given its plan-mode instructions; back in build mode the file is written.
#[tokio::test]
async fn generic_acp_switches_an_agent_whose_modes_are_a_config_option() {
    use agent_api::universal::UniversalEventBody;
    let Some((server, sandbox)) =
        agent_bench::e2e_bench_or_explain(Cli::OpenCode, "write_edit").await
    else {
        return;
    };
    let config = config(&sandbox);
    let command = [
        "acp".to_string(),
        "--cwd".to_string(),
        sandbox.cwd.display().to_string(),
    ];
    let backend = agent_api_acp::AcpBackend::new(config.args(command));
    let template = RunRequest::new("")
        .with_timeout(std::time::Duration::from_secs(120))
        .with_permissions(agent_api::PermissionPolicy::ApproveAll)
        .with_options(&agent_api_acp::AcpOptions::default().fs(false));
    let mut session = backend.open_session(template).await.unwrap();
    let mut record = agent_api_conformance::session::SessionRecord::default();
    assert!(
        record.turn(&mut session, "create the file").await.is_ok(),
        "{:?}",
        record.turns[0].completion
    );
    std::fs::remove_file(sandbox.cwd.join("created.txt")).expect("build mode wrote the file");
    let before = server.requests().len();
    session
        .set_mode(agent_api::request::AgentMode::Plan)
        .await
        .unwrap();
    assert!(
        record.turn(&mut session, "create the file").await.is_ok(),
        "{:?}",
        record.turns[1].completion
    );
    let asked = record.turns[1]
        .universal
        .iter()
        .filter(|e| matches!(e.body, UniversalEventBody::PermissionRequested(_)))
        .count();
    assert_eq!(
        asked, 0,
        "OpenCode's plan agent asked for the edit instead of refusing it"
    );
    let reminded = |from: usize, to: usize| {
        server.requests()[from..to].iter().any(|r| {
            r.body
                .to_string()
                .to_lowercase()
                .contains("plan mode active")
        })
    };
    assert!(
        !reminded(0, before),
        "the build turn had plan mode's instructions"
    );
    assert!(
        reminded(before, server.requests().len()),
        "OpenCode did not give the model its plan mode's instructions"
    );
    assert!(
        !sandbox.cwd.join("created.txt").exists(),
        "plan mode wrote the file"
    );
    session
        .set_mode(agent_api::request::AgentMode::Default)
        .await
        .unwrap();
    assert!(
        record.turn(&mut session, "create the file").await.is_ok(),
        "{:?}",
        record.turns[2].completion
    );
    assert!(
        sandbox.cwd.join("created.txt").exists(),
        "build mode again wrote no file"
    );
    record.trailing = session.close().await.unwrap();
}
