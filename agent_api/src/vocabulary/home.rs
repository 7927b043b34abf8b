//! Where the agent keeps its config and state for one run, as a request names it ([`Home`]).
//! Making such a home is the homes feature's (`crate::kit::home`).

/// Where the agent keeps its config and state for one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Home {
    /// The user's own directories, as the agent finds them (the default).
    #[default]
    Inherit,
    /// A directory of the run's own for each of the agent's config variables, seeded with `seed`;
    /// the rest of the user's home (`HOME`, XDG directories) stays visible.
    Isolated {
        /// What the new directories start with.
        seed: HomeSeed,
    },
    /// A fresh home with the user's credentials only, and `HOME` and the XDG directories pointed
    /// into it too: none of the user's settings, hooks, MCP servers or memory reach the agent.
    Hermetic,
}

/// What an isolated home starts with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum HomeSeed {
    /// Copies of the user's credential files (login tokens), read-only. API keys in the
    /// environment pass through either way.
    #[default]
    Credentials,
    /// Nothing: the agent starts as on a fresh machine.
    Empty,
}

impl Home {
    /// The capability a backend needs to serve this home, if any.
    pub fn required_capability(&self) -> Option<&'static str> {
        match self {
            Home::Inherit => None,
            Home::Isolated { .. } => Some(agent_api_capabilities::HOME_ISOLATED),
            Home::Hermetic => Some(agent_api_capabilities::HOME_HERMETIC),
        }
    }

    pub(crate) fn seed(&self) -> Option<HomeSeed> {
        match self {
            Home::Inherit => None,
            Home::Isolated { seed } => Some(*seed),
            Home::Hermetic => Some(HomeSeed::Credentials),
        }
    }
}
