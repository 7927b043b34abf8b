//! Typed per-backend options, carried in a [`RunRequest`]'s extensions.
//!
//! A backend declares its options as one serde struct and implements [`BackendOptions`] for it;
//! callers attach it with [`RunRequest::with_options`], and the backend reads it back with
//! [`RunRequest::options`]. On the wire (and for callers that only have JSON, such as the
//! `agent-api` tool) each field is the extension key `backend.<kind>.<field>`, so the typed and the
//! keyed forms are one mechanism: the struct is the single list of keys, their types and their
//! defaults, and a key the struct does not have, or a value of the wrong shape, is a typed error
//! ([`AgentError::UnknownExtension`], [`AgentError::InvalidExtension`]) before anything is spawned.
//!
//! ```
//! use agent_api::kit::options::extension_keys;
//! use agent_api::request::BackendOptions;
//! use agent_api::RunRequest;
//! use serde::{Deserialize, Serialize};
//!
//! /// Options of an imaginary `echo` backend.
//! #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
//! #[serde(default, deny_unknown_fields)]
//! struct EchoOptions {
//!     /// Repeat the answer this many times.
//!     repeat: Option<u32>,
//! }
//!
//! impl BackendOptions for EchoOptions {
//!     const KIND: &'static str = "echo";
//! }
//!
//! let request = RunRequest::new("hi").with_options(&EchoOptions { repeat: Some(3) });
//! assert_eq!(request.extensions["backend.echo.repeat"], 3);
//! assert_eq!(request.options::<EchoOptions>().unwrap(), EchoOptions { repeat: Some(3) });
//! assert_eq!(extension_keys::<EchoOptions>(), ["backend.echo.repeat"]);
//!
//! let wrong = RunRequest::new("hi").with_extension("backend.echo.repeat", "three".into());
//! assert!(matches!(wrong.options::<EchoOptions>(), Err(agent_api::AgentError::InvalidExtension { .. })));
//! ```

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use serde::de::{self, DeserializeOwned, Visitor};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::vocabulary::error::AgentError;
use crate::vocabulary::request::RunRequest;

/// The typed options of one backend: a serde struct whose fields are the backend's extension
/// options. Derive `Serialize`, `Deserialize` and `Default`, with `#[serde(default)]` so that absent
/// keys take their defaults; don't use `#[serde(flatten)]` (the keys are read from the struct's
/// field list).
pub trait BackendOptions: Serialize + DeserializeOwned + Default + 'static {
    /// The agent kind the options belong to (`my_agent`): keys are `backend.<KIND>.<field>`.
    const KIND: &'static str;
}

/// Every extension key of `O`, in field order (what [`crate::BackendInfo::extension_keys`]
/// returns for a backend whose options are `O`).
pub fn extension_keys<O: BackendOptions>() -> &'static [&'static str] {
    static KEYS: OnceLock<Mutex<HashMap<TypeId, &'static [&'static str]>>> = OnceLock::new();
    let mut keys = KEYS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    keys.entry(TypeId::of::<O>()).or_insert_with(|| {
        // Once per options type, for the life of the process: the keys are as static as the type.
        let owned: Vec<&'static str> = field_names::<O>()
            .iter()
            .map(|field| &*Box::leak(format!("backend.{}.{field}", O::KIND).into_boxed_str()))
            .collect();
        Box::leak(owned.into_boxed_slice())
    })
}

impl RunRequest {
    /// Attaches typed backend options: every field that is set becomes the extension
    /// `backend.<kind>.<field>`, replacing what the request held for that backend before.
    pub fn with_options<O: BackendOptions>(mut self, options: &O) -> Self {
        let prefix = format!("backend.{}.", O::KIND);
        self.extensions.retain(|key, _| !key.starts_with(&prefix));
        if let Ok(Value::Object(fields)) = serde_json::to_value(options) {
            for (field, value) in fields {
                if !value.is_null() {
                    self.extensions.insert(format!("{prefix}{field}"), value);
                }
            }
        }
        self
    }

