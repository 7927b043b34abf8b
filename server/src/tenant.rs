//! Tenants: where a tenant's sessions run. Each tenant the operator configured has a
//! working-directory root (a session's `cwd` resolves beneath it, or is the root itself) and an
//! agent home (the agent's `HOME` and XDG base directories point into it), so that one tenant's
//! agents neither work in nor remember another's files. The agents themselves run as the server's
//! user: a tenant that must not read another's files runs its agents through a launcher that
//! confines them (`--via bwrap`, a container).

use std::path::{Path, PathBuf};

use axum::http::StatusCode;

use crate::error::ApiError;

/// Where one tenant's sessions run.
///
/// ```
/// use agent_api_server::{ServerConfig, Tenant};
/// let config = ServerConfig::default()
///     .with_tenant("team-a", Tenant::new("/srv/team-a/work").with_home("/srv/team-a/home"));
/// assert!(config.check().is_ok());
/// assert!(ServerConfig::default().with_tenant("../x", Tenant::new("/srv")).check().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tenant {
    /// The working-directory root: every session's `cwd` resolves beneath it.
    pub root: PathBuf,
    /// The agent home (created 0700 when missing); `None`: the server's own.
    pub home: Option<PathBuf>,
}

impl Tenant {
    /// A tenant working beneath `root`, with the server's agent home.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            home: None,
        }
    }

    /// Gives the tenant's agents a home of its own.
    pub fn with_home(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(home.into());
        self
    }

    /// The agent home `agent-api serve` gives the tenant `name` when its operator names none:
    /// `agent-api/tenants/NAME/home` in the user's data directory (`$XDG_DATA_HOME`,
    /// `~/.local/share` on Linux).
    pub fn default_home(name: &str) -> Option<PathBuf> {
        dirs::data_dir().map(|dir| {
            dir.join("agent-api")
                .join("tenants")
                .join(name)
                .join("home")
        })
    }
}

/// The longest `cwd` a client may name, in bytes.
const MAX_CWD: usize = 4096;

/// The directory a session works in: `cwd` (relative to `root`, or absolute) resolved, its
/// symbolic links followed, to a directory beneath `root` (or `root` itself when `cwd` is
/// `None`). 400 `cwd_invalid` for a path that is not a directory here, 403 `cwd_outside_root`
/// for one that leads out of the root; the root itself missing is the operator's (500).
pub(crate) fn working_dir(root: &Path, cwd: Option<&str>) -> Result<PathBuf, ApiError> {
    let root = root.canonicalize().map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "tenant_root_unavailable",
            format!("the working-directory root of this tenant cannot be used: {e}"),
        )
    })?;
    let Some(cwd) = cwd else {
        return Ok(root);
    };
    let shown = agent_api::display::line(cwd, 256);
    if cwd.is_empty() || cwd.len() > MAX_CWD || cwd.chars().any(char::is_control) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "cwd_invalid",
            format!("cwd `{shown}`: give a directory path of 1 to {MAX_CWD} bytes with no control character"),
        ));
    }
    let named = Path::new(cwd);
    let candidate = match named.is_absolute() {
        true => named.to_path_buf(),
        false => root.join(named),
    };
    // Checked before the file system is asked, so that nothing outside the root is probed.
    let lexical = lexically_beneath(&root, &candidate);
    let outside = || {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "cwd_outside_root",
            format!("cwd `{shown}` is not beneath this tenant's working-directory root"),
        )
    };
    if !lexical {
        return Err(outside());
    }
    let resolved = candidate.canonicalize().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "cwd_invalid",
            format!("cwd `{shown}` is no directory beneath this tenant's working-directory root"),
        )
    })?;
    // A symbolic link beneath the root may point out of it.
    if !resolved.starts_with(&root) {
        return Err(outside());
    }
    if !resolved.is_dir() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "cwd_invalid",
            format!("cwd `{shown}` is not a directory"),
        ));
    }
    Ok(resolved)
}

/// Whether `path`, its `.` and `..` taken as written, stays beneath `root`.
fn lexically_beneath(root: &Path, path: &Path) -> bool {
    use std::path::Component;
    let mut kept: Vec<Component<'_>> = Vec::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if kept.pop().is_none() {
                    return false;
                }
            }
            other => kept.push(other),
        }
    }
    kept.iter().collect::<PathBuf>().starts_with(root)
}

