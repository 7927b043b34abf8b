//! [`CapabilitySet`]: the capability ids one backend advertises.

use std::collections::BTreeSet;

/// An open set of namespaced capability ids (`agent_api.*`, `backend.<kind>.*`).
///
/// ```
/// use agent_api::CapabilitySet;
/// use agent_api_capabilities as caps;
/// let set = CapabilitySet::from_ids([caps::RUN, caps::EVENTS, "backend.my_agent.faults"]);
/// assert!(set.contains(caps::RUN));
/// assert!(!set.contains(caps::SESSION_FORK));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapabilitySet(BTreeSet<String>);

impl CapabilitySet {
    /// The set without the capabilities this build of `agent_api` cannot serve: caller tools
    /// without its `caller-tools` feature, an output schema without `structured-output`. Every
    /// backend's [`capabilities`](crate::BackendInfo::capabilities) passes through it, so what a
    /// backend advertises is what this build does.
    pub fn in_this_build(mut self) -> Self {
        for (id, _) in crate::vocabulary::capability::UNBUILT {
            self.0.remove(*id);
        }
        self
    }

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

/// The capabilities this build was compiled without, each with the cargo feature that brings it.
pub(crate) const UNBUILT: &[(&str, &str)] = &[
    #[cfg(not(feature = "caller-tools"))]
    (agent_api_capabilities::CALLER_TOOLS, "caller-tools"),
    #[cfg(not(feature = "structured-output"))]
    (agent_api_capabilities::OUTPUT_SCHEMA, "structured-output"),
];

/// [`AgentError::FeatureNotBuilt`](crate::AgentError::FeatureNotBuilt) for `capability`, if this
/// build was compiled without it.
pub(crate) fn check_built(capability: &str) -> Result<(), crate::vocabulary::error::AgentError> {
    match UNBUILT.iter().find(|(id, _)| *id == capability) {
        Some((id, feature)) => Err(crate::vocabulary::error::AgentError::FeatureNotBuilt {
            capability: (*id).to_string(),
            feature: (*feature).to_string(),
        }),
        None => Ok(()),
    }
}
