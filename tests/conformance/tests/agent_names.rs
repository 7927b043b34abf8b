//! No agent's name outside its own crate (issue 51 item 4). Where agent X's line becomes an event,
//! where its store is recognized, where its retry notices are read: always `backends/X/src/`. The
//! core, the CLI, the server and the other backends ask a backend (a hook of its trait, a
//! capability), never test its name.
//!
//! The check reads every line of every library and binary of those crates, test modules
//! included: identifiers, string literals and comments alike (a doc comment is what the crate
//! tells its reader, a plain one what it tells its maintainer), so that it agrees with a
//! case-blind `grep` for the names (the short ones, `amp`, `qwen`, `scripted`, as words of their
//! own). It fails on any word that names another agent. Crates whose job is every agent are not
//! read: `backends/builtin` (it assembles them), `capabilities` (the coverage matrix describes
//! each), and the test crates (`tests/*`, `examples`), which drive every agent. A name that must
//! stay (the reference's `claude` on the wire, the stream-json protocol's origin) is declared
//! below with its reason.

use std::path::{Path, PathBuf};

/// Each agent: its crate's folder under `backends/`, and the word that names it.
const AGENTS: &[(&str, &str)] = &[
    ("claude_code", "claude"),
    ("codex", "codex"),
    ("opencode", "opencode"),
    ("gemini", "gemini"),
    ("qwen", "qwen"),
    ("amp", "amp"),
    ("scripted", "scripted"),
];

/// The crates read, besides every folder of `backends/` but the exempt ones.
const READ: &[&str] = &["agent_api", "cli", "server"];

/// Folders of `backends/` whose job is every agent: not read.
const EXEMPT: &[&str] = &["builtin"];

/// Names that stay, each where it is declared: (file, the text of the line that holds it, why).
const DECLARED: &[(&str, &str, &str)] = &[
    (
        "server/src/state.rs",
        r#"("claude", "claude_code")"#,
        "the reference daemon's agent id, which the server speaks on the wire",
    ),
    (
        "backends/stream_json/src/system.rs",
        r#""claude_code_version""#,
        "a field of the stream-json protocol's `system` line, as every CLI speaking it names it",
    ),
    (
        "backends/stream_json/src/lib.rs",
        "The protocol is Claude Code's",
        "the family's protocol is that CLI's: the crate's doc says where it comes from, once, and \
         calls it \"the protocol\" from there on",
    ),
    (
        "backends/stream_json/src/tests.rs",
        r#"fixtures_dir().join("claude_code/print")"#,
        "the family's converter is checked against the recordings of the protocol's origin",
    ),
];

/// The agents a word names: a distinctive name anywhere in it (`ClaudeCodeProject`,
/// `OPENCODE_X`), a short one as a word of its own (`AmpBackend`, `amp_x`, not `example`).
fn agents_named(word: &str) -> Vec<&'static str> {
    let lower = word.to_ascii_lowercase();
    let parts = camel_parts(word);
    AGENTS
        .iter()
        .filter(|(_, name)| {
            if name.len() > 4 && *name != "scripted" {
                lower.contains(name)
            } else {
                parts.iter().any(|p| p == name)
            }
        })
        .map(|(folder, _)| *folder)
        .collect()
}

/// `AmpBackend` → `amp`, `backend`; `AMP` → `amp`.
fn camel_parts(word: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut previous_lower = false;
    for c in word.chars() {
        if c.is_ascii_uppercase() && previous_lower {
            parts.push(String::new());
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        parts.last_mut().unwrap().push(c.to_ascii_lowercase());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every line of `text` (the file `file`) that names an agent other than `own`, in code, a
/// string or a comment: `file:line: names agent: text`.
fn foreign_names(file: &str, text: &str, own: Option<&str>) -> Vec<String> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if DECLARED
            .iter()
            .any(|(f, held, _)| *f == file && line.contains(held))
        {
            continue;
        }
        let named: Vec<&str> = line
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .flat_map(|w| w.split('_'))
            .flat_map(agents_named)
            .filter(|agent| Some(*agent) != own)
            .collect();
        if let Some(agent) = named.first() {
            found.push(format!(
                "{file}:{}: names {agent}: {}",
                number + 1,
                line.trim()
            ));
        }
    }
    found
}

#[test]
fn no_crate_names_another_agent_outside_its_declared_aliases() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    let mut crates: Vec<(String, Option<&str>)> =
        READ.iter().map(|c| (c.to_string(), None)).collect();
    for entry in std::fs::read_dir(workspace.join("backends"))
        .unwrap()
        .flatten()
    {
        let folder = entry.file_name().to_string_lossy().into_owned();
        if EXEMPT.contains(&folder.as_str()) {
            continue;
        }
        let own = AGENTS.iter().find(|(f, _)| *f == folder).map(|(f, _)| *f);
        crates.push((format!("backends/{folder}"), own));
    }
    assert!(crates.len() >= 12, "read only {crates:?}");
    let mut found = Vec::new();
    let mut read = 0;
    for (dir, own) in &crates {
        let mut files = Vec::new();
        rust_files(&workspace.join(dir).join("src"), &mut files);
        assert!(!files.is_empty(), "no source file in {dir}/src");
        for path in files {
            let file = path
                .strip_prefix(&workspace)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            read += 1;
            found.extend(foreign_names(&file, &text, *own));
        }
    }
    assert!(read > 100, "read only {read} files");
    assert!(
        found.is_empty(),
        "{} lines name an agent outside its crate (ask the backend through a hook or a \
         capability, or declare an alias with its reason):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The check sees a name where one is, in every spelling, in code, strings and comments alike,
/// and only there.
#[test]
fn a_name_in_code_a_string_or_a_comment_is_found_and_a_longer_word_is_not() {
    let text = "// Claude Code says so\nlet x = \"codex\";\nstruct AmpBackend;\nlet example = \
                timestamp(); /* OpenCode */\n/// as the Gemini CLI does\nfn f() -> \
                ClaudeCodeProject {}\nlet s = r#\"the Qwen way\"#;\nlet unscripted = 1; // \
                sampled\n";
    let found = foreign_names("x.rs", text, Some("amp"));
    let agents: Vec<&str> = found
        .iter()
        .map(|f| f.split("names ").nth(1).unwrap().split(':').next().unwrap())
        .collect();
    assert_eq!(
        agents,
        [
            "claude_code",
            "codex",
            "opencode",
            "gemini",
            "claude_code",
            "qwen"
        ],
        "{found:?}"
    );
    assert_eq!(
        foreign_names("x.rs", text, None).len(),
        7,
        "AmpBackend names amp"
    );
}
