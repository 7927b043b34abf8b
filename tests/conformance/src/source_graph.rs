//! The workspace's Rust sources as a graph of files and the imports between them, read as text.
//!
//! Two checks stand on it: the library's layers (`tests/layers.rs`: a module names only modules
//! below it) and the workspace's circles (`tests/file_cycles.rs`: no crate has two files that
//! import each other, directly or around a circle). Neither can be seen by the compiler, which
//! accepts any order of modules inside a crate.
//!
//! A crate is read from its root files (`lib.rs`, `main.rs`, each binary) down its `mod`
//! declarations. Comments and test modules are left out: a test may reach anywhere. A path is
//! every `crate::…`, `super::…`, `self::…` or `child::…` (a module the file declares), in `use`
//! trees and in code; it resolves to the file that *defines* the name it ends in, following
//! `pub use` re-exports, so importing a type through its layer's `mod.rs` ties the importer to
//! the type's own file, not to every file that `mod.rs` re-exports.
//!
//! ```
//! let graph = agent_api_conformance::source_graph::CrateGraph::read(
//!     std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs").as_path(),
//! );
//! assert!(graph.files().iter().any(|f| f.module == ["source_graph"]));
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One file of a crate: where it is, the module it defines, and its code without comments or tests.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The file on disk.
    pub path: PathBuf,
    /// The module it defines, as segments from the crate root (`[]` for the root itself).
    pub module: Vec<String>,
    code: String,
    children: BTreeSet<String>,
    defines: BTreeSet<String>,
    /// `pub use` of one name: the name it is known by here → the path it comes from.
    reexports: BTreeMap<String, Vec<String>>,
    /// `pub use path::*`: the modules whose names this file re-exports whole.
    globs: Vec<Vec<String>>,
}

/// The files of one crate and the imports between them.
#[derive(Debug)]
pub struct CrateGraph {
    files: Vec<SourceFile>,
    by_module: BTreeMap<Vec<String>, usize>,
}

/// Files that import each other around a ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    /// The files, sorted.
    pub files: BTreeSet<PathBuf>,
    /// The imports that tie them: `a.rs -> b.rs: crate::b::Thing`.
    pub ties: Vec<String>,
}

/// One import between two files: the paths (as written, resolved) that make it.
pub type Edges = BTreeMap<(usize, usize), BTreeSet<String>>;

impl CrateGraph {
    /// Reads the crate whose root file is `root`, following its `mod` declarations.
    pub fn read(root: &Path) -> Self {
        let mut files = Vec::new();
        let mut pending = vec![(root.to_path_buf(), Vec::new(), true)];
        while let Some((path, module, owns_dir)) = pending.pop() {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue; // a `mod` whose file is generated elsewhere
            };
            let file = SourceFile::parse(path.clone(), module.clone(), &text);
            // A root or `mod.rs` keeps its children beside it; `a.rs` keeps them in `a/`.
            let dir = if owns_dir {
                path.parent().unwrap().to_path_buf()
            } else {
                path.with_extension("")
            };
            for child in &file.children {
                let mut child_module = module.clone();
                child_module.push(child.clone());
                let flat = dir.join(format!("{child}.rs"));
                if flat.is_file() {
                    pending.push((flat, child_module, false));
                } else {
                    pending.push((dir.join(child).join("mod.rs"), child_module, true));
                }
            }
            files.push(file);
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let by_module = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.module.clone(), i))
            .collect();
        Self { files, by_module }
    }

    /// The crate's files, sorted by path.
    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    /// Every import between two different files of the crate.
    pub fn edges(&self) -> Edges {
        let mut edges = Edges::new();
        for (from, file) in self.files.iter().enumerate() {
            for path in file.paths() {
                let Some(to) = self.resolve(&path, 0) else {
                    continue;
                };
                if to != from {
                    edges.entry((from, to)).or_default().insert(path.join("::"));
                }
            }
        }
        edges
    }

    /// The circles: each set of two or more files that reach each other through imports, with
    /// the imports that tie it (`a.rs -> b.rs: crate::b::Thing`).
    pub fn circles(&self) -> Vec<Circle> {
        // A child naming what an ancestor defines is part of it (`use super::*`, a crate's
        // constants in `lib.rs`), not a peer depending on a peer: only imports across count.
        let mut edges = self.edges();
        edges.retain(|(from, to), _| {
            let (child, parent) = (&self.files[*from].module, &self.files[*to].module);
            !(parent.len() < child.len() && child.starts_with(parent))
        });
        let mut next: Vec<Vec<usize>> = vec![Vec::new(); self.files.len()];
        for (from, to) in edges.keys() {
            next[*from].push(*to);
        }
        strongly_connected(&next)
            .into_iter()
            .filter(|scc| scc.len() > 1)
            .map(|scc| {
                let members: BTreeSet<usize> = scc.into_iter().collect();
                let ties = edges
                    .iter()
                    .filter(|((a, b), _)| members.contains(a) && members.contains(b))
                    .map(|((a, b), paths)| {
                        format!(
                            "{} -> {}: {}",
                            self.files[*a].path.display(),
                            self.files[*b].path.display(),
                            paths.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
                        )
                    })
                    .collect();
                Circle {
                    files: members
                        .iter()
                        .map(|m| self.files[*m].path.clone())
                        .collect(),
                    ties,
                }
            })
            .collect()
    }

    /// The file that defines what an absolute path names, following re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Option<usize> {
        let (file, prefix) = (0..=path.len())
            .rev()
            .find_map(|n| self.by_module.get(&path[..n]).map(|f| (*f, n)))?;
        let Some(name) = path.get(prefix) else {
            return Some(file);
        };
        let here = &self.files[file];
        if depth > 8 || here.defines.contains(name) {
            return Some(file);
        }
        if let Some(source) = here.reexports.get(name) {
            let mut target = source.clone();
            target.extend(path[prefix + 1..].iter().cloned());
            return self.resolve(&target, depth + 1).or(Some(file));
        }
        for glob in &here.globs {
            let mut target = glob.clone();
            target.extend(path[prefix..].iter().cloned());
            if let Some(found) = self.resolve(&target, depth + 1) {
                let module_of_glob = self.by_module.get(glob.as_slice());
                if Some(&found) != module_of_glob || self.files[found].defines.contains(name) {
                    return Some(found);
                }
            }
        }
        Some(file)
    }
}

