//! Structured-random native input for the property tests of every converter (each backend's
//! parser, the replay readers, the history readers, the framers): recorded lines mutated at random
//! (lines dropped, repeated, swapped, cut, bytes flipped, fields replaced by values of other types or
//! removed, huge strings, deep nesting, random lines added), and the checks every converted run
//! must pass. `AGENT_API_PROPTEST_CASES` raises the case counts for a longer run.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::Value;

use crate::{problems, schema_errors, RunRecord};
use agent_api::universal::UniversalEventBody;
use agent_api::AgentError;

/// `default` proptest cases, or `AGENT_API_PROPTEST_CASES` when set (for long runs).
pub fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("AGENT_API_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig::with_cases(cases)
}

/// Applies `mutations` to `lines` in order.
pub fn mutate(mut lines: Vec<Vec<u8>>, mutations: Vec<Mutation>) -> Vec<Vec<u8>> {
    for m in mutations {
        apply(&mut lines, m);
    }
    lines
}

/// The non-empty lines of a file.
pub fn file_lines(path: &std::path::Path) -> Vec<Vec<u8>> {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// Records `handle` within 20 seconds, or fails the case.
pub async fn record_within(handle: agent_api::RunHandle) -> Result<RunRecord, TestCaseError> {
    tokio::time::timeout(Duration::from_secs(20), crate::record(handle))
        .await
        .map_err(|_| TestCaseError::fail("the run did not end"))
}

/// One random change to a session file's lines.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Drop a line.
    Drop(usize),
    /// Repeat a line.
    Repeat(usize),
    /// Swap two lines.
    Swap(usize, usize),
    /// Cut a line short.
    Cut(usize, usize),
    /// Replace one byte of a line.
    FlipByte(usize, usize, u8),
    /// Replace a field's value by another JSON value (often of another type).
    ReplaceField(usize, usize, Value),
    /// Remove a field.
    RemoveField(usize, usize),
    /// Insert a line of random bytes.
    Insert(usize, Vec<u8>),
    /// A string field replaced by a string of this many bytes (huge strings).
    HugeString(usize, usize, usize),
    /// A field wrapped in this many levels of arrays (deep nesting).
    DeepNest(usize, usize, usize),
}

/// Any JSON value, a few levels deep, with strings agents use as type tags among the leaves.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
        Just(Value::from("assistant")),
        Just(Value::from("item_completed")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Any [`Mutation`].
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Drop),
        any::<usize>().prop_map(Mutation::Repeat),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::Cut(a, b)),
        (any::<usize>(), any::<usize>(), any::<u8>())
            .prop_map(|(a, b, c)| Mutation::FlipByte(a, b, c)),
        (any::<usize>(), any::<usize>(), json_value())
            .prop_map(|(a, b, v)| Mutation::ReplaceField(a, b, v)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::RemoveField(a, b)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 0..64))
            .prop_map(|(a, bytes)| Mutation::Insert(a, bytes)),
        (any::<usize>(), any::<usize>(), 0usize..(1 << 20))
            .prop_map(|(a, b, n)| Mutation::HugeString(a, b, n)),
        (any::<usize>(), any::<usize>(), 0usize..300)
            .prop_map(|(a, b, n)| Mutation::DeepNest(a, b, n)),
    ]
}

/// Applies `f` to the `key`-th field (in a walk of the line's objects) of a JSON line.
fn with_field(
    line: &mut Vec<u8>,
    key: usize,
    f: impl FnOnce(&mut serde_json::Map<String, Value>, String),
) {
    let Ok(mut value) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    let mut object = value.as_object_mut();
    // Walk into a nested object now and then, so payloads and messages change too.
    for depth in 0..3 {
        let Some(map) = object.take() else { return };
        if map.is_empty() {
            return;
        }
        let name = map
            .keys()
            .nth((key >> (depth * 4)) % map.len())
            .cloned()
            .unwrap_or_default();
        if key % 3 == depth || !map.get(&name).is_some_and(Value::is_object) {
            f(map, name);
            break;
        }
        object = map.get_mut(&name).and_then(Value::as_object_mut);
    }
    *line = serde_json::to_vec(&value).unwrap_or_default();
}

/// Applies one mutation to `lines` (indices wrap around, so every mutation applies somewhere).
pub fn apply(lines: &mut Vec<Vec<u8>>, mutation: Mutation) {
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
        Mutation::ReplaceField(i, key, value) if !lines.is_empty() => {
            with_field(&mut lines[i % n], key, |map, name| {
                map.insert(name, value);
            })
        }
        Mutation::RemoveField(i, key) if !lines.is_empty() => {
            with_field(&mut lines[i % n], key, |map, name| {
                map.remove(&name);
            })
        }
        Mutation::HugeString(i, key, len) if !lines.is_empty() => {
            with_field(&mut lines[i % n], key, |map, name| {
                map.insert(name, Value::from("h".repeat(len)));
            })
        }
        Mutation::DeepNest(i, key, depth) if !lines.is_empty() => {
            with_field(&mut lines[i % n], key, |map, name| {
                let inner = map.remove(&name).unwrap_or(Value::Null);
                map.insert(name, (0..depth).fold(inner, |v, _| Value::Array(vec![v])));
            })
        }
        Mutation::Insert(i, bytes) => lines.insert(
            i % (lines.len() + 1),
            bytes.into_iter().filter(|b| *b != b'\n').collect(),
        ),
        _ => {}
    }
}

/// The checks every converted run passes: no converter panicked, every event is valid against
/// the universal schema, and the only findings of [`problems`] are the ones corrupted input causes
/// by itself (unreadable lines, a permission whose tool call was cut away).
pub fn check_run(run: &RunRecord) -> Result<(), TestCaseError> {
    if let Err(AgentError::Protocol { reason }) = &run.completion {
        prop_assert!(!reason.contains("panicked"), "{}", reason);
    }
    for event in &run.universal {
        prop_assert!(
            schema_errors(event).is_empty(),
            "{:?}",
            schema_errors(event)
        );
        if let UniversalEventBody::AgentUnparsed(d) = &event.body {
            prop_assert!(!d.error.contains("panicked"), "{}", d.error);
        }
    }
    // Three findings are the input's, not the converter's: unreadable lines (`agent.unparsed`), an
    // approved permission whose tool-call line was dropped or corrupted (nothing can follow it through),
    // and a permission whose command or call line was corrupted apart from the other.
    let input_caused = |p: &String| {
        p.contains("agent.unparsed")
            || p.contains("which no tool call item has")
            || p.contains("but its tool call")
    };
    let other: Vec<String> = problems(run)
        .into_iter()
        .filter(|p| !input_caused(p))
        .collect();
    prop_assert!(other.is_empty(), "{:?}", other);
    Ok(())
}
