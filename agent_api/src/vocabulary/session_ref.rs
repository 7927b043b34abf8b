//! [`SessionRef`]: where a session lives, so resuming it never loses it.
//!
//! A native session id alone is not enough to resume: some agents find a session only from the
//! project directory it ran in, and every agent keeps its sessions per agent. A completion returns
//! a `SessionRef` with all three; [`SessionSelector::Resume`](crate::SessionSelector::Resume) and
//! [`SessionSelector::Fork`](crate::SessionSelector::Fork) take it back, and the run then happens in
//! the session's working directory whatever the request's own `working_dir` says.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::vocabulary::error::AgentError;
use crate::vocabulary::kind::AgentKind;

/// A handle to one agent session: which agent, its native id, and the working directory it runs
/// in. Serialized as JSON (`{"agent":"my_agent","id":"…","working_dir":"/abs/dir"}`), which is what
/// `agent-api run` prints to resume with.
///
/// ```
/// use agent_api::{AgentKind, RunRequest, SessionSelector};
/// use agent_api::request::SessionRef;
/// let session = SessionRef::new(AgentKind::new("my_agent").unwrap(), "thread_1", "/work/project");
/// let again = RunRequest::new("and now?").with_working_dir("/elsewhere").with_session(SessionSelector::Resume(session));
/// // The resume runs where the session lives.
/// assert_eq!(again.session_working_dir(), Some(std::path::Path::new("/work/project")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SessionRef {
    /// The agent the session belongs to; `None` for a bare native id (then any backend takes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentKind>,
    /// The agent's own session id (a session's UUID, a thread id, a `ses_…`, …).
    pub id: String,
    /// The working directory the session runs in; `None` for a bare native id (then the
    /// request's working directory is used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<PathBuf>,
}

impl SessionRef {
    /// A complete handle: agent, native id and working directory.
    pub fn new(agent: AgentKind, id: impl Into<String>, working_dir: impl Into<PathBuf>) -> Self {
        Self {
            agent: Some(agent),
            id: id.into(),
            working_dir: Some(working_dir.into()),
        }
    }

    /// A bare native id, as callers had before handles: no agent check, no working directory.
    pub fn native(id: impl Into<String>) -> Self {
        Self {
            agent: None,
            id: id.into(),
            working_dir: None,
        }
    }

    /// The handle as one JSON line (what `agent-api run` prints).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a handle printed by [`SessionRef::to_json`]; text that is not a JSON object is taken
    /// as a bare native id.
    pub fn parse(text: &str) -> Result<Self, AgentError> {
        let text = text.trim();
        if !text.starts_with('{') {
            return Ok(Self::native(text));
        }
        serde_json::from_str(text).map_err(|e| AgentError::InvalidRequest {
            reason: format!("not a session handle: {e}"),
        })
    }