impl SourceFile {
    fn parse(path: PathBuf, module: Vec<String>, text: &str) -> Self {
        let code = code_of(text);
        let child = compiled(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;");
        let children = child
            .captures_iter(&code)
            .map(|c| c[1].to_string())
            .collect();
        let definition = compiled(
            r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|const|unsafe|extern\s+\S+)\s+)*(?:fn|struct|enum|trait|type|const|static|union|mod)\s+([A-Za-z_][A-Za-z0-9_]*)",
        );
        let mut defines: BTreeSet<String> = definition
            .captures_iter(&code)
            .map(|c| c[1].to_string())
            .collect();
        let macros = compiled(r"macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)");
        defines.extend(macros.captures_iter(&code).map(|c| c[1].to_string()));
        let mut file = Self {
            path,
            module,
            code,
            children,
            defines,
            reexports: BTreeMap::new(),
            globs: Vec::new(),
        };
        let reexport = compiled(r"(?s)\bpub(?:\([^)]*\))?\s+use\s+([^;]+);");
        for capture in reexport.captures_iter(&file.code.clone()) {
            for (tree_path, alias) in use_tree(&capture[1]) {
                let Some(absolute) = file.absolute(&tree_path) else {
                    continue;
                };
                match alias.as_deref() {
                    Some("*") => file.globs.push(absolute),
                    Some(name) => {
                        file.reexports.insert(name.to_string(), absolute);
                    }
                    None => {}
                }
            }
        }
        file
    }

    /// Every path of this crate that the file names, made absolute.
    fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let uses = compiled(r"(?s)\buse\s+([^;]+);");
        for capture in uses.captures_iter(&self.code) {
            for (tree_path, _) in use_tree(&capture[1]) {
                out.extend(self.absolute(&tree_path));
            }
        }
        let rest = uses.replace_all(&self.code, ";");
        let inline =
            compiled(r"(?:^|[^:A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+)");
        for capture in inline.captures_iter(&rest) {
            let segments: Vec<String> = capture[1].split("::").map(str::to_string).collect();
            out.extend(self.absolute(&segments));
        }
        out
    }

    /// A path as written here, from the crate root; `None` for another crate's or std's.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        let mut target: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.module.clone(),
            "super" => self.module[..self.module.len().saturating_sub(1)].to_vec(),
            name if self.children.contains(name) => {
                let mut here = self.module.clone();
                here.push(name.to_string());
                here
            }
            _ => return None,
        };
        for segment in &segments[1..] {
            match segment.as_str() {
                "super" => {
                    target.pop();
                }
                "self" => {}
                "*" => break,
                name => target.push(name.to_string()),
            }
        }
        Some(target)
    }
}

