//! Every library crate of the workspace can go to crates.io (issue 40 item 9): what `cargo package`
//! needs and what it does not check. `cargo package --workspace` proves that each package builds
//! from its own files; this test holds the rest: the metadata crates.io shows (a description, the
//! repository, the documentation, a README, keywords and categories crates.io accepts), the licence
//! texts in every package, versions on the path dependencies, and which crates stay unpublished.
//!
//! It reads the workspace through `cargo metadata`, as cargo itself sees it.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace members that are not for crates.io: test helpers and the examples. Any other
/// member is a library or tool crate and must be publishable (a new backend crate copied from a
/// test helper's manifest would otherwise stay `publish = false` unnoticed).
const UNPUBLISHED: &[&str] = &[
    "agent_api_conformance",
    "agent_bench",
    "agent_api_inspector_tests",
    "agent_api_examples",
];

/// The crates.io category slugs the workspace may use: a subset of
/// <https://crates.io/category_slugs> (crates.io refuses a package with any other); add one from
/// there when a crate needs it.
const CATEGORIES: &[&str] = &[
    "api-bindings",
    "asynchronous",
    "command-line-utilities",
    "development-tools",
    "development-tools::testing",
    "network-programming",
    "parser-implementations",
    "web-programming",
    "web-programming::http-server",
];

/// The repository every package names (the workspace's `repository`).
const REPOSITORY: &str = "https://github.com/agent-api/agent_api";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// `cargo metadata` of the workspace's own packages, as JSON.
fn metadata() -> Value {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

/// `publish = false` reads as an empty list of registries.
fn publishable(package: &Value) -> bool {
    package["publish"]
        .as_array()
        .is_none_or(|registries| !registries.is_empty())
}

fn text<'a>(package: &'a Value, field: &str) -> &'a str {
    package[field].as_str().unwrap_or_default()
}

/// A crates.io keyword: ASCII, at most 20 characters, a letter first, then letters, digits, `_`, `-`, `+`.
fn valid_keyword(keyword: &str) -> bool {
    keyword.len() <= 20
        && keyword.starts_with(|c: char| c.is_ascii_alphabetic())
        && keyword
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+'))
}

/// What is wrong with one publishable package, as readable lines (empty: nothing).
/// `dependents`: the workspace crates that depend on this one (normal or build dependencies).
fn problems(package: &Value, workspace_names: &[&str], dependents: &[&str]) -> Vec<String> {
    let name = text(package, "name");
    let dir = Path::new(text(package, "manifest_path"))
        .parent()
        .expect("a manifest has a folder")
        .to_path_buf();
    let mut found = Vec::new();
    let mut problem = |what: String| found.push(format!("{name}: {what}"));

    if text(package, "description").split_whitespace().count() < 4 {
        problem(format!(
            "description {:?} says too little",
            text(package, "description")
        ));
    }
    if text(package, "repository") != REPOSITORY {
        problem(format!(
            "repository is {:?}, not {REPOSITORY}",
            text(package, "repository")
        ));
    }
    if !text(package, "documentation").starts_with("https://") {
        problem(format!(
            "documentation {:?} is not a URL",
            text(package, "documentation")
        ));
    }
    if text(package, "license") != "MIT OR Apache-2.0" {
        problem(format!("license is {:?}", text(package, "license")));
    }
    match package["readme"].as_str() {
        Some(readme) if dir.join(readme).is_file() => {}
        other => problem(format!("readme {other:?} is not a file of the crate")),
    }
    let keywords: Vec<&str> = package["keywords"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if keywords.is_empty() || keywords.len() > 5 {
        problem(format!(
            "{} keywords (crates.io takes 1 to 5)",
            keywords.len()
        ));
    }
    for keyword in keywords.iter().filter(|keyword| !valid_keyword(keyword)) {
        problem(format!("keyword {keyword:?} is not one crates.io takes"));
    }
    let categories: Vec<&str> = package["categories"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if categories.is_empty() || categories.len() > 5 {
        problem(format!(
            "{} categories (crates.io takes 1 to 5)",
            categories.len()
        ));
    }
    for category in categories
        .iter()
        .filter(|category| !CATEGORIES.contains(category))
    {
        problem(format!(
            "category {category:?} is not in this test's list of crates.io slugs"
        ));
    }
    // The licence texts travel in each package; a link to the top-level text is packaged as the text.
    for licence in ["LICENSE-MIT", "LICENSE-APACHE"] {
        let top = std::fs::read(root().join(licence))
            .unwrap_or_else(|e| panic!("{licence} at the top level: {e}"));
        match std::fs::read(dir.join(licence)) {
            Ok(own) if own == top => {}
            Ok(_) => problem(format!("{licence} differs from the top-level one")),
            Err(e) => problem(format!("no {licence} in the crate ({e})")),
        }
    }
    // A dependency on another workspace crate needs a version, or the package cannot name it on
    // crates.io; a dev-dependency on an unpublished helper has none, and cargo leaves it out.
    for dependency in package["dependencies"].as_array().into_iter().flatten() {
        let dependency_name = text(dependency, "name");
        let dev = dependency["kind"].as_str() == Some("dev");
        if workspace_names.contains(&dependency_name)
            && dependency["req"].as_str() == Some("*")
            && !dev
        {
            problem(format!("depends on {dependency_name} by path only (give it a version in [workspace.dependencies])"));
        }
        if dev && UNPUBLISHED.contains(&dependency_name) && dependency["req"].as_str() != Some("*")
        {
            problem(format!("dev-dependency {dependency_name} has a version, so cargo would look for it on crates.io"));
        }
        if dev && dependents.contains(&dependency_name) && dependency["req"].as_str() != Some("*") {
            problem(format!("dev-dependency {dependency_name} depends on this crate: with a version, neither can be published first (make it path-only)"));
        }
    }
    found
}

/// The workspace crates that depend on `name`, directly or through others (normal and build
/// dependencies: the ones a package keeps).
fn dependents<'a>(packages: &'a [Value], name: &str) -> Vec<&'a str> {
    let mut found: Vec<&str> = Vec::new();
    let mut frontier = vec![name.to_owned()];
    while let Some(target) = frontier.pop() {
        for package in packages {
            let depends = package["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|dependency| {
                    text(dependency, "name") == target && dependency["kind"].as_str() != Some("dev")
                });
            let package_name = text(package, "name");
            if depends && !found.contains(&package_name) {
                found.push(package_name);
                frontier.push(package_name.to_owned());
            }
        }
    }
    found
}

