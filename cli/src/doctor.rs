//! `agent-api doctor`: one row per agent, from the library's one discovery
//! ([`agent_api_builtin::discover`]): where it is, why there, its version, whether supported.

use std::process::ExitCode;

use agent_api::display;

use crate::agents::locate_bench;
use crate::output::{finish, Stdout};

/// Prints one row per agent: the built-in one, then every supported CLI, installed or not.
pub(crate) async fn doctor() -> Result<ExitCode, String> {
    let mut out = Stdout::new();
    let installed = agent_api_builtin::discover().await;
    let mut rows = vec![format!(
        "{:<13} built in (always available)",
        agent_api_builtin::FALLBACK
    )];
    for probe in agent_api_builtin::probes() {
        let row = match installed.iter().find(|i| i.kind == probe.kind) {
            Some(cli) => format!(
                "{:<13} installed version {} at {} ({}) — {}",
                cli.kind,
                display::line(cli.version.as_deref().unwrap_or("unknown"), 64),
                display::line(&cli.binary.to_string_lossy(), 512),
                cli.found_by,
                if cli.supported {
                    "supported"
                } else {
                    "NOT a supported version"
                }
            ),
            None => {
                let bench = locate_bench(&probe).map(|path| {
                    let path = display::line(&path.to_string_lossy(), 512);
                    format!(
                        "; the test bench's pinned copy is at {path} ({}={path} uses it)",
                        probe.binary_var()
                    )
                });
                format!(
                    "{:<13} not installed (set {} or put `{}` on PATH{})",
                    probe.kind,
                    probe.binary_var(),
                    probe.executable,
                    bench.unwrap_or_default()
                )
            }
        };
        rows.push(row);
    }
    for row in rows {
        out.line(&row);
    }
    Ok(finish(out, ExitCode::SUCCESS))
}
