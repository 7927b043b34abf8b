//! `agent-api doctor`: which supported CLIs are installed, their versions, whether supported.

use std::process::ExitCode;
use std::time::Duration;

use crate::agents::{locate_bench, locate_installed, CLI_AGENTS};

/// Prints one line per supported CLI.
pub async fn doctor() -> Result<ExitCode, String> {
    println!("scripted      built in (always available)");
    for agent in CLI_AGENTS {
        let found = [("installed", locate_installed(agent)), ("test bench", locate_bench(agent))];
        if found.iter().all(|(_, path)| path.is_none()) {
            println!("{:<13} not installed (on PATH, or the test bench's pinned copy: bash tests/bench/install-clis.sh)", agent.kind);
        }
        for (place, path) in found {
            let Some(path) = path else { continue };
            let version = version_of(&path).await;
            let supported = version.as_deref().is_some_and(|v| agent.supported_versions.iter().any(|s| v.contains(s)));
            println!(
                "{:<13} {place}: {} version {} — {}",
                agent.kind,
                path.display(),
                version.as_deref().unwrap_or("unknown"),
                if supported { "supported" } else { "NOT a supported version" }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The first line of `<binary> --version`, within 20 seconds.
async fn version_of(binary: &std::path::Path) -> Option<String> {
    let output = tokio::process::Command::new(binary).arg("--version").stdin(std::process::Stdio::null()).kill_on_drop(true).output();
    let output = tokio::time::timeout(Duration::from_secs(20), output).await.ok()?.ok()?;
    String::from_utf8_lossy(&output.stdout).lines().next().map(|l| l.trim().to_string()).filter(|l| !l.is_empty())
}