/// `request` with its agent's home in `home` (made 0700 when missing).
pub(crate) fn with_home(
    mut request: agent_api::RunRequest,
    home: &Path,
) -> Result<agent_api::RunRequest, ApiError> {
    crate::private::create_dirs(home).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "tenant_home_unavailable",
            format!("the agent home of this tenant cannot be made: {e}"),
        )
    })?;
    // `HOME`, and the XDG base directories each in its place below it.
    request = request.with_env("HOME", home.to_string_lossy().into_owned());
    for var in agent_api::kit::home::XDG_BASE_DIRS {
        let dir = home.join(var.default_under_home);
        request = request.with_env(var.name, dir.to_string_lossy().into_owned());
    }
    Ok(request)
}

/// The tenants a server knows, by name.
pub(crate) type Tenants = std::collections::BTreeMap<String, Tenant>;

/// Where `request` runs: its session's working directory, else this process's (500
/// `stream_error` when that cannot be read).
pub(crate) fn run_dir(request: &agent_api::RunRequest) -> Result<PathBuf, ApiError> {
    match request.session_working_dir() {
        Some(dir) => Ok(dir.to_path_buf()),
        None => std::env::current_dir().map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "stream_error",
                format!("no working directory: {e}"),
            )
        }),
    }
}

/// `request` of a session of `tenant` (`None`: no tenant's) placed where it runs: in the body's
/// `cwd` beneath its root (the tenant's, else the server's working directory), with the tenant's
/// agent home. 403 `tenant_not_configured` for a tenant `tenants` has no root for; 404
/// `session_not_found` for a `resume` or `fork` of an agent session that is not one of the
/// tenant's (in `store`).
pub(crate) async fn place(
    store: &dyn crate::store::Store,
    tenants: &Tenants,
    request: agent_api::RunRequest,
    tenant: Option<&str>,
    body: &crate::wire::CreateSessionRequest,
) -> Result<agent_api::RunRequest, ApiError> {
    let Some(name) = tenant else {
        let Some(cwd) = body.cwd.as_deref() else {
            return Ok(request);
        };
        let dir = working_dir(&run_dir(&request)?, Some(cwd))?;
        return Ok(request.with_working_dir(dir));
    };
    let config = tenants.get(name).ok_or_else(|| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "tenant_not_configured",
            format!("this server runs no sessions for the tenant `{name}`: its operator gives it a root (--tenant-root {name}=DIR)"),
        )
    })?;
    let native = body
        .settings
        .resume
        .as_deref()
        .or(body.settings.fork.as_deref());
    if let Some(native) = native {
        let theirs = store.sessions().await?.into_iter().any(|record| {
            record.tenant.as_deref() == Some(name)
                && record.native_session_id.as_deref() == Some(native)
        });
        if !theirs {
            return Err(ApiError::no_session(native));
        }
    }
    let dir = working_dir(&config.root, body.cwd.as_deref())?;
    home(tenants, request.with_working_dir(dir), Some(name))
}

/// `request` with the agent home of `tenant`, when it has one of its own.
pub(crate) fn home(
    tenants: &Tenants,
    request: agent_api::RunRequest,
    tenant: Option<&str>,
) -> Result<agent_api::RunRequest, ApiError> {
    let dir = tenant
        .and_then(|name| tenants.get(name))
        .and_then(|t| t.home.as_deref());
    match dir {
        Some(dir) => with_home(request, dir),
        None => Ok(request),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cwd_resolves_beneath_its_root_or_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        std::fs::write(root.join("file"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("in")).unwrap();
        let real = root.canonicalize().unwrap();
        assert_eq!(working_dir(&root, None).unwrap(), real);
        assert_eq!(working_dir(&root, Some("a/b")).unwrap(), real.join("a/b"));
        assert_eq!(working_dir(&root, Some("in/b")).unwrap(), real.join("a/b"));
        assert_eq!(working_dir(&root, Some("a/../a")).unwrap(), real.join("a"));
        let absolute = real.join("a").to_string_lossy().into_owned();
        assert_eq!(working_dir(&root, Some(&absolute)).unwrap(), real.join("a"));
        for (cwd, kind) in [
            ("..", "cwd_outside_root"),
            ("a/../../elsewhere", "cwd_outside_root"),
            ("/etc", "cwd_outside_root"),
            ("out", "cwd_outside_root"),
            ("missing", "cwd_invalid"),
            ("file", "cwd_invalid"),
            ("", "cwd_invalid"),
            ("a\nb", "cwd_invalid"),
        ] {
            assert_eq!(
                working_dir(&root, Some(cwd)).unwrap_err().kind,
                kind,
                "{cwd:?}"
            );
        }
        let long = "a/".repeat(3000);
        assert_eq!(
            working_dir(&root, Some(&long)).unwrap_err().kind,
            "cwd_invalid"
        );
    }
}
