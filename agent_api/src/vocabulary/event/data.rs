//! [`EventData`]: the `data` of a wrapper event. Most of it is JSON; the tools facet of a tool
//! event is kept typed and becomes JSON only when someone reads it as JSON or serializes it,
//! which most callers of the wrapper view never do.

use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::vocabulary::tools_facet::ToolsFacet;

/// The structured, safe payload of an [`AgentWrapperEvent`](super::AgentWrapperEvent).
///
/// It reads as a [`serde_json::Value`] (it dereferences to one, and compares and serializes as
/// one); [`EventData::tools_facet`] gives a tool event's facet without going through JSON.
///
/// ```
/// use agent_api::run::EventData;
/// use agent_api::run::{ToolPhase, ToolStatus, ToolsFacet};
/// let data = EventData::from(ToolsFacet::new("command_execution", ToolPhase::Start, ToolStatus::Running));
/// assert_eq!(data.tools_facet().map(|f| f.kind.as_str()), Some("command_execution"));
/// assert_eq!(data["tool"]["phase"], "start");
/// assert_eq!(data["schema"], "agent_api.tools.structured.v1");
/// assert_eq!(data, EventData::from(data.clone().into_value()), "the same payload, typed or JSON");
/// ```
#[derive(Clone)]
pub struct EventData(Repr);

#[derive(Clone)]
enum Repr {
    Json(Value),
    /// A tools facet, and its JSON form once someone asked for it.
    Tools(Box<ToolsFacet>, OnceLock<Value>),
}

impl EventData {
    /// The tools facet, when this is one (built typed by the projection).
    pub fn tools_facet(&self) -> Option<&ToolsFacet> {
        match &self.0 {
            Repr::Tools(facet, _) => Some(facet),
            Repr::Json(_) => None,
        }
    }

    /// The payload as JSON.
    pub fn as_value(&self) -> &Value {
        match &self.0 {
            Repr::Json(value) => value,
            Repr::Tools(facet, json) => json.get_or_init(|| facet.to_data()),
        }
    }

    /// The payload as owned JSON.
    pub fn into_value(self) -> Value {
        match self.0 {
            Repr::Json(value) => value,
            Repr::Tools(facet, json) => json.into_inner().unwrap_or_else(|| facet.to_data()),
        }
    }

    /// Whether the payload serializes within [`crate::kit::bounds::DATA_BOUND`]; a facet is checked
    /// by an upper bound of its size, and as JSON only when that bound is over.
    pub(crate) fn bounded(self) -> Self {
        match &self.0 {
            Repr::Tools(facet, _)
                if facet.serialized_bytes_at_most() <= crate::guards::bounds::DATA_BOUND =>
            {
                self
            }
            _ => Self(Repr::Json(crate::guards::bounds::bound_data(
                self.into_value(),
            ))),
        }
    }

    /// Whether the payload fits [`crate::kit::bounds::DATA_BOUND`].
    pub(crate) fn fits(&self) -> bool {
        match &self.0 {
            Repr::Tools(facet, _)
                if facet.serialized_bytes_at_most() <= crate::guards::bounds::DATA_BOUND =>
            {
                true
            }
            _ => crate::guards::bounds::data_fits(self.as_value()),
        }
    }
}

impl std::ops::Deref for EventData {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.as_value()
    }
}

impl From<Value> for EventData {
    fn from(value: Value) -> Self {
        Self(Repr::Json(value))
    }
}

impl From<ToolsFacet> for EventData {
    fn from(facet: ToolsFacet) -> Self {
        Self(Repr::Tools(Box::new(facet), OnceLock::new()))
    }
}

impl From<EventData> for Value {
    fn from(data: EventData) -> Self {
        data.into_value()
    }
}

impl PartialEq for EventData {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Tools(a, _), Repr::Tools(b, _)) => a == b,
            _ => self.as_value() == other.as_value(),
        }
    }
}

impl PartialEq<EventData> for Value {
    fn eq(&self, other: &EventData) -> bool {
        self == other.as_value()
    }
}

impl PartialEq<Value> for EventData {
    fn eq(&self, other: &Value) -> bool {
        self.as_value() == other
    }
}

impl std::fmt::Debug for EventData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Repr::Json(value) => value.fmt(f),
            Repr::Tools(facet, _) => facet.fmt(f),
        }
    }
}

impl Serialize for EventData {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Through the JSON form, so that the text is the same (keys in order) however it was built.
        self.as_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for EventData {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Self::from)
    }
}
