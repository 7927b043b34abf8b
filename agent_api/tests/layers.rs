//! The library's layers only point down, and its modules import each other in no circle.
//!
//! Every module of `src/` has a place in [`ORDER`], from the ground up: the contract (what callers
//! and backends share), then the kit (what backends are built from), then the features (what sits
//! on runs: sessions, history, caller tools, structured output, homes, the gateway). A module may
//! name only modules that stand below it; that one rule rules out both an upward import and a
//! circle. The test reads the source as text (comments and test modules left out) and resolves
//! every `crate::…`, `super::…` path to the module it names.
//!
//! A new module needs a place in the list: the test fails naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every module, lowest first. `contract::*` and `kit::*` are counted one level deep; the other
/// names are the top-level feature modules. `kit` alone is the kit's own `mod.rs` (its
/// re-exports), which stands above everything in the kit.
const ORDER: &[&str] = &[
    // The contract: imports nothing of the kit or the features.
    "contract::bounds",
    "contract::secrets",
    "contract::snapshot_error",
    "contract::tools_facet",
    "contract::error",
    "contract::capability",
    "contract::files",
    "contract::kind",
    "contract::modes",
    "contract::universal",
    "contract::tool_table",
    "contract::answer",
    "contract::event",
    "contract::projection",
    "contract::session_ref",
    "contract::snapshot",
    "contract::budget",
    "contract::run",
    "contract::store",
    "contract::caller_tool",
    "contract::home",
    "contract::launcher",
    "contract::portable",
    "contract::request",
    "contract::structured",
    "contract::images",
    "contract::options",
    "contract::session",
    "contract::backend",
    "contract",
    // The kit: framing, processes, launchers, the transcript builder, the driver, HITL, replay.
    "kit::lines",
    "kit::sse",
    "kit::http",
    "kit::reap",
    "kit::command",
    "kit::launch",
    "kit::process",
    "kit::stderr",
    "kit::transport",
    "kit::timeouts",
    "kit::protocol",
    "kit::jsonrpc",
    "kit::hitl",
    "kit::limits",
    "kit::driver",
    "kit::replay",
    "kit::rate_limit",
    "kit::detect",
    "kit::home",
    "kit::snapshot",
    "kit::caller_tools",
    "kit",
    // The features, each on runs.
    "display",
    "tool_calls",
    "summary",
    "history",
    "resumed",
    "snapshot",
    "gateway",
];

/// The module a file defines, as path segments (`src/kit/driver/session.rs` → kit, driver, session).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut segments: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if segments.last().is_some_and(|s| s == "mod" || s == "lib") {
        segments.pop();
    }
    segments
}

/// The unit of [`ORDER`] a module path belongs to, or `None` for the crate root. A lowercase name
/// right under `contract` or `kit` that is no module (`crate::kit::marker_value`) is the layer's own
/// `mod.rs`, as `crate::kit::Protocol` is.
fn unit_of(segments: &[String], modules: &BTreeSet<String>) -> Option<String> {
    let first = segments.first()?;
    if first == "contract" || first == "kit" {
        match segments.get(1).map(|second| format!("{first}::{second}")) {
            Some(unit) if modules.contains(&unit) => Some(unit),
            _ => Some(first.clone()),
        }
    } else if first.starts_with(|c: char| c.is_ascii_lowercase()) {
        Some(first.clone())
    } else {
        None
    }
}

/// The units that files define.
fn modules(src: &Path, files: &[PathBuf]) -> BTreeSet<String> {
    files
        .iter()
        .filter_map(|f| {
            let segments = module_of(src, f);
            let first = segments.first()?.clone();
            Some(match segments.get(1) {
                Some(second) if first == "contract" || first == "kit" => {
                    format!("{first}::{second}")
                }
                _ => first,
            })
        })
        .collect()
}

