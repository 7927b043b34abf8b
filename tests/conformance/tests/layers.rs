//! The library's layers only point down, and its modules import each other in no circle.
//!
//! Every module of `agent_api/src/` has a place in [`ORDER`], from the ground up: the guards
//! (bounds, the secret redactor, confined files: rules on text and paths that know no agent), the
//! vocabulary (the types a caller or a backend names), the pipeline (the machinery that makes,
//! carries and projects a run's events), the contract (the backend trait, sessions, the run
//! handle), then the kit (what backends are built from), then the features (what sits on runs:
//! sessions, history, caller tools, structured output, homes, the gateway). A module may name only
//! modules that stand below it; that one rule rules out both an upward import and a circle. The
//! imports are read by [`source_graph`], which the workspace's circle check (`file_cycles.rs`)
//! shares.
//!
//! A new module needs a place in the list: the test fails naming it.

use agent_api_conformance::source_graph::CrateGraph;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers whose modules are counted one level deep (`guards::bounds`, `kit::driver`), lowest
/// first; a layer's name alone is its own `mod.rs` (its re-exports), which stands above
/// everything in the layer.
const LAYERS: &[&str] = &["guards", "vocabulary", "pipeline", "contract", "kit"];

/// Every module, lowest first. The modules of the [`LAYERS`] are counted one level deep; the
/// other names are the top-level feature modules.
const ORDER: &[&str] = &[
    // The guards: rules on text and paths, which know nothing of agents, runs or events.
    "guards::bounds",
    "guards::secrets",
    "guards::files",
    "guards",
    // The vocabulary: the types a caller or a backend names; it runs nothing.
    "vocabulary::snapshot_error",
    "vocabulary::tools_facet",
    "vocabulary::error",
    "vocabulary::capability",
    "vocabulary::kind",
    "vocabulary::modes",
    "vocabulary::universal",
    "vocabulary::tool_table",
    "vocabulary::answer",
    "vocabulary::event",
    "vocabulary::session_ref",
    "vocabulary::snapshot",
    "vocabulary::run",
    "vocabulary::caller_tool",
    "vocabulary::home",
    "vocabulary::launcher",
    "vocabulary::portable",
    "vocabulary::request",
    "vocabulary::options",
    "vocabulary::backend_info",
    "vocabulary",
    // The pipeline: the transcript builder, the byte budget, the projection, the spans, the
    // request's images and schema.
    "pipeline::transcript",
    "pipeline::budget",
    "pipeline::spans",
    "pipeline::projection",
    "pipeline::images",
    "pipeline::structured",
    "pipeline",
    // The contract: the backend trait and its checks, sessions, the store, the run handle.
    "contract::handle",
    "contract::store",
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
    "kit::cli",
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

/// The unit of [`ORDER`] a module belongs to, or `None` for the crate root. A module right under
/// a layer of [`LAYERS`] that is no unit of its own is the layer's own `mod.rs`.
fn unit_of(segments: &[String], units: &BTreeSet<String>) -> Option<String> {
    let first = segments.first()?;
    if LAYERS.contains(&first.as_str()) {
        match segments.get(1).map(|second| format!("{first}::{second}")) {
            Some(unit) if units.contains(&unit) => Some(unit),
            _ => Some(first.clone()),
        }
    } else {
        Some(first.clone())
    }
}

fn library() -> CrateGraph {
    CrateGraph::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../agent_api/src/lib.rs"))
}

/// The units the library's files define.
fn units(graph: &CrateGraph) -> BTreeSet<String> {
    graph
        .files()
        .iter()
        .filter_map(|f| {
            let first = f.module.first()?.clone();
            Some(match f.module.get(1) {
                Some(second) if LAYERS.contains(&first.as_str()) => {
                    format!("{first}::{second}")
                }
                _ => first,
            })
        })
        .collect()
}

/// Every import between two units: (from, to) → the paths that make it.
fn imports(graph: &CrateGraph) -> BTreeMap<(String, String), BTreeSet<String>> {
    let units = units(graph);
    let mut found: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for ((from, to), paths) in graph.edges() {
        let files = graph.files();
        let Some(from) = unit_of(&files[from].module, &units) else {
            continue;
        };
        let to = unit_of(&files[to].module, &units).unwrap_or_else(|| "the crate root".into());
        if to != from {
            found.entry((from, to)).or_default().extend(paths);
        }
    }
    found
}

/// The imports that break the order, and the units that have no place in it.
fn against_the_order(graph: &CrateGraph) -> (BTreeSet<String>, Vec<String>) {
    let rank = |unit: &str| ORDER.iter().position(|u| *u == unit);
    let mut upward = Vec::new();
    let mut unplaced = BTreeSet::new();
    let found = imports(graph);
    // The graph, lowest first (`cargo test -p agent_api_conformance --test layers -- --nocapture`).
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
    (unplaced, upward)
}

#[test]
fn every_module_imports_only_modules_below_it() {
    let graph = library();
    assert!(
        graph.files().len() > 50,
        "the library's files were not found"
    );
    let (unplaced, upward) = against_the_order(&graph);
    assert!(
        unplaced.is_empty() && upward.is_empty(),
        "modules with no place in ORDER (add them where they belong): {unplaced:?}\n{} imports run up:\n{}",
        upward.len(),
        upward.join("\n")
    );
}

#[test]
fn every_place_in_the_order_is_a_module_that_exists() {
    let defined = units(&library());
    for unit in ORDER {
        assert!(
            defined.contains(*unit) || LAYERS.contains(unit),
            "ORDER names `{unit}`, which no file defines"
        );
    }
}

/// The check is not blind: a guard naming the gateway, which stands above it, is an upward
/// import; so is a vocabulary type reaching for the pipeline's machinery; a module the order does
/// not know is named.
#[test]
fn an_upward_import_and_an_unplaced_module_are_seen() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "pub mod guards;\npub mod vocabulary;\npub mod pipeline;\npub mod gateway;\npub mod newcomer;\n",
    );
    write("guards/mod.rs", "pub mod bounds;\n");
    write(
        "guards/bounds.rs",
        "pub fn cap() -> crate::gateway::Gateway { todo!() }\n",
    );
    write("vocabulary/mod.rs", "pub mod event;\n");
    write(
        "vocabulary/event.rs",
        "pub struct Event(crate::pipeline::projection::Projector);\n",
    );
    write("pipeline/mod.rs", "pub mod projection;\n");
    write("pipeline/projection.rs", "pub struct Projector;\n");
    write("gateway.rs", "pub struct Gateway;\n");
    write("newcomer.rs", "pub use crate::guards::bounds::cap;\n");
    let (unplaced, upward) = against_the_order(&CrateGraph::read(&dir.path().join("lib.rs")));
    assert_eq!(unplaced, BTreeSet::from(["newcomer".to_string()]));
    assert_eq!(upward.len(), 2, "{upward:?}");
    assert!(
        upward[0].starts_with("guards::bounds -> gateway"),
        "{upward:?}"
    );
    assert!(
        upward[1].starts_with("vocabulary::event -> pipeline::projection"),
        "{upward:?}"
    );
}
