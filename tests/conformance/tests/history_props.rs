//! Property tests of the stored-session readers (`agent_api::history`): the session files the
//! pinned CLIs wrote and OpenCode's export (`tests/fixtures/history`), mutated at random (lines dropped, repeated,
//! swapped, cut, bytes flipped, fields replaced by other JSON values or removed, random lines
//! added), read back with zero panics: every read ends with one completion, every event is valid
//! against the universal schema, and the only problems are the unreadable lines themselves.

use std::path::Path;
use std::time::Duration;

use agent_api::history::read_store_file;
use agent_api::kit::Protocol;
use agent_api::universal::UniversalEventBody;
use agent_api::{AgentError, AgentKind};
use agent_api_acp::history::gemini::StoredGeminiSession;
use agent_api_acp::history::qwen::StoredQwenSession;
use agent_api_claude_code::history::StoredClaudeSession;
use agent_api_codex::history::StoredCodexSession;
use agent_api_conformance::{problems, record, schema_errors};
use agent_api_opencode::history::{export_lines, StoredOpenCodeSession};
use proptest::prelude::*;
use serde_json::Value;

/// One random change to a session file's lines.
#[derive(Debug, Clone)]
enum Mutation {
    Drop(usize),
    Repeat(usize),
    Swap(usize, usize),
    Cut(usize, usize),
    FlipByte(usize, usize, u8),
    ReplaceField(usize, usize, Value),
    RemoveField(usize, usize),
    Insert(usize, Vec<u8>),
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
        Just(Value::from("assistant")),
        Just(Value::from("item_completed")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Drop),
        any::<usize>().prop_map(Mutation::Repeat),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Cut(a, b)),
        (any::<usize>(), any::<usize>(), any::<u8>()).prop_map(|(a, b, c)| Mutation::FlipByte(a, b, c)),
        (any::<usize>(), any::<usize>(), json_value()).prop_map(|(a, b, v)| Mutation::ReplaceField(a, b, v)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::RemoveField(a, b)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(a, bytes)| Mutation::Insert(a, bytes)),
    ]
}

/// Applies `f` to the `key`-th field (in a walk of the line's objects) of a JSON line.
fn with_field(line: &mut Vec<u8>, key: usize, f: impl FnOnce(&mut serde_json::Map<String, Value>, String)) {
    let Ok(mut value) = serde_json::from_slice::<Value>(line) else { return };
    let mut object = value.as_object_mut();
    // Walk into a nested object now and then, so payloads and messages change too.
    for depth in 0..3 {
        let Some(map) = object.take() else { return };
        if map.is_empty() {
            return;
        }
        let name = map.keys().nth((key >> (depth * 4)) % map.len()).cloned().unwrap_or_default();
        if key % 3 == depth || !map.get(&name).is_some_and(Value::is_object) {
            f(map, name);
            break;
        }
        object = map.get_mut(&name).and_then(Value::as_object_mut);
    }
    *line = serde_json::to_vec(&value).unwrap_or_default();
}

fn apply(lines: &mut Vec<Vec<u8>>, mutation: Mutation) {
    let n = lines.len().max(1);
    match mutation {
        Mutation::Drop(i) if !lines.is_empty() => {
            lines.remove(i % n);
        }
        Mutation::Repeat(i) if !lines.is_empty() => lines.insert(i % n, lines[i % n].clone()),
        Mutation::Swap(a, b) if !lines.is_empty() => lines.swap(a % n, b % n),
        Mutation::Cut(i, at) if !lines.is_empty() => {
            let line = &mut lines[i % n];
            line.truncate(at % (line.len() + 1));
        }
        Mutation::FlipByte(i, at, byte) if !lines.is_empty() => {
            let line = &mut lines[i % n];
            if !line.is_empty() {
                let at = at % line.len();
                line[at] = byte;
            }
        }
        Mutation::ReplaceField(i, key, value) if !lines.is_empty() => with_field(&mut lines[i % n], key, |map, name| {
            map.insert(name, value);
        }),
        Mutation::RemoveField(i, key) if !lines.is_empty() => with_field(&mut lines[i % n], key, |map, name| {
            map.remove(&name);
        }),
        Mutation::Insert(i, bytes) => lines.insert(i % (lines.len() + 1), bytes.into_iter().filter(|b| *b != b'\n').collect()),
        _ => {}
    }
}

