//! The one secret redactor: every string built from agent output that reaches an event message,
//! an error, a log line or a `Debug` dump passes through [`redact`] first.
//!
//! Shapes masked (each replaced by [`REDACTED`]):
//! - API keys by their prefix: `sk-…` (with `sk-ant-…`, `sk-proj-…`), `sk_…`, `rk-…`, `sess-…`;
//!   also glued to the word before them (`xsk-…`, `tokensk-proj-…`) when the key has a stretch of
//!   at least 16 letters and digits mixed, which words and hyphenated names do not;
//! - bearer tokens, the token itself (`Bearer abc` → `Bearer [redacted]`);
//! - the value of a secret-named assignment: `api_key=…`, `key: …`, `"token": "…"`, `password='…'`,
//!   also when the value is quoted or on the next line (`key:\n  …`);
//! - URL query strings, which often carry keys (`https://h/p?key=…` → `https://h/p`).
//!
//! ```
//! let text = agent_api::kit::secrets::redact("api_key=\"sk-ant-abc123\" and Authorization: Bearer eyJhbGci");
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
    let rule = |pattern: &str, replacement| Rule {
        pattern: Regex::new(pattern).expect("the secret patterns compile"),
        replacement,
    };
    vec![
        // Keys recognisable by their prefix wherever they appear.
        // Not after a letter or digit (`task-list`), but after `_` (`error_sk-…`).
        rule(
            r"(^|[^A-Za-z0-9])(?:sk|rk|sess)[-_][A-Za-z0-9_\-]{3,}",
            "${1}[redacted]",
        ),
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

/// What every match of one of [`RULES`] contains (compared ignoring ASCII case): `sk-`,
/// `bearer`, a secret-like field name, a URL's `://`.
const TRIGGERS: &[&str] = &[
    "sk-",
    "sk_",
    "rk-",
    "rk_",
    "sess-",
    "sess_",
    "bearer",
    "key",
    "token",
    "secret",
    "passw",
    "authorization",
    "credential",
    "://",
];

/// Whether one of [`RULES`] may match `text`. Most texts hold none of the [`TRIGGERS`]: they
/// are returned as they are without compiling or running the patterns, which would cost
/// each run the patterns' memory. Non-ASCII text always goes through them (Unicode case
/// folding matches `K` to `k`).
fn may_hold_secret(text: &str) -> bool {
    // One pass over the text for all the triggers at once (every text event goes through here).
    static SCAN: LazyLock<aho_corasick::AhoCorasick> = LazyLock::new(|| {
        aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(TRIGGERS)
            .expect("the triggers build an automaton")
    });
    !text.is_ascii() || SCAN.is_match(text)
}

/// `text` with every known secret shape masked; borrowed when nothing was masked.
pub fn redact(text: &str) -> Cow<'_, str> {
    if !may_hold_secret(text) {
        return Cow::Borrowed(text);
    }
    apply_rules(text)
}

fn apply_rules(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for rule in RULES.iter() {
        if let Cow::Owned(replaced) = rule.pattern.replace_all(&out, rule.replacement) {
            out = Cow::Owned(replaced);
        }
    }
    if let Cow::Owned(replaced) = mask_glued_keys(&out) {
        out = Cow::Owned(replaced);
    }
    out
}

/// Keys glued to the word before them, which the prefix rule (a key after a non-alphanumeric
/// character) leaves: `xsk-…`, `=tokensk-proj-…`. Only a match whose body has a stretch of 16 or
/// more letters and digits holding both is a key: `task-management-dashboard` and
/// `desk-internationalization` are words.
fn mask_glued_keys(text: &str) -> Cow<'_, str> {
    static GLUED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?:sk|rk|sess)[-_][A-Za-z0-9_\-]{16,}")
            .expect("the glued-key pattern compiles")
    });
    let random = |key: &str| {
        key.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|stretch| {
                stretch.len() >= 16
                    && stretch.bytes().any(|b| b.is_ascii_digit())
                    && stretch.bytes().any(|b| b.is_ascii_alphabetic())
            })
    };
    if !GLUED.find_iter(text).any(|found| random(found.as_str())) {
        return Cow::Borrowed(text);
    }
    GLUED.replace_all(text, |found: &regex::Captures<'_>| {
        if random(&found[0]) {
            REDACTED.to_string()
        } else {
            found[0].to_string()
        }
    })
}

