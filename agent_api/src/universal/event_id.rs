//! [`EventId`]: an event's unique id, kept inline.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

/// An event's unique id (`evt_…`). Read it as a `&str` (it derefs to one); its JSON form is the
/// plain string.
///
/// The ids the SDK makes fit in the struct itself (up to 24 bytes: sequences of up to 11
/// digits): every event is built without an allocation for its id, and freed without one.
///
/// ```
/// use agent_api::universal::EventId;
///
/// let id = EventId::from("evt_a1b2c3d4_7");
/// assert_eq!(id, "evt_a1b2c3d4_7");
/// assert!(id.starts_with("evt_"));
/// assert_eq!(serde_json::to_string(&id).unwrap(), r#""evt_a1b2c3d4_7""#);
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EventId(CompactString);

impl EventId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `evt_<short>_<sequence>`: the id the transcript gives the event at `sequence` of the
    /// session whose short id is `short`.
    pub(crate) fn numbered(short: &str, sequence: u64) -> Self {
        // Not `with_capacity` for the longest number: past 24 bytes of room it would allocate.
        let mut id = CompactString::const_new("evt_");
        id.push_str(short);
        id.push('_');
        id.push_str(itoa::Buffer::new().format(sequence));
        Self(id)
    }

    /// This id with `suffix` appended.
    pub(crate) fn with_suffix(&self, suffix: &str) -> Self {
        let mut id = self.0.clone();
        id.push_str(suffix);
        Self(id)
    }
}

impl Deref for EventId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for EventId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for EventId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for EventId {
    fn from(id: &str) -> Self {
        Self(id.into())
    }
}

impl From<String> for EventId {
    fn from(id: String) -> Self {
        Self(id.into())
    }
}

impl From<EventId> for String {
    fn from(id: EventId) -> Self {
        id.0.into_string()
    }
}

impl PartialEq<str> for EventId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for EventId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for EventId {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_ids_read_as_the_transcript_names_them() {
        assert_eq!(EventId::numbered("a1b2c3d4", 42), "evt_a1b2c3d4_42");
        assert_eq!(EventId::numbered("a1b2c3d4", u64::MAX).as_str(), format!("evt_a1b2c3d4_{}", u64::MAX));
        assert_eq!(EventId::numbered("a1b2c3d4", 7).with_suffix("_s"), "evt_a1b2c3d4_7_s");
    }

    #[test]
    fn ids_the_sdk_makes_are_kept_inline() {
        // 24 bytes: sequences of up to 11 digits, or 9 with a session's `_s` suffix.
        for id in [EventId::numbered("a1b2c3d4", 99_999_999_999), EventId::numbered("a1b2c3d4", 999_999_999).with_suffix("_s")] {
            assert!(!id.0.is_heap_allocated(), "{id} is on the heap");
        }
    }

    #[test]
    fn any_id_read_back_round_trips_whatever_its_length() {
        let long = format!("evt_{}", "x".repeat(100));
        for text in ["evt_1", long.as_str(), ""] {
            let id: EventId = serde_json::from_value(serde_json::Value::from(text)).unwrap();
            assert_eq!(id, text);
            assert_eq!(serde_json::to_value(&id).unwrap(), serde_json::Value::from(text));
        }
    }
}
