//! The bubblewrap argv: the filesystem read-only but for the run's own directories.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Bwrap;
use crate::kit::process::CommandSpec;

/// The `bwrap` arguments (up to and including `--`) for `spec`'s agent working in `cwd`, whose
/// environment is `env`.
pub(super) fn args(settings: &Bwrap, cwd: &Path, env: &BTreeMap<String, String>, spec: &CommandSpec) -> Vec<OsString> {
    let mut args: Vec<OsString> =
        ["--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
            .into_iter()
            .map(OsString::from)
            .collect();
    if !settings.network {
        args.push("--unshare-net".into());
    }
    // Later mounts go over earlier ones: the run's directories go over the fresh /tmp (tests and
    // callers often work under it), and the caller's read-only ones over everything.
    let vars = ["HOME", "TMPDIR"].into_iter().chain(spec.state_vars.iter().map(String::as_str));
    let env_dirs = vars.filter_map(|name| env.get(name)).map(PathBuf::from);
    let own = spec.writable_dirs.iter().chain(&settings.writable).cloned();
    let rw = std::iter::once(cwd.to_path_buf()).chain(env_dirs).chain(own);
    let mut bound: Vec<PathBuf> = Vec::new();
    for dir in rw {
        if dir.is_dir() && !bound.contains(&dir) {
            args.extend(["--bind".into(), dir.clone().into_os_string(), dir.clone().into_os_string()]);
            bound.push(dir);
        }
    }
    // The run's own files (a config the SDK wrote under the sandbox's fresh /tmp, say).
    for dir in settings.read_only.iter().chain(&spec.local_files).filter(|d| d.exists()) {
        args.extend(["--ro-bind".into(), dir.clone().into_os_string(), dir.clone().into_os_string()]);
    }
    args.extend(["--chdir".into(), cwd.as_os_str().to_os_string(), "--".into()]);
    args
}