/// The lines an OpenCode export becomes (the reader's input).
fn opencode_lines() -> Vec<Vec<u8>> {
    let text = std::fs::read(agent_bench::fixtures_dir().join("history/opencode/shell.export.json")).unwrap();
    export_lines(&serde_json::from_slice(&text).unwrap()).iter().map(|l| l.to_string().into_bytes()).collect()
}

fn fixture_lines(path: &str) -> Vec<Vec<u8>> {
    let text = std::fs::read(agent_bench::fixtures_dir().join("history").join(path)).unwrap();
    text.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect()
}

/// Reads the mutated file through `protocol` and checks the run.
fn check(kind: &'static str, lines: &[Vec<u8>], protocol: Box<dyn Protocol>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    std::fs::write(&path, lines.join(&b'\n')).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let run = runtime.block_on(async {
        let handle = read_store_file(AgentKind::new(kind).unwrap(), Path::new(&path), protocol, true, true).await.unwrap();
        tokio::time::timeout(Duration::from_secs(20), record(handle)).await
    });
    let run = run.map_err(|_| TestCaseError::fail("the read did not end"))?;
    if let Err(AgentError::Protocol { reason }) = &run.completion {
        prop_assert!(!reason.contains("panicked"), "{}", reason);
    }
    for event in &run.universal {
        prop_assert!(schema_errors(event).is_empty(), "{:?}", schema_errors(event));
        if let UniversalEventBody::AgentUnparsed(d) = &event.body {
            prop_assert!(!d.error.contains("panicked"), "{}", d.error);
        }
    }
    // Unreadable lines are reported as such; whatever else the specs say must hold.
    let other: Vec<String> = problems(&run).into_iter().filter(|p| !p.contains("agent.unparsed")).collect();
    prop_assert!(other.is_empty(), "{:?}", other);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn mutated_claude_code_session_files_read_without_panics(mutations in prop::collection::vec(mutation(), 0..12)) {
        let mut lines = fixture_lines("claude_code/shell.jsonl");
        for m in mutations {
            apply(&mut lines, m);
        }
        check("claude_code", &lines, Box::new(StoredClaudeSession::default()))?;
    }

    #[test]
    fn mutated_codex_rollouts_read_without_panics(mutations in prop::collection::vec(mutation(), 0..12), edit in any::<bool>()) {
        let mut lines = fixture_lines(if edit { "codex/write_edit.jsonl" } else { "codex/shell.jsonl" });
        for m in mutations {
            apply(&mut lines, m);
        }
        check("codex", &lines, Box::new(StoredCodexSession::default()))?;
    }

    #[test]
    fn mutated_gemini_and_qwen_chats_read_without_panics(mutations in prop::collection::vec(mutation(), 0..12), qwen in any::<bool>()) {
        let mut lines = fixture_lines(if qwen { "qwen/shell.jsonl" } else { "gemini/shell.jsonl" });
        for m in mutations {
            apply(&mut lines, m);
        }
        if qwen {
            check("qwen", &lines, Box::new(StoredQwenSession::default()))?;
        } else {
            check("gemini", &lines, Box::new(StoredGeminiSession::default()))?;
        }
    }

    #[test]
    fn mutated_opencode_exports_read_without_panics(mutations in prop::collection::vec(mutation(), 0..12)) {
        let mut lines = opencode_lines();
        for m in mutations {
            apply(&mut lines, m);
        }
        check("opencode", &lines, Box::new(StoredOpenCodeSession::default()))?;
    }

    #[test]
    fn random_lines_read_without_panics(lines in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 0..8)) {
        let lines: Vec<Vec<u8>> = lines.into_iter().map(|l| l.into_iter().filter(|b| *b != b'\n').collect()).collect();
        check("claude_code", &lines, Box::new(StoredClaudeSession::default()))?;
        check("codex", &lines, Box::new(StoredCodexSession::default()))?;
        check("gemini", &lines, Box::new(StoredGeminiSession::default()))?;
        check("qwen", &lines, Box::new(StoredQwenSession::default()))?;
        check("opencode", &lines, Box::new(StoredOpenCodeSession::default()))?;
    }
}
