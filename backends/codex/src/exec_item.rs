//! The item of an exec event (`item.started|updated|completed`), deserialized straight from the
//! line: the fields the converter reads, each lenient the way a `Value` lookup is (a string field
//! of another JSON type reads as absent), so the typed parse takes every line the `Value` path
//! would, without building the item as a `Value`.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// One exec item. Nested structures the converter reads rarely stay `Value`s.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ExecItem {
    #[serde(default, deserialize_with = "lenient_str")]
    pub(crate) id: Option<String>,
    #[serde(default, rename = "type", deserialize_with = "lenient_str")]
    pub(crate) kind: Option<String>,
    #[serde(default, deserialize_with = "lenient_str")]
    pub(crate) status: Option<String>,
    #[serde(default, deserialize_with = "lenient_str")]
    pub(crate) command: Option<String>,
    #[serde(default, deserialize_with = "lenient_str")]
    pub(crate) aggregated_output: Option<String>,
    #[serde(default, deserialize_with = "lenient_str")]
    pub(crate) text: Option<String>,
    #[serde(default, deserialize_with = "lenient_str")]
    pub(crate) message: Option<String>,
    #[serde(default, deserialize_with = "lenient_str")]
    pub(crate) server: Option<String>,
    #[serde(default, deserialize_with = "lenient_str")]
    pub(crate) tool: Option<String>,
    #[serde(default, deserialize_with = "lenient_str")]
    pub(crate) query: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) exit_code: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) changes: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) error: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) result: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) arguments: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) prompt: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) action: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(crate) items: Option<Value>,
}

/// A string field, `""` when absent or not a string.
pub(crate) fn text(field: &Option<String>) -> &str {
    field.as_deref().unwrap_or("")
}

/// A present field, `null` included (as `Value::get` sees it).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A string, or `None` for any other JSON value (skipped without being built).
fn lenient_str<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct Lenient;
    impl<'de> Visitor<'de> for Lenient {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(self)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(Lenient)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_fields_of_another_type_read_as_absent_and_null_values_stay_present() {
        let item: ExecItem =
            serde_json::from_str(r#"{"id":7,"type":"command_execution","command":{"a":[1]},"exit_code":null,"text":"hi"}"#).unwrap();
        assert_eq!(
            (item.id, item.kind.as_deref(), item.command),
            (None, Some("command_execution"), None)
        );
        assert_eq!(
            (item.exit_code, text(&item.text)),
            (Some(Value::Null), "hi")
        );
    }
}
