//! `agent-api capabilities`.

use std::io::Write;
use std::process::ExitCode;

use agent_api::capabilities::{describe, render_matrix, render_options, MatrixRow, OptionsColumn};

use crate::agents::{gateway, parse_kind};
use crate::output::{finish, Stdout};
use crate::CapabilityFormat;

/// Prints the capabilities of one backend, or of all.
pub(crate) fn print(agent: Option<&str>, format: CapabilityFormat) -> Result<ExitCode, String> {
    let gateway = gateway();
    let kinds = match agent {
        Some(kind) => vec![parse_kind(kind)?],
        None => gateway.kinds(),
    };
    let mut rows = Vec::new();
    let mut columns = Vec::new();
    let mut keys = Vec::new();
    for kind in kinds {
        keys.push(gateway.backend(&kind).map_err(|e| e.to_string())?.extension_keys());
        let caps = gateway.capabilities(&kind).map_err(|e| e.to_string())?;
        rows.push(MatrixRow { kind: kind.to_string(), capabilities: caps.iter().map(str::to_string).collect() });
        let mappings = gateway.option_mappings(&kind).map_err(|e| e.to_string())?;
        let mappings = mappings.iter().map(|m| (m.capability.to_string(), m.native.to_string())).collect();
        columns.push(OptionsColumn { kind: kind.to_string(), mappings });
    }
    let mut out = Stdout::new();
    match format {
        CapabilityFormat::Matrix => {
            out.write_with(|w| write!(w, "{}", render_matrix(&rows)));
        }
        CapabilityFormat::Options => {
            out.write_with(|w| write!(w, "{}", render_options(&columns)));
        }
        CapabilityFormat::Json => {
            let map: serde_json::Map<String, serde_json::Value> =
                rows.iter().map(|r| (r.kind.clone(), serde_json::json!(r.capabilities))).collect();
            out.write_with(|w| writeln!(w, "{}", serde_json::to_string_pretty(&map).map_err(std::io::Error::other)?));
        }
        CapabilityFormat::Table => {
            for (row, keys) in rows.iter().zip(keys) {
                out.line(&row.kind);
                for id in &row.capabilities {
                    out.line(&format!("  {id:<42} {}", describe(id).unwrap_or("(backend-specific)")));
                }
                if !keys.is_empty() {
                    out.line(&format!("  options (--option KEY=VALUE): {}", keys.join(", ")));
                }
            }
        }
    }
    Ok(finish(out, ExitCode::SUCCESS))
}
