//! A prompt image reaches the model on every real CLI that advertises `agent_api.input.images`, on
//! each interface that carries one: Claude Code (two-way stream-json), Codex (app-server and exec),
//! Gemini and Qwen over ACP, OpenCode (`run`, `serve`, `acp`). Where the CLI reads the file itself
//! (Codex, `opencode run`) the run also goes through bubblewrap, whose fresh `/tmp` shows the agent
//! only the files the run binds. An interface that cannot carry an image refuses it before spawn.

mod remote;

use std::path::{Path, PathBuf};

use agent_api::{AgentBackend, AgentError, PermissionDecision, RunRequest};
use agent_api_claude_code::{ClaudeCodeOptions, Mode as ClaudeMode};
use agent_api_codex::{CodexOptions, Mode as CodexMode};
use agent_api_gemini::{GeminiInterface, GeminiOptions};
use agent_api_opencode::{Interface, OpenCodeBackend, OpenCodeConfig};
use agent_bench::images::{requests_with_image, write_png};
use agent_bench::{Cli, ModelServer, Sandbox};
use remote::{backend, bench, drive, request, Fault, Place};

/// The image in a directory of its own under /tmp (outside the sandbox's working directory).
fn image() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("agent-api-image")
        .tempdir_in("/tmp")
        .unwrap();
    let path = write_png(dir.path());
    (dir, path)
}

fn with_image(request: RunRequest, path: &Path) -> RunRequest {
    let mut request = request;
    request.prompt.images.push(path.to_path_buf());
    request
}

/// Runs "say hello" with the image on `backend` through `place` and checks that it completed with
/// the scripted answer and that the model saw the image.
async fn assert_image_reaches_model(
    what: &str,
    backend: &dyn AgentBackend,
    server: &ModelServer,
    place: &Place,
    options: fn(RunRequest) -> RunRequest,
) {
    let (_dir, path) = image();
    let run = drive(
        backend,
        place,
        options(with_image(request("describe the image"), &path)),
        PermissionDecision::Allow,
        Fault::None,
    )
    .await;
    assert!(run.completion.is_ok(), "{what}: {:?}", run.completion);
    assert_eq!(run.assistant_text(), "Hello from mock", "{what}");
    assert!(
        requests_with_image(server) > 0,
        "{what}: no model request carried the image"
    );
}

fn opencode(sandbox: &Sandbox, interface: Interface) -> OpenCodeBackend {
    let mut config = OpenCodeConfig::with_binary(&sandbox.program).default_interface(interface);
    for (k, v) in &sandbox.env {
        config = config.env(k, v);
    }
    config.working_dir = Some(sandbox.cwd.clone());
    OpenCodeBackend::new(config)
}

fn as_is(request: RunRequest) -> RunRequest {
    request
}

fn codex_exec(request: RunRequest) -> RunRequest {
    request.with_options(&CodexOptions::default().mode(CodexMode::Exec))
}

#[tokio::test]
async fn claude_code_sends_the_image_as_an_image_block() {
    let Some((server, sandbox)) = bench(Cli::ClaudeCode, "text").await else {
        return;
    };
    let here = Place::local();
    assert_image_reaches_model(
        "claude_code",
        &*backend(Cli::ClaudeCode, &sandbox, &here),
        &server,
        &here,
        as_is,
    )
    .await;
}

#[tokio::test]
async fn codex_reads_the_image_file_on_the_app_server_and_in_exec_also_inside_bwrap() {
    for (what, options) in [
        ("app-server", as_is as fn(RunRequest) -> RunRequest),
        ("exec", codex_exec),
    ] {
        for place in [Place::local(), Place::bwrap()] {
            let Some((server, sandbox)) = bench(Cli::Codex, "text").await else {
                return;
            };
            let what = format!("codex {what} via {}", place.launcher);
            assert_image_reaches_model(
                &what,
                &*backend(Cli::Codex, &sandbox, &place),
                &server,
                &place,
                options,
            )
            .await;
        }
    }
}

#[tokio::test]
async fn gemini_and_qwen_over_acp_send_the_image_inline() {
    for cli in [Cli::Gemini, Cli::Qwen] {
        let Some((server, sandbox)) = bench(cli, "text").await else {
            return;
        };
        let here = Place::local();
        assert_image_reaches_model(
            &format!("{cli:?}"),
            &*backend(cli, &sandbox, &here),
            &server,
            &here,
            as_is,
        )
        .await;
    }
}

#[tokio::test]
async fn opencode_carries_the_image_on_run_serve_and_acp() {
    for interface in [Interface::Run, Interface::Serve, Interface::Acp] {
        let Some((server, sandbox)) = bench(Cli::OpenCode, "text").await else {
            return;
        };
        let here = Place::local();
        assert_image_reaches_model(
            &format!("opencode {interface:?}"),
            &opencode(&sandbox, interface),
            &server,
            &here,
            as_is,
        )
        .await;
    }
    // `opencode run` reads the file itself: inside bwrap it sees it because the run binds it.
    let Some((server, sandbox)) = bench(Cli::OpenCode, "text").await else {
        return;
    };
    let bwrap = Place::bwrap();
    assert_image_reaches_model(
        "opencode run via bwrap",
        &opencode(&sandbox, Interface::Run),
        &server,
        &bwrap,
        as_is,
    )
    .await;
}

#[tokio::test]
async fn interfaces_that_cannot_carry_an_image_refuse_it_before_spawn() {
    let (_dir, path) = image();
    let Some((server, sandbox)) = bench(Cli::ClaudeCode, "text").await else {
        return;
    };
    let print = request("hi").with_options(&ClaudeCodeOptions::default().mode(ClaudeMode::Print));
    let err = backend(Cli::ClaudeCode, &sandbox, &Place::local())
        .run(with_image(print, &path))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::InvalidExtension { reason, .. } if reason.contains("image")),
        "claude print: {err:?}"
    );
    assert!(server.requests().is_empty(), "nothing was spawned");

    let Some((server, sandbox)) = bench(Cli::Gemini, "text").await else {
        return;
    };
    let headless =
        request("hi").with_options(&GeminiOptions::default().interface(GeminiInterface::Headless));
    let err = backend(Cli::Gemini, &sandbox, &Place::local())
        .run(with_image(headless, &path))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::UnsupportedCapability { capability, .. } if capability == agent_api::capabilities::IMAGES),
        "gemini headless: {err:?}"
    );
    assert!(server.requests().is_empty(), "nothing was spawned");
}

#[tokio::test]
async fn a_file_that_is_not_an_image_is_an_invalid_request_before_spawn() {
    let Some((server, sandbox)) = bench(Cli::Codex, "text").await else {
        return;
    };
    let notes = sandbox.cwd.join("notes.txt");
    std::fs::write(&notes, "not an image").unwrap();
    for path in [notes, sandbox.cwd.join("missing.png")] {
        let err = backend(Cli::Codex, &sandbox, &Place::local())
            .run(with_image(request("hi"), &path))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, AgentError::InvalidRequest { reason } if reason.contains(&*path.to_string_lossy())),
            "{err:?}"
        );
    }
    assert!(server.requests().is_empty(), "nothing was spawned");
}