#[test]
fn every_library_crate_carries_what_crates_io_needs() {
    let metadata = metadata();
    let packages = metadata["packages"]
        .as_array()
        .expect("cargo metadata lists packages");
    let names: Vec<&str> = packages
        .iter()
        .map(|package| text(package, "name"))
        .collect();

    let unpublished: Vec<&str> = packages
        .iter()
        .filter(|package| !publishable(package))
        .map(|package| text(package, "name"))
        .collect();
    let mut expected = UNPUBLISHED.to_vec();
    expected.sort_unstable();
    let mut unpublished_sorted = unpublished.clone();
    unpublished_sorted.sort_unstable();
    assert_eq!(
        unpublished_sorted, expected,
        "only the test helpers and the examples stay off crates.io"
    );

    let found: Vec<String> = packages
        .iter()
        .filter(|package| publishable(package))
        .flat_map(|package| {
            problems(
                package,
                &names,
                &dependents(packages, text(package, "name")),
            )
        })
        .collect();
    assert!(
        found.is_empty(),
        "not ready for crates.io:\n{}",
        found.join("\n")
    );
    assert!(
        names.len() - unpublished.len() >= 10,
        "the workspace has {} publishable crates",
        names.len() - unpublished.len()
    );
}

/// The files a crate's sources embed (`include_str!`, `include_bytes!` of a literal path) that lie
/// outside the crate's folder: a package holds only that folder, so its build would fail on crates.io
/// while the workspace builds. `.ci/run` builds each package alone too, after 20 minutes; this says
/// it in the tests' first second. A link inside the crate to a file elsewhere is fine: cargo packs
/// the file it points to.
fn embedded_outside(crate_dir: &Path) -> Vec<String> {
    let mut outside = Vec::new();
    let mut folders = vec![crate_dir.join("src")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            if path.extension().is_none_or(|extension| extension != "rs") {
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap_or_default();
            for macro_name in ["include_str!(\"", "include_bytes!(\""] {
                for (at, _) in source.match_indices(macro_name) {
                    let rest = &source[at + macro_name.len()..];
                    let target = &rest[..rest.find('"').unwrap_or(0)];
                    // Resolved by its words alone, `..` against the folder of the file that names it.
                    let mut resolved = folder.clone();
                    for part in Path::new(target).components() {
                        match part {
                            std::path::Component::ParentDir => {
                                resolved.pop();
                            }
                            std::path::Component::Normal(name) => resolved.push(name),
                            _ => {}
                        }
                    }
                    if !resolved.starts_with(crate_dir) {
                        outside.push(format!("{} embeds {target}", path.display()));
                    }
                }
            }
        }
    }
    outside
}

#[test]
fn no_library_crate_embeds_a_file_outside_its_package() {
    let metadata = metadata();
    let mut outside = Vec::new();
    for package in metadata["packages"]
        .as_array()
        .expect("cargo metadata lists packages")
        .iter()
        .filter(|package| publishable(package))
    {
        let dir = Path::new(text(package, "manifest_path"))
            .parent()
            .expect("a manifest has a folder")
            .to_path_buf();
        outside.extend(embedded_outside(&dir));
    }
    assert!(
        outside.is_empty(),
        "a package holds only its crate's folder:\n{}",
        outside.join("\n")
    );
}

#[test]
fn an_embedded_file_above_the_crate_is_found() {
    let crate_dir =
        std::env::temp_dir().join(format!("agent_api_packaging_{}", std::process::id()));
    std::fs::create_dir_all(crate_dir.join("src/store")).expect("a scratch crate");
    std::fs::write(
        crate_dir.join("src/store/mod.rs"),
        "const A: &str = include_str!(\"../../migrations/1.sql\");\n",
    )
    .expect("a source file");
    std::fs::write(
        crate_dir.join("src/lib.rs"),
        "const B: &[u8] = include_bytes!(\"../../spec/schema.json\");\n",
    )
    .expect("a source file");
    let found = embedded_outside(&crate_dir);
    std::fs::remove_dir_all(&crate_dir).ok();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].ends_with("embeds ../../spec/schema.json"),
        "{found:?}"
    );
}

