//! The one implementation of the wrapper-event bounds of seed 004 (`spec/event-envelope.md`).
//!
//! Every wrapper event of every backend passes through [`crate::run::enforce`], which
//! applies these bounds; completion data passes through [`bound_data`]. Enforcing twice changes nothing.

use serde_json::Value;

/// Largest `channel`, in UTF-8 bytes; a longer channel becomes `None`.
pub const CHANNEL_BOUND: usize = 128;
/// Largest `text`, in UTF-8 bytes; longer `TextOutput` text is split into several events.
pub const TEXT_BOUND: usize = 65_536;
/// Largest `message`, in UTF-8 bytes; a longer message is truncated with [`TRUNCATION_SUFFIX`].
pub const MESSAGE_BOUND: usize = 4_096;
/// Largest `data`, in serialized JSON bytes; larger data is replaced by [`oversize_marker`].
pub const DATA_BOUND: usize = 65_536;
/// Appended to a truncated message.
pub const TRUNCATION_SUFFIX: &str = "…(truncated)";

/// `{"dropped":{"reason":"oversize"}}`, the replacement for oversized data.
pub fn oversize_marker() -> Value {
    serde_json::json!({ "dropped": { "reason": "oversize" } })
}

/// `serde_json::to_vec(value).len()`, counted without building the bytes.
pub fn serialized_json_bytes(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, value).expect("a Value always serializes");
    counter.0
}

/// An upper bound of [`serialized_json_bytes`] found by walking the value, without formatting
/// or escaping anything: a string byte takes at most 6 bytes (`\u00XX`), a number at most 24.
fn serialized_json_bytes_at_most(value: &Value) -> usize {
    let string = |s: &str| s.len().saturating_mul(6).saturating_add(2);
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(s) => string(s),
        Value::Array(items) => items.iter().fold(2 + items.len(), |sum, item| {
            sum.saturating_add(serialized_json_bytes_at_most(item))
        }),
        Value::Object(map) => map.iter().fold(2 + 2 * map.len(), |sum, (key, item)| {
            sum.saturating_add(string(key))
                .saturating_add(serialized_json_bytes_at_most(item))
        }),
    }
}

/// Whether `data` serializes to at most [`DATA_BOUND`] bytes. Almost every payload is far
/// below the bound, which the cheap upper bound shows without serializing it.
pub(crate) fn data_fits(data: &Value) -> bool {
    serialized_json_bytes_at_most(data) <= DATA_BOUND || serialized_json_bytes(data) <= DATA_BOUND
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a char boundary.
pub fn utf8_prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Truncates `message` to `bound` bytes with the seed-004 suffix algorithm.
///
/// ```
/// let long = "x".repeat(5000);
/// let cut = agent_api::kit::bounds::truncate_message(&long, 4096);
/// assert_eq!(cut.len(), 4096);
/// assert!(cut.ends_with("…(truncated)"));
/// ```
pub fn truncate_message(message: &str, bound: usize) -> String {
    if message.len() <= bound {
        return message.to_string();
    }
    if bound > TRUNCATION_SUFFIX.len() {
        let mut out = utf8_prefix(message, bound - TRUNCATION_SUFFIX.len()).to_string();
        out.push_str(TRUNCATION_SUFFIX);
        out
    } else {
        utf8_prefix("…", bound).to_string()
    }
}

/// Splits `text` into consecutive pieces of at most `bound` bytes at char boundaries.
/// The pieces concatenate back to `text`; an empty text gives one empty piece.
pub fn split_text(text: &str, bound: usize) -> Vec<&str> {
    assert!(bound >= 4, "a bound below 4 bytes cannot hold every char");
    let mut pieces = Vec::with_capacity(text.len() / bound + 1);
    let mut rest = text;
    loop {
        let piece = utf8_prefix(rest, bound);
        pieces.push(piece);
        rest = &rest[piece.len()..];
        if rest.is_empty() {
            return pieces;
        }
    }
}

/// `data` itself when it fits [`DATA_BOUND`], else [`oversize_marker`].
pub fn bound_data(data: Value) -> Value {
    if data_fits(&data) {
        data
    } else {
        oversize_marker()
    }
}

#[cfg(test)]
mod tests;
