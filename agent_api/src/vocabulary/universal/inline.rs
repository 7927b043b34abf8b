//! Short strings of the universal events kept inline: [`EventId`] and [`DeltaText`]. Each is a
//! string of up to 24 bytes stored in the struct itself (longer ones on the heap), read as a
//! `&str`, whose JSON form is the plain string: an event built from a short delta costs no
//! allocation, on the thread that builds it or the one that frees it.

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

/// The string traits of an inline-string type: read as `&str`, made from text, compared with text.
macro_rules! inline_string {
    ($name:ident) => {
        impl $name {
            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The room it holds on the heap, in bytes (0 when inline): what it weighs in the
            /// byte budget beyond its event.
            pub(crate) fn heap_capacity(&self) -> usize {
                if self.0.is_heap_allocated() {
                    self.0.capacity()
                } else {
                    0
                }
            }
        }

        impl Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self.as_str(), f)
            }
        }

        impl From<&str> for $name {
            fn from(text: &str) -> Self {
                Self(text.into())
            }
        }

        /// Kept inline when short (the string's allocation is freed), else its allocation is kept.
        impl From<String> for $name {
            fn from(text: String) -> Self {
                Self(text.into())
            }
        }

        impl From<$name> for String {
            fn from(text: $name) -> Self {
                text.0.into_string()
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                self.as_str() == other
            }
        }
    };
}

inline_string!(EventId);
inline_string!(DeltaText);

impl EventId {
    /// The part every event id of the session `session_id` starts with: `evt_<short>_`, where
    /// `short` is the eight characters after the session id's `sess_`.
    pub(crate) fn prefix_for(session_id: &str) -> Self {
        let short = session_id.get(5..13).unwrap_or(session_id);
        Self(["evt_", short, "_"].concat().into())
    }

    /// `prefix` (see [`EventId::prefix_for`]) followed by `sequence`: the id of the event at
    /// `sequence`. The prefix is made once per session: per event, only the number is written.
    pub(crate) fn numbered(prefix: &EventId, sequence: u64) -> Self {
        prefix.with_suffix(itoa::Buffer::new().format(sequence))
    }

    /// This id with `suffix` appended.
    pub(crate) fn with_suffix(&self, suffix: &str) -> Self {
        let mut id = self.0.clone();
        id.push_str(suffix);
        Self(id)
    }
}

/// The text fragment of an `item.delta` event. Read it as a `&str` (it derefs to one); its JSON
/// form is the plain string.
///
/// A fragment of up to 24 bytes (most streamed tokens) is kept in the struct itself: such a
/// delta event is built and freed without an allocation.
///
/// ```
/// use agent_api::universal::DeltaText;
///
/// let text = DeltaText::from("Hello");
/// assert_eq!(text, "Hello");
/// assert_eq!(text.len(), 5);
/// assert_eq!(serde_json::to_string(&text).unwrap(), r#""Hello""#);
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DeltaText(CompactString);

impl DeltaText {
    /// Most bytes kept inline.
    pub(crate) const INLINE: usize = std::mem::size_of::<CompactString>();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_ids_read_as_the_transcript_names_them() {
        let prefix = EventId::prefix_for("sess_a1b2c3d4e5f6");
        assert_eq!(EventId::numbered(&prefix, 42), "evt_a1b2c3d4_42");
        assert_eq!(
            EventId::numbered(&prefix, u64::MAX).as_str(),
            format!("evt_a1b2c3d4_{}", u64::MAX)
        );
        assert_eq!(
            EventId::numbered(&prefix, 7).with_suffix("_s"),
            "evt_a1b2c3d4_7_s"
        );
        assert_eq!(EventId::numbered(&EventId::prefix_for("x"), 1), "evt_x_1");
    }

    #[test]
    fn ids_the_sdk_makes_are_kept_inline() {
        // 24 bytes: sequences of up to 11 digits, or 9 with a session's `_s` suffix.
        let prefix = EventId::prefix_for("sess_a1b2c3d4e5f6");
        for id in [
            EventId::numbered(&prefix, 99_999_999_999),
            EventId::numbered(&prefix, 999_999_999).with_suffix("_s"),
        ] {
            assert!(!id.0.is_heap_allocated(), "{id} is on the heap");
        }
    }

    #[test]
    fn any_id_read_back_round_trips_whatever_its_length() {
        let long = format!("evt_{}", "x".repeat(100));
        for text in ["evt_1", long.as_str(), ""] {
            let id: EventId = serde_json::from_value(serde_json::Value::from(text)).unwrap();
            assert_eq!(id, text);
            assert_eq!(
                serde_json::to_value(&id).unwrap(),
                serde_json::Value::from(text)
            );
        }
    }

    #[test]
    fn a_short_delta_is_kept_inline_and_weighs_nothing_beyond_its_event() {
        let token = DeltaText::from(String::from(" the"));
        assert!(!token.0.is_heap_allocated());
        assert_eq!(token.heap_capacity(), 0);
        let long = DeltaText::from("a fragment longer than twenty-four bytes");
        assert!(long.heap_capacity() >= long.len());
    }
}