#[test]
fn the_server_package_carries_the_universal_schema_it_serves() {
    // The server embeds the schema from inside its own folder (a package holds nothing else), which
    // must stay the normative text in `spec/`.
    let root = root();
    let served = std::fs::read(root.join("server/universal-schema.json"))
        .expect("server/universal-schema.json");
    let spec =
        std::fs::read(root.join("spec/universal-schema.json")).expect("spec/universal-schema.json");
    assert!(
        served == spec,
        "server/universal-schema.json is not spec/universal-schema.json"
    );
}

#[test]
fn the_checks_catch_what_they_name() {
    let good = serde_json::json!({
        "name": "agent_api_example_backend",
        "manifest_path": root().join("backends/scripted/Cargo.toml"),
        "description": "A backend for an imaginary agent.",
        "repository": REPOSITORY,
        "documentation": "https://docs.rs/agent_api_example_backend",
        "license": "MIT OR Apache-2.0",
        "readme": "README.md",
        "keywords": ["agent", "llm"],
        "categories": ["development-tools"],
        "dependencies": [{"name": "agent_api", "req": "^0.1.0", "kind": null},
                         {"name": "agent_bench", "req": "*", "kind": "dev"}],
    });
    let names = ["agent_api", "agent_bench", "agent_api_gemini"];
    assert_eq!(problems(&good, &names, &[]), Vec::<String>::new());
    let mut cycle = good.clone();
    cycle["dependencies"] =
        serde_json::json!([{"name": "agent_api_gemini", "req": "^0.1.0", "kind": "dev"}]);
    assert!(
        !problems(&cycle, &names, &["agent_api_gemini"]).is_empty(),
        "a versioned dev-dependency on a dependent passed"
    );
    let broken = [
        (
            "repository",
            serde_json::json!("https://example.invalid/agent_api"),
        ),
        ("documentation", Value::Null),
        ("readme", serde_json::json!("NOWHERE.md")),
        (
            "keywords",
            serde_json::json!(["a", "b", "c", "d", "e", "f"]),
        ),
        ("keywords", serde_json::json!(["has space"])),
        ("categories", serde_json::json!(["agents"])),
        (
            "dependencies",
            serde_json::json!([{"name": "agent_api", "req": "*", "kind": null}]),
        ),
        (
            "dependencies",
            serde_json::json!([{"name": "agent_bench", "req": "^0.1.0", "kind": "dev"}]),
        ),
        (
            "manifest_path",
            serde_json::json!(root().join("tests/fixtures/Cargo.toml")),
        ),
    ];
    for (field, value) in broken {
        let mut package = good.clone();
        package[field] = value.clone();
        assert!(
            !problems(&package, &names, &[]).is_empty(),
            "{field} = {value} passed"
        );
    }
}

/// The crates whose names do not follow the rule of [`expected_name`], each with its reason.
const OTHER_NAMES: &[(&str, &str, &str)] = &[
    (
        "tests/bench",
        "agent_bench",
        "some seventy test files name it as `agent_bench::`; renamed when no branch adds tests",
    ),
    (
        "tests/inspector",
        "agent_api_inspector_tests",
        "the inspector is the server's page; this crate holds only its browser tests",
    ),
];

/// The name a crate in `folder` (relative to the workspace) carries: `agent_api` for the library,
/// `agent_api_<last part of its folder>` for every other (`backends/codex` → `agent_api_codex`,
/// `capabilities` → `agent_api_capabilities`, `cli` → `agent_api_cli`), so a reader finds a crate
/// from its name and the name from its folder.
fn expected_name(folder: &Path) -> String {
    let last = folder
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    if last == "agent_api" {
        last
    } else {
        format!("agent_api_{last}")
    }
}

#[test]
fn every_crate_is_named_for_its_folder() {
    let root = root();
    let metadata = metadata();
    let mut wrong = Vec::new();
    for package in metadata["packages"]
        .as_array()
        .expect("cargo metadata lists packages")
    {
        let name = text(package, "name");
        let folder = Path::new(text(package, "manifest_path"))
            .parent()
            .expect("a manifest has a folder")
            .strip_prefix(&root)
            .expect("a member lies in the workspace")
            .to_path_buf();
        let excepted = OTHER_NAMES
            .iter()
            .any(|(dir, other, _)| Path::new(dir) == folder && *other == name);
        if !excepted && name != expected_name(&folder) {
            wrong.push(format!(
                "{} holds {name}, not {}",
                folder.display(),
                expected_name(&folder)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "crate names that do not say their folder:\n{}",
        wrong.join("\n")
    );
    assert_eq!(
        expected_name(Path::new("backends/codex")),
        "agent_api_codex"
    );
    assert_ne!(expected_name(Path::new("cli")), "agent-api-cli");
}