    /// Fails before spawning when the handle names another agent than `kind`.
    pub(crate) fn check_agent(&self, kind: &AgentKind) -> Result<(), AgentError> {
        match &self.agent {
            Some(agent) if agent != kind => Err(AgentError::InvalidRequest {
                reason: format!(
                    "session `{}` belongs to {agent}, not {kind}",
                    crate::guards::bounds::utf8_prefix(&self.id, 64)
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Fails before spawning when the id could be read as anything but an id: a flag (`-…`), a
    /// path (`/`, `\\`, a leading `.`), whitespace or control characters, or longer than 256
    /// bytes. Every agent's ids (UUIDs, `ses_…`, `T-…`, ACP's strings) fit; a backend narrows it
    /// further with [`crate::AgentBackend::check_session`].
    pub fn check_id(&self) -> Result<(), AgentError> {
        let id = &self.id;
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
        if id.len() > 256
            || !id.starts_with(|c: char| c.is_ascii_alphanumeric())
            || !id.chars().all(plain)
        {
            return Err(AgentError::InvalidRequest {
                reason: format!(
                    "`{}` is not a session id: one is 1 to 256 letters, digits, `-`, `_`, `.` or `:`, starting with a letter or digit",
                    crate::guards::bounds::utf8_prefix(&id.escape_debug().to_string(), 64)
                ),
            });
        }
        Ok(())
    }

    /// The session's working directory, if the handle has one.
    pub fn working_dir(&self) -> Option<&Path> {
        self.working_dir.as_deref()
    }
}

impl From<&str> for SessionRef {
    fn from(id: &str) -> Self {
        Self::native(id)
    }
}

impl From<String> for SessionRef {
    fn from(id: String) -> Self {
        Self::native(id)
    }
}

impl fmt::Display for SessionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(agent) = &self.agent {
            write!(f, "{agent} ")?;
        }
        write!(f, "session {}", self.id)?;
        if let Some(dir) = &self.working_dir {
            write!(f, " in {}", dir.display())?;
        }
        Ok(())
    }
}

/// The handle of session `id` that `kind` ran in `dir` (the current directory when `None`).
pub(crate) fn ran(kind: &AgentKind, id: &str, dir: Option<&Path>) -> SessionRef {
    let dir = dir
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    SessionRef::new(kind.clone(), id, dir)
}

/// Whether `id` is a UUID (`8-4-4-4-12` hex digits), which some agents insist on for a session id.
pub fn is_uuid(id: &str) -> bool {
    uuid::Uuid::try_parse(id).is_ok_and(|_| id.len() == 36)
}

/// `dir` made absolute against the current directory (unchanged when that is unknown), so a handle
/// still points at the same place from another directory.
pub(crate) fn absolute(dir: &Path) -> PathBuf {
    if dir.is_absolute() {
        return dir.to_path_buf();
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(dir))
        .unwrap_or_else(|_| dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_survives_its_json_line_and_a_bare_id_stays_bare() {
        let full = SessionRef::new(AgentKind::new("agent_one").unwrap(), "t-1", "/w/p");
        assert_eq!(SessionRef::parse(&full.to_json()).unwrap(), full);
        assert_eq!(
            SessionRef::parse(" abc ").unwrap(),
            SessionRef::native("abc")
        );
        assert!(matches!(
            SessionRef::parse("{\"agent\":\"Bad Kind\",\"id\":\"x\"}"),
            Err(AgentError::InvalidRequest { .. })
        ));
        assert_eq!(full.to_string(), "agent_one session t-1 in /w/p");
    }

    #[test]
    fn a_chosen_session_id_fits_a_new_session_only_and_must_be_plain() {
        let ok =
            crate::RunRequest::new("x").with_new_session_id("3f0c2a7e-1111-4222-8333-444455556666");
        assert!(ok.check_new_session_id().is_ok());
        assert!(
            is_uuid(ok.new_session_id.as_deref().unwrap())
                && !is_uuid("ses_1")
                && !is_uuid("3f0c2a7e111142228333444455556666")
        );
        let resume = ok
            .clone()
            .with_session(crate::SessionSelector::Resume("a".into()));
        assert!(matches!(
            resume.check_new_session_id(),
            Err(AgentError::InvalidRequest { .. })
        ));
        for bad in ["", "../x", "-ab", "a b", &"a".repeat(129)] {
            let req = crate::RunRequest::new("x").with_new_session_id(bad);
            assert!(
                matches!(
                    req.check_new_session_id(),
                    Err(AgentError::InvalidRequest { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn another_agents_handle_is_refused_and_a_bare_id_fits_any() {
        let one = AgentKind::new("agent_one").unwrap();
        let two = AgentKind::new("agent_two").unwrap();
        assert!(SessionRef::new(one.clone(), "t", "/")
            .check_agent(&two)
            .is_err());
        assert!(SessionRef::new(one.clone(), "t", "/")
            .check_agent(&one)
            .is_ok());
        assert!(SessionRef::native("t").check_agent(&two).is_ok());
    }

    #[test]
    fn an_id_that_could_read_as_a_flag_or_a_path_is_refused() {
        for good in [
            "cd13f027-f751-4948-87e6-a722e591af62",
            "ses_1a2B",
            "T-0f3c",
            "agent-12-3",
            "acp:session.4",
        ] {
            assert!(SessionRef::native(good).check_id().is_ok(), "{good}");
        }
        let long = "a".repeat(257);
        for bad in [
            "",
            "--dangerously-skip-permissions",
            "-r",
            "../../../../etc/passwd",
            "/etc/passwd",
            "a/b",
            "a\\b",
            ".",
            "..",
            ".hidden",
            "a b",
            "a\nb",
            "a\u{200b}b",
            long.as_str(),
        ] {
            assert!(
                matches!(
                    SessionRef::native(bad).check_id(),
                    Err(AgentError::InvalidRequest { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
