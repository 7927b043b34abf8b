//! `agent-api doctor`: which supported CLIs are installed, their versions, whether supported.

use std::process::ExitCode;

use agent_api::detect::Installed;
use agent_api::display;
use agent_api::Gateway;

use crate::agents::{locate_bench, probes};
use crate::output::{finish, Stdout};

/// Prints one line per supported CLI found (installed, and the test bench's copy).
pub(crate) async fn doctor() -> Result<ExitCode, String> {
    let mut out = Stdout::new();
    let (_, installed) = Gateway::with_installed(&probes()).await;
    let mut lines = vec!["scripted      built in (always available)".to_string()];
    for probe in probes() {
        let mut found: Vec<(&str, Installed)> =
            installed.iter().filter(|i| i.kind == probe.kind).map(|i| ("installed", i.clone())).collect();
        if let Some(path) = locate_bench(&probe) {
            found.push(("test bench", probe.inspect(path).await));
        }
        if found.is_empty() {
            lines.push(format!(
                "{:<13} not installed (set {} or put `{}` on PATH; the test bench's pinned copy: bash tests/bench/install-clis.sh)",
                probe.kind,
                probe.binary_var(),
                probe.executable
            ));
        }
        for (place, cli) in found {
            lines.push(format!(
                "{:<13} {place}: {} version {} — {}",
                cli.kind,
                display::line(&cli.binary.to_string_lossy(), 512),
                display::line(cli.version.as_deref().unwrap_or("unknown"), 64),
                if cli.supported { "supported" } else { "NOT a supported version" }
            ));
        }
    }
    for line in lines {
        out.line(&line);
    }
    Ok(finish(out, ExitCode::SUCCESS))
}
