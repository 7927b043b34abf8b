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
    let mut choices = Vec::new();
    for kind in kinds {
        let info = gateway.info(&kind).map_err(|e| e.to_string())?;
        keys.push(info.extension_keys);
        choices.push((info.modes, info.variants));
        rows.push(MatrixRow {
            kind: kind.to_string(),
            capabilities: info.capabilities.iter().map(str::to_string).collect(),
        });
        let mappings = info
            .option_mappings
            .iter()
            .map(|m| (m.capability.to_string(), m.native.to_string()))
            .collect();
        columns.push(OptionsColumn {
            kind: kind.to_string(),
            mappings,
        });
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
            let map: serde_json::Map<String, serde_json::Value> = rows
                .iter()
                .map(|r| (r.kind.clone(), serde_json::json!(r.capabilities)))
                .collect();
            out.write_with(|w| {
                writeln!(
                    w,
                    "{}",
                    serde_json::to_string_pretty(&map).map_err(std::io::Error::other)?
                )
            });
        }
        CapabilityFormat::Table => {
            for ((row, keys), (modes, variants)) in rows.iter().zip(keys).zip(choices) {
                out.line(&row.kind);
                for id in &row.capabilities {
                    out.line(&format!(
                        "  {id:<42} {}",
                        describe(id).unwrap_or("(backend-specific)")
                    ));
                }
                if !keys.is_empty() {
                    out.line(&format!(
                        "  options (--option KEY=VALUE): {}",
                        keys.join(", ")
                    ));
                }
                for line in choice_lines(modes, variants) {
                    out.line(&line);
                }
            }
        }
    }
    Ok(finish(out, ExitCode::SUCCESS))
}

/// The lines that list an agent's modes (`--mode`) and variants (`--variant`, per model where
/// they differ), each with its native form.
fn choice_lines(
    modes: &[agent_api::request::ModeInfo],
    variants: &[agent_api::request::VariantSet],
) -> Vec<String> {
    let mut lines = Vec::new();
    if !modes.is_empty() {
        lines.push("  modes (--mode M): default, and:".to_string());
        lines.extend(
            modes
                .iter()
                .map(|m| format!("    {:<18} {} ({})", m.id, m.description, m.native)),
        );
    }
    for set in variants {
        let models = if set.models.is_empty() {
            "any other model".to_string()
        } else {
            set.models.join(", ")
        };
        lines.push(format!(
            "  variants (--variant V) for {models}: {} ({})",
            set.values.join(", "),
            set.native
        ));
    }
    lines
}