/// The code of a file without comments and without its test module, which may reach anywhere.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        // `#[cfg(test)]` or `#[cfg(all(test, …))]` over an inline module: the rest is tests.
        let test_cfg = trimmed.starts_with("#[cfg(test)]") || trimmed.starts_with("#[cfg(all(test");
        if test_cfg
            && lines.peek().is_some_and(|next| {
                next.trim_start().starts_with("mod ") && next.trim_end().ends_with('{')
            })
        {
            break;
        }
        let code = match trimmed.find("//") {
            Some(at) => &trimmed[..at],
            None => trimmed,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// Every import between two units: (from, to) → the paths that make it.
fn imports() -> BTreeMap<(String, String), BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules = modules(&src, &files);
    // `crate::a::b`, and each name of `crate::a::{b, c::d}` (one level of braces).
    let path = regex::Regex::new(
        r"\b(crate|super)((?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))*)(?:::\{([^{}]*)\})?",
    )
    .unwrap();
    let mut found: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let here = module_of(&src, &file);
        let Some(from) = unit_of(&here, &modules) else {
            continue;
        };
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for m in path.captures_iter(&code) {
            if m[2].is_empty() && m.get(3).is_none() {
                continue; // `pub(crate)`, a glob of the parent
            }
            let base = format!("{}{}", &m[1], &m[2]);
            let tails: Vec<String> = match m.get(3) {
                Some(list) => list
                    .as_str()
                    .split(',')
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .collect(),
                None => vec![String::new()],
            };
            for tail in tails {
                let mut target: Vec<String> = if &m[1] == "crate" {
                    Vec::new()
                } else {
                    here[..here.len().saturating_sub(1)].to_vec()
                };
                let whole = if tail.is_empty() {
                    base.clone()
                } else {
                    format!("{base}::{tail}")
                };
                let rest = whole.split_once("::").map_or("", |(_, rest)| rest);
                for segment in rest
                    .split("::")
                    .map(|s| s.split_whitespace().next().unwrap_or(""))
                    .filter(|s| !s.is_empty() && *s != "self")
                {
                    if segment == "super" {
                        target.pop();
                    } else {
                        target.push(segment.to_string());
                    }
                }
                let to = unit_of(&target, &modules).unwrap_or_else(|| "the crate root".to_string());
                if to != from {
                    found.entry((from.clone(), to)).or_default().insert(whole);
                }
            }
        }
    }
    found
}

#[test]
fn every_module_imports_only_modules_below_it() {
    let rank = |unit: &str| ORDER.iter().position(|u| *u == unit);
    let mut upward = Vec::new();
    let mut unplaced = BTreeSet::new();
    let found = imports();
    // The graph, lowest first (`cargo test -p agent_api --test layers -- --nocapture` shows it).
    for unit in ORDER {
        let below: Vec<&str> = found
            .keys()
            .filter(|(from, _)| from == unit)
            .map(|(_, to)| to.as_str())
            .collect();
        println!(
            "{unit} -> {}",
            if below.is_empty() {
                "(nothing)".to_string()
            } else {
                below.join(", ")
            }
        );
    }
    for ((from, to), paths) in found {
        match (rank(&from), rank(&to)) {
            (Some(a), Some(b)) if b < a => {}
            (None, _) => {
                unplaced.insert(from);
            }
            _ => upward.push(format!(
                "{from} -> {to}: {}",
                paths.into_iter().take(4).collect::<Vec<_>>().join(", ")
            )),
        }
    }
    assert!(
        unplaced.is_empty() && upward.is_empty(),
        "modules with no place in ORDER (add them where they belong): {unplaced:?}\n{} imports run up:\n{}",
        upward.len(),
        upward.join("\n")
    );
}

#[test]
fn every_place_in_the_order_is_a_module_that_exists() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let defined = modules(&src, &files);
    for unit in ORDER {
        assert!(
            defined.contains(*unit) || *unit == "contract" || *unit == "kit",
            "ORDER names `{unit}`, which no file defines"
        );
    }
}
