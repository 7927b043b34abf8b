//! [`AgentKind`]: the validated name of an agent backend.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::vocabulary::error::AgentError;

/// The name of an agent backend, such as `my_agent`.
///
/// It always matches `^[a-z][a-z0-9_]*$`; [`AgentKind::new`] checks that.
///
/// ```
/// use agent_api::AgentKind;
/// let kind = AgentKind::new("my_agent").unwrap();
/// assert_eq!(kind.as_str(), "my_agent");
/// assert!(AgentKind::new("My-Agent").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentKind(Cow<'static, str>);

impl AgentKind {
    /// Validates `name` and wraps it.
    pub fn new(name: impl Into<String>) -> Result<Self, AgentError> {
        let name = name.into();
        if is_valid(name.as_bytes()) {
            Ok(Self(Cow::Owned(name)))
        } else {
            Err(AgentError::InvalidAgentKind { value: name })
        }
    }

    /// A kind from a string literal, checked at compile time when used in a `const`.
    ///
    /// # Panics
    /// When `name` does not match `^[a-z][a-z0-9_]*$`.
    pub const fn from_static(name: &'static str) -> Self {
        assert!(
            is_valid(name.as_bytes()),
            "agent kind must match ^[a-z][a-z0-9_]*$"
        );
        Self(Cow::Borrowed(name))
    }

    /// The kind as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

const fn is_valid(bytes: &[u8]) -> bool {
    if bytes.is_empty() || !bytes[0].is_ascii_lowercase() {
        return false;
    }
    let mut i = 1;
    while i < bytes.len() {
        let b = bytes[i];
        if !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
            return false;
        }
        i += 1;
    }
    true
}

impl fmt::Display for AgentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for AgentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AgentKind({})", self.0)
    }
}

impl Serialize for AgentKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for AgentKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        AgentKind::new(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_are_accepted() {
        for name in ["a", "my_agent", "agent2", "x_1_y"] {
            assert_eq!(AgentKind::new(name).unwrap().as_str(), name);
        }
    }

    #[test]
    fn invalid_names_are_rejected_with_the_value() {
        for name in ["", "1agent", "_x", "MyAgent", "my-agent", "a b", "é"] {
            match AgentKind::new(name) {
                Err(AgentError::InvalidAgentKind { value }) => assert_eq!(value, name),
                other => panic!("{name:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn deserializing_validates() {
        assert!(serde_json::from_str::<AgentKind>("\"my_agent\"").is_ok());
        assert!(serde_json::from_str::<AgentKind>("\"Bad\"").is_err());
    }
}
