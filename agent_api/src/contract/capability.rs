//! [`CapabilitySet`]: the capability ids one backend advertises.

use std::collections::BTreeSet;

/// An open set of namespaced capability ids (`agent_api.*`, `backend.<kind>.*`).
///
/// ```
/// use agent_api::CapabilitySet;
/// use agent_api_capabilities as caps;
/// let set = CapabilitySet::from_ids([caps::RUN, caps::EVENTS, "backend.scripted.faults"]);
/// assert!(set.contains(caps::RUN));
/// assert!(!set.contains(caps::SESSION_FORK));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapabilitySet(BTreeSet<String>);

impl CapabilitySet {
    /// A set holding these ids.
    pub fn from_ids<I, S>(ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self(ids.into_iter().map(Into::into).collect())
    }

    /// Whether the set holds `id`.
    pub fn contains(&self, id: &str) -> bool {
        self.0.contains(id)
    }

    /// Adds an id.
    pub fn insert(&mut self, id: impl Into<String>) {
        self.0.insert(id.into());
    }

    /// The ids, sorted.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    /// Number of ids.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