/// What an agent's explanation becomes when it has no words: an error's text never ends in `: `.
pub const NO_EXPLANATION: &str = "(no explanation given)";

/// [`redact`], then cut to `max` bytes (on a char boundary) with the `…(truncated)` suffix of
/// [`crate::kit::bounds::truncate_message`]: the form an agent's explanation takes in an error.
/// Blank text becomes [`NO_EXPLANATION`].
pub fn redact_bounded(text: &str, max: usize) -> String {
    let text = redact(text);
    if text.trim().is_empty() {
        return crate::guards::bounds::truncate_message(NO_EXPLANATION, max);
    }
    crate::guards::bounds::truncate_message(text.trim(), max)
}

/// `Debug` for an environment map that shows the variable names only, never their values.
///
/// ```
/// use std::collections::BTreeMap;
/// let env = BTreeMap::from([("OPENAI_API_KEY".to_string(), "sk-live-123".to_string())]);
/// let shown = format!("{:?}", agent_api::kit::secrets::EnvNames(&env));
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
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, Hidden)))
            .finish()
    }
}

/// Whether a variable, flag or field name names a secret (`OPENAI_API_KEY`, `--api-token`,
/// `MY_AGENT_SERVER_PASSWORD`, `auth`).
pub fn is_secret_name(name: &str) -> bool {
    static NAME: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)(api[_\-]?key|apikey|(^|[_\-])key$|token|secret|password|passwd|auth|credential|cookie)")
            .expect("the secret-name pattern compiles")
    });
    NAME.is_match(name.trim_start_matches('-'))
}

/// The values a run hands its agent that are secrets, so that they can be masked wherever the
/// agent echoes them: the values of secret-named environment variables, of secret-named
/// `--flag=value` or `name=value` arguments, and the argument after a secret-named `--flag`.
pub fn secret_values<'a>(
    env: impl IntoIterator<Item = (&'a str, &'a str)>,
    args: &[String],
) -> Vec<String> {
    let mut values: Vec<String> = env
        .into_iter()
        .filter(|(k, _)| is_secret_name(k))
        .map(|(_, v)| v.to_string())
        .collect();
    for (i, arg) in args.iter().enumerate() {
        if let Some((name, value)) = arg.split_once('=') {
            if is_secret_name(name) {
                values.push(value.trim_matches(|c| c == '"' || c == '\'').to_string());
            }
        } else if arg.starts_with('-') && is_secret_name(arg) {
            values.extend(args.get(i + 1).cloned());
        }
    }
    // Values too short to be a secret would only mask ordinary words.
    values.retain(|v| v.len() >= 6);
    values.sort();
    values.dedup();
    values
}

/// [`redact`], then every one of `values` (from [`secret_values`]) replaced by [`REDACTED`].
pub fn redact_with<'t>(text: &'t str, values: &[String]) -> Cow<'t, str> {
    let mut out = redact(text);
    for value in values {
        if out.contains(value.as_str()) {
            out = Cow::Owned(out.replace(value.as_str(), REDACTED));
        }
    }
    out
}

/// `Debug` for an argument list that masks the secret values in it (see [`secret_values`]).
///
/// ```
/// let args = vec!["--api-key".to_string(), "hunter2-live".to_string(), "--token=abcdef99".to_string()];
/// let shown = format!("{:?}", agent_api::kit::secrets::ArgsShown(&args));
/// assert!(shown.contains("--api-key") && !shown.contains("hunter2-live") && !shown.contains("abcdef99"));
/// ```
pub struct ArgsShown<'a>(pub &'a [String]);

impl fmt::Debug for ArgsShown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = secret_values([], self.0);
        f.debug_list()
            .entries(self.0.iter().map(|arg| redact_with(arg, &values)))
            .finish()
    }
}

/// `Debug` of any value with [`redact`] applied to the text, for fields that may carry keys
/// (free-form extension options, argv held as JSON).
pub struct Redacted<T>(pub T);

impl<T: fmt::Debug> fmt::Debug for Redacted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&format!("{:?}", self.0)))
    }
}

#[cfg(test)]
mod tests;