    /// Reads the typed options of `O`'s backend from the extensions; absent keys take their
    /// defaults. A `backend.<kind>.*` key that `O` does not have is
    /// [`AgentError::UnknownExtension`]; a value of the wrong shape is
    /// [`AgentError::InvalidExtension`] naming the key.
    pub fn options<O: BackendOptions>(&self) -> Result<O, AgentError> {
        let prefix = format!("backend.{}.", O::KIND);
        let known = extension_keys::<O>();
        let mut fields = Map::new();
        for (key, value) in self
            .extensions
            .iter()
            .filter(|(key, _)| key.starts_with(&prefix))
        {
            if !known.contains(&key.as_str()) {
                return Err(unknown_key(O::KIND, key, known));
            }
            fields.insert(key[prefix.len()..].to_string(), value.clone());
        }
        deserialize_fields(&prefix, fields)
    }
}

/// Reads `fields` (field name to value) as `O`, naming the first field that does not fit.
fn deserialize_fields<O: BackendOptions>(
    prefix: &str,
    fields: Map<String, Value>,
) -> Result<O, AgentError> {
    serde_path_to_error::deserialize(Value::Object(fields)).map_err(|e| {
        let field = e
            .path()
            .iter()
            .next()
            .map(|segment| segment.to_string())
            .unwrap_or_default();
        AgentError::InvalidExtension {
            key: format!("{prefix}{field}"),
            reason: e.into_inner().to_string(),
        }
    })
}

/// The error for an extension key the backend `kind` does not know, listing the ones it does.
pub fn unknown_key(kind: &str, key: &str, known: &[&str]) -> AgentError {
    AgentError::UnknownExtension {
        kind: kind.to_string(),
        key: key.to_string(),
        known: known.iter().map(|k| k.to_string()).collect(),
    }
}

/// The extension value that the text `text` gives `O`'s option `key`, typed by `O` itself: the
/// text read as JSON when the field takes that (a number, a boolean, a list), else the text as a
/// string. What `--option KEY=VALUE` uses, so `delay_ms=0` is a number and `scenario=tour` a string.
/// A key `O` does not have is [`AgentError::UnknownExtension`] listing the ones it has; text that
/// fits neither way is [`AgentError::InvalidExtension`].
///
/// ```
/// # use agent_api::kit::options::value_from_text;
/// # use agent_api::request::BackendOptions;
/// # #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
/// # #[serde(default, deny_unknown_fields)]
/// # struct EchoOptions { repeat: Option<u32>, voice: Option<String> }
/// # impl BackendOptions for EchoOptions { const KIND: &'static str = "echo"; }
/// assert_eq!(value_from_text::<EchoOptions>("backend.echo.repeat", "3").unwrap(), 3);
/// assert_eq!(value_from_text::<EchoOptions>("backend.echo.voice", "3").unwrap(), "3");
/// let err = value_from_text::<EchoOptions>("backend.echo.volume", "3").unwrap_err();
/// assert!(err.to_string().contains("backend.echo.repeat, backend.echo.voice"), "{err}");
/// ```
pub fn value_from_text<O: BackendOptions>(key: &str, text: &str) -> Result<Value, AgentError> {
    let prefix = format!("backend.{}.", O::KIND);
    let known = extension_keys::<O>();
    let Some(field) = key.strip_prefix(&prefix).filter(|_| known.contains(&key)) else {
        return Err(unknown_key(O::KIND, key, known));
    };
    let fits = |value: &Value| {
        deserialize_fields::<O>(
            &prefix,
            Map::from_iter([(field.to_string(), value.clone())]),
        )
        .map(|_| ())
    };
    let as_json = serde_json::from_str::<Value>(text)
        .ok()
        .filter(|value| !value.is_null());
    let json_error = match as_json {
        Some(value) => match fits(&value) {
            Ok(()) => return Ok(value),
            Err(error) => Some(error),
        },
        None => None,
    };
    let as_text = Value::String(text.to_string());
    match fits(&as_text) {
        Ok(()) => Ok(as_text),
        Err(error) => Err(json_error.unwrap_or(error)),
    }
}

/// The field names of a struct, as its `Deserialize` implementation announces them.
fn field_names<O: DeserializeOwned>() -> &'static [&'static str] {
    let mut found = None;
    let _ = O::deserialize(FieldNames { found: &mut found });
    found.unwrap_or(&[])
}

/// A deserializer that only records the field list a struct asks for, then stops.
struct FieldNames<'a> {
    found: &'a mut Option<&'static [&'static str]>,
}

impl<'de> de::Deserializer<'de> for FieldNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("backend options must be a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.found = Some(fields);
        Err(de::Error::custom("field names recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}
