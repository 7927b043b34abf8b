//! The one secret redactor: every string built from agent output that reaches an event message,
//! an error, a log line or a `Debug` dump passes through [`redact`] first.
//!
//! Shapes masked (each replaced by [`REDACTED`]):
//! - API keys by their prefix: `sk-…` (with `sk-ant-…`, `sk-proj-…`), `sk_…`, `rk-…`, `sess-…`;
//! - bearer tokens, the token itself (`Bearer abc` → `Bearer [redacted]`);
//! - the value of a secret-named assignment: `api_key=…`, `key: …`, `"token": "…"`, `password='…'`,
//!   also when the value is quoted or on the next line (`key:\n  …`);
//! - URL query strings, which often carry keys (`https://h/p?key=…` → `https://h/p`).
//!
//! ```
//! let text = agent_api::secrets::redact("api_key=\"sk-ant-abc123\" and Authorization: Bearer eyJhbGci");
//! assert!(!text.contains("sk-ant-abc123") && !text.contains("eyJhbGci"));
//! ```

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

struct Rule {
    pattern: Regex,
    replacement: &'static str,
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rule = |pattern: &str, replacement| Rule { pattern: Regex::new(pattern).expect("the secret patterns compile"), replacement };
    vec![
        // Keys recognisable by their prefix wherever they appear.
        // Not after a letter or digit (`task-list`), but after `_` (`error_sk-…`).
        rule(r"(^|[^A-Za-z0-9])(?:sk|rk|sess)[-_][A-Za-z0-9_\-]{3,}", "${1}[redacted]"),
        // `Bearer <token>`: the token, not just the word.
        rule(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]+", "$1 [redacted]"),
        // A secret-named field and its value: `api_key=…`, `"key": "…"`, `token:\n …`.
        rule(
            r#"(?i)(\b(?:[a-z0-9]+[_\-])*(?:api[_\-]?key|apikey|key|token|secret|password|passwd|authorization|credentials?)\b["']?)(\s*[:=]\s*)(?:"[^"]*"|'[^']*'|[^\s"',;}&]+)"#,
            "$1$2[redacted]",
        ),
        // Query strings of URLs.
        rule(r"(https?://[^\s?#]+)\?[^\s#]*", "$1"),
    ]
});

/// `text` with every known secret shape masked; borrowed when nothing was masked.
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for rule in RULES.iter() {
        if let Cow::Owned(replaced) = rule.pattern.replace_all(&out, rule.replacement) {
            out = Cow::Owned(replaced);
        }
    }
    out
}

/// [`redact`], then cut to `max` bytes (on a char boundary) with the `…(truncated)` suffix of
/// [`crate::bounds::truncate_message`]: the form an agent's explanation takes in an error.
pub fn redact_bounded(text: &str, max: usize) -> String {
    crate::bounds::truncate_message(redact(text).trim(), max)
}

/// `Debug` for an environment map that shows the variable names only, never their values.
///
/// ```
/// use std::collections::BTreeMap;
/// let env = BTreeMap::from([("OPENAI_API_KEY".to_string(), "sk-live-123".to_string())]);
/// let shown = format!("{:?}", agent_api::secrets::EnvNames(&env));
/// assert!(shown.contains("OPENAI_API_KEY") && !shown.contains("sk-live-123"));
/// ```
pub struct EnvNames<'a>(pub &'a BTreeMap<String, String>);

impl fmt::Debug for EnvNames<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Hidden;
        impl fmt::Debug for Hidden {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(REDACTED)
            }
        }
        f.debug_map().entries(self.0.keys().map(|k| (k, Hidden))).finish()
    }
}

#[cfg(test)]
mod tests;