/// The paths a `use` tree names, each with the name it brings in (`*` for a glob, `None` for
/// `self` or a path that is only a prefix).
fn use_tree(tree: &str) -> Vec<(Vec<String>, Option<String>)> {
    fn walk(prefix: &[String], tree: &str, out: &mut Vec<(Vec<String>, Option<String>)>) {
        let tree = tree.trim().trim_start_matches("::");
        if tree.is_empty() {
            return;
        }
        if let Some(open) = tree.find('{') {
            let head: Vec<String> = tree[..open]
                .split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            let mut base = prefix.to_vec();
            base.extend(head);
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        walk(&base, &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            walk(&base, &inner[start..], out);
            return;
        }
        let (path, alias) = match tree.split_once(" as ") {
            Some((path, alias)) => (path.trim(), Some(alias.trim().to_string())),
            None => (tree, None),
        };
        let mut segments = prefix.to_vec();
        segments.extend(path.split("::").map(|s| s.trim().to_string()));
        let last = segments.last().cloned().unwrap_or_default();
        let name = match (alias, last.as_str()) {
            (Some(alias), _) => Some(alias),
            (None, "*") => Some("*".to_string()),
            (None, "self") => {
                segments.pop();
                None
            }
            (None, last) => Some(last.to_string()),
        };
        out.push((segments, name));
    }
    let mut out = Vec::new();
    walk(&[], tree, &mut out);
    out
}

/// The code of a file without comments, string and character contents, and its test modules.
pub fn code_of(text: &str) -> String {
    let bare = without_comments_and_strings(text);
    let mut out = String::new();
    let mut lines = bare.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        // `#[cfg(test)]` or `#[cfg(all(test, …))]` over a module: a test module, skipped whole.
        let test_cfg = trimmed.starts_with("#[cfg(test)]") || trimmed.starts_with("#[cfg(all(test");
        if test_cfg
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            let header = lines.next().unwrap_or_default();
            let mut depth = braces(header);
            if depth == 0 {
                continue; // `mod tests;`: a file of its own, never read
            }
            for line in lines.by_ref() {
                depth += braces(line);
                if depth <= 0 {
                    break;
                }
            }
            continue;
        }
        out.push_str(trimmed);
        out.push('\n');
    }
    out
}

fn braces(line: &str) -> i64 {
    line.matches('{').count() as i64 - line.matches('}').count() as i64
}

/// The text with comments removed and every string or character literal emptied (`""`, `' '`),
/// line breaks kept, so that neither a `//` in a string nor a brace in a comment misleads.
fn without_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let before = |i: usize, n: usize| i.checked_sub(n).map_or('\0', |j| chars[j]);
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(at(i + 1), '"' | '#')
            && (!is_ident(before(i, 1)) || (before(i, 1) == 'b' && !is_ident(before(i, 2))))
        {
            // A raw string: r"…", r#"…"#, with as many hashes closing as opening.
            let mut j = i + 1;
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|k| at(j + 1 + k) == '#') {
                    j += 1 + hashes;
                    break;
                }
                if chars[j] == '\n' {
                    out.push('\n');
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if at(i) == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}', '\'') or a lifetime ('a).
            if at(i + 1) == '\\' {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                out.push_str("' '");
                i = j + 1;
            } else if at(i + 2) == '\'' {
                out.push_str("' '");
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Tarjan's strongly connected components of a graph given as each node's successors.
fn strongly_connected(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        next: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        counter: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.counter);
        s.low[v] = s.counter;
        s.counter += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.next[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(index) if s.on_stack[w] => s.low[v] = s.low[v].min(index),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut state = State {
        next,
        index: vec![None; next.len()],
        low: vec![0; next.len()],
        on_stack: vec![false; next.len()],
        stack: Vec::new(),
        counter: 0,
        out: Vec::new(),
    };
    for v in 0..next.len() {
        if state.index[v].is_none() {
            visit(&mut state, v);
        }
    }
    state.out
}

fn compiled(pattern: &'static str) -> &'static ::regex::Regex {
    static CACHE: OnceLock<std::sync::Mutex<BTreeMap<&'static str, &'static ::regex::Regex>>> =
        OnceLock::new();
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap();
    cache
        .entry(pattern)
        .or_insert_with(|| Box::leak(Box::new(::regex::Regex::new(pattern).unwrap())))
}

/// The root files (library, binaries) of every crate of the workspace, from `cargo metadata`.
pub fn workspace_roots(workspace: &Path) -> Vec<(String, PathBuf)> {
    let output = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(workspace)
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut roots = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        for target in package["targets"].as_array().into_iter().flatten() {
            let kinds: Vec<&str> = target["kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str())
                .collect();
            if kinds
                .iter()
                .any(|k| matches!(*k, "lib" | "rlib" | "bin" | "proc-macro"))
            {
                roots.push((
                    format!(
                        "{} ({})",
                        package["name"].as_str().unwrap_or("?"),
                        target["name"].as_str().unwrap_or("?")
                    ),
                    PathBuf::from(target["src_path"].as_str().unwrap_or_default()),
                ));
            }
        }
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_use_tree_names_each_path_with_what_it_brings_in() {
        let paths = use_tree("crate::a::{b::{C, d as e}, self, f::*}");
        let flat: Vec<(String, Option<String>)> =
            paths.into_iter().map(|(p, n)| (p.join("::"), n)).collect();
        assert_eq!(
            flat,
            vec![
                ("crate::a::b::C".into(), Some("C".into())),
                ("crate::a::b::d".into(), Some("e".into())),
                ("crate::a".into(), None),
                ("crate::a::f::*".into(), Some("*".into())),
            ]
        );
    }
}
