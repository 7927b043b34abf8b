//! The bubblewrap argv: the filesystem read-only but for the run's own directories.
//!
//! The agent's `HOME` is writable when it is the run's own (a home the SDK or the caller made for
//! it); when it is the caller's real home (`--home inherit`), only the agent's declared state in it
//! ([`CommandSpec::home_state`]) is, so an agent cannot plant `~/.bashrc`, `~/.ssh/authorized_keys`
//! or another tool's hooks. What the run needs from under `/tmp` (which the sandbox replaces with
//! a fresh one), the agent's program included, is bound in read-only.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Bwrap;
use crate::kit::command::CommandSpec;

/// The `bwrap` arguments (up to and including `--`) for `spec`'s agent working in `cwd`, whose
/// environment is `env`.
pub(super) fn args(
    settings: &Bwrap,
    cwd: &Path,
    env: &BTreeMap<String, String>,
    spec: &CommandSpec,
    program: &Path,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--die-with-parent",
        "--unshare-pid",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    if !settings.network {
        args.push("--unshare-net".into());
    }
    // Later mounts go over earlier ones: the run's directories go over the fresh /tmp (tests and
    // callers often work under it), and the caller's read-only ones over everything.
    let home = env.get("HOME").map(PathBuf::from);
    let real_home = home.as_deref().is_some_and(is_callers_home);
    // The real home stays read-only: only the agent's own state in it is writable. A declared
    // state folder that does not exist yet (a first run) is made now, private, so that it can be
    // bound writable: the agent could not make it in the read-only home (EROFS).
    let home_dirs: Vec<PathBuf> = match &home {
        Some(home) if real_home => spec
            .home_state
            .iter()
            .map(|state| home.join(state))
            .inspect(|state| create_state_folder(state))
            .collect(),
        Some(home) => vec![home.clone()],
        None => Vec::new(),
    };
    let vars = ["TMPDIR"]
        .into_iter()
        .chain(spec.state_vars.iter().map(String::as_str));
    let env_dirs = vars.filter_map(|name| env.get(name)).map(PathBuf::from);
    let own = spec.writable_dirs.iter().chain(&settings.writable).cloned();
    let rw = std::iter::once(cwd.to_path_buf())
        .chain(home_dirs)
        .chain(env_dirs)
        .chain(own);
    let mut bound: Vec<PathBuf> = Vec::new();
    for dir in rw {
        // A declared state file (`~/.my-agent.json`) is bound as a file; anything else must be a folder.
        let bindable = dir.is_dir() || (real_home && dir.is_file());
        if bindable && !bound.contains(&dir) {
            args.extend([
                "--bind".into(),
                dir.clone().into_os_string(),
                dir.clone().into_os_string(),
            ]);
            bound.push(dir);
        }
    }
    // The run's own files (a config the SDK wrote under the sandbox's fresh /tmp, say), and the
    // program itself where the fresh /tmp would hide it (a build under a checkout in /tmp).
    let program_paths = [
        program.to_path_buf(),
        program.canonicalize().unwrap_or_default(),
    ];
    let hidden_program = program_paths.into_iter().filter(|p| p.starts_with("/tmp"));
    for path in settings
        .read_only
        .iter()
        .chain(&spec.local_files)
        .cloned()
        .chain(hidden_program)
        .filter(|p| p.exists())
    {
        args.extend([
            "--ro-bind".into(),
            path.clone().into_os_string(),
            path.into_os_string(),
        ]);
    }
    // Last: over everything above, so that nothing binds a hidden path back in.
    for path in settings.hidden.iter().filter(|p| p.exists()) {
        if path.is_dir() {
            args.extend(["--tmpfs".into(), path.clone().into_os_string()]);
        } else {
            args.extend([
                "--ro-bind".into(),
                "/dev/null".into(),
                path.clone().into_os_string(),
            ]);
        }
    }
    args.extend([
        "--chdir".into(),
        cwd.as_os_str().to_os_string(),
        "--".into(),
    ]);
    args
}

/// Makes the declared state folder `state` (mode 0700) when nothing is there. A name with an
/// extension (`~/.my-agent.json`) is a file the agent writes itself: left alone. A failure leaves
/// it unbound, read-only, as before.
fn create_state_folder(state: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    if state.extension().is_some() || state.symlink_metadata().is_ok() {
        return;
    }
    if let Err(error) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state)
    {
        tracing::debug!("cannot make the agent's state folder: {error}");
    }
}

/// Whether `home` is the home of the user running this process (its `HOME`), compared as real
/// paths.
fn is_callers_home(home: &Path) -> bool {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    std::env::var_os("HOME").is_some_and(|own| real(Path::new(&own)) == real(home))
}
