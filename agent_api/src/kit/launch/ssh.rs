//! The ssh launcher: the system `ssh` client (so the user's ssh config, keys and agent apply) runs the
//! far-side protocol of [`super::far`] on `[user@]host[:port]`, as one command string built with
//! [`super::shell_join`] (the far side's login shell must be a POSIX shell).
//!
//! The agent's environment never goes on a command line: ssh servers pass on only the few variables
//! their `AcceptEnv` lists, so it is written to the far side's stdin before anything else, one
//! `NAME=VALUE` line per variable (backslash and newline escaped) and an empty line, then read by a
//! preamble of the start script. The far shell starts under `env -i`, so the agent gets exactly that
//! environment, not the login's. The local `ssh` client gets only what it needs to find the user's
//! config and agent.

use std::collections::BTreeMap;
use std::ffi::OsString;

use super::far_prefix::FarPrefix;
use super::Ssh;
use crate::kit::reap::RUN_MARKER_VAR;
use crate::vocabulary::error::AgentError;

/// Variables of this process the `ssh` client itself uses (config and keys under `HOME`, the agent's
/// socket), passed to the client only.
const CLIENT_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SSH_AUTH_SOCK",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
];

/// Reads the environment lines the local side writes first on stdin (see the module docs) and exports
/// them; `printf %b` undoes the escapes, the trailing `x` keeps trailing newlines of a value.
const ENV_PREAMBLE: &str = r#"while IFS= read -r agent_api_line && [ -n "$agent_api_line" ]; do
  agent_api_value=$(printf '%bx' "${agent_api_line#*=}")
  export "${agent_api_line%%=*}=${agent_api_value%x}"
done
unset agent_api_line agent_api_value
"#;

/// How the run `run_id` reaches the host `settings` names, its agent getting `env` (over stdin).
pub(crate) fn far_prefix(
    settings: &Ssh,
    env: &BTreeMap<String, String>,
    run_id: &str,
) -> Result<FarPrefix, AgentError> {
    let mut env = env.clone();
    env.insert(RUN_MARKER_VAR.to_string(), run_id.to_string());
    let client_env: BTreeMap<String, String> = CLIENT_ENV
        .iter()
        .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
        .collect();
    // The stop runs in the login's environment: point it at the start's pidfile folder.
    let tmpdir = format!(
        "TMPDIR={}",
        env.get("TMPDIR").map_or("/tmp", String::as_str)
    );
    let mut reach = FarPrefix::argv(
        settings.program.clone(),
        client_args(settings),
        client_args(settings),
    );
    reach.one_string = true;
    reach.client_env = Some(client_env);
    reach.far_start = vec!["env".into(), "-i".into()];
    reach.far_stop = vec!["env".into(), tmpdir.into()];
    reach.script_preamble = ENV_PREAMBLE;
    reach.stdin_preamble = env_lines(&env)?;
    Ok(reach)
}

/// How long writing the environment to the client's stdin may block (only a block larger than the
/// pipe's buffer can, until `ssh` reads it).
const PREAMBLE_WRITE_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Writes `preamble` to `child`'s stdin before the caller gets the child (so nothing the driver
/// writes can come first); closes stdin afterwards when the agent does not read it (`keep_stdin`).
pub(crate) fn write_preamble(
    child: &mut tokio::process::Child,
    preamble: &[u8],
    keep_stdin: bool,
) -> Result<(), AgentError> {
    use std::os::fd::AsRawFd;
    let stdin = child
        .stdin
        .as_ref()
        .ok_or_else(|| std::io::Error::other("the launcher's stdin is not a pipe"))?;
    let fd = stdin.as_raw_fd();
    let until = std::time::Instant::now() + PREAMBLE_WRITE_LIMIT;
    let mut rest = preamble;
    while !rest.is_empty() {
        // SAFETY: `fd` is the open pipe `stdin` owns for this whole loop; the buffer is valid for `rest.len()` bytes.
        let written = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if written >= 0 {
            rest = &rest[written as usize..];
            continue;
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::WouldBlock || std::time::Instant::now() >= until {
            return Err(error.into());
        }
        // The pipe is full (tokio keeps it non-blocking): wait for room.
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for at most 100 ms.
        unsafe { libc::poll(&mut poll, 1, 100) };
    }
    if !keep_stdin {
        child.stdin = None;
    }
    Ok(())
}

/// `ssh -T -o BatchMode=yes [options] [-p PORT] [-l USER] -- HOST` (the command string follows): no
/// terminal (the stream is the agent's stdio, byte for byte) and never a password prompt.
fn client_args(settings: &Ssh) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["-T".into(), "-o".into(), "BatchMode=yes".into()];
    args.extend(settings.options.iter().cloned());
    if let Some(port) = settings.port {
        args.extend(["-p".into(), port.to_string().into()]);
    }
    if let Some(user) = &settings.user {
        args.extend(["-l".into(), user.into()]);
    }
    args.extend(["--".into(), OsString::from(&settings.host)]);
    args
}

/// The environment as the preamble reads it: `NAME=VALUE` lines, `\` and newline escaped, then an empty
/// line. A name that cannot be a variable name is [`AgentError::InvalidRequest`].
fn env_lines(env: &BTreeMap<String, String>) -> Result<Vec<u8>, AgentError> {
    let mut out = Vec::new();
    for (name, value) in env {
        let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(AgentError::InvalidRequest {
                reason: format!("`{name}` is not an environment variable name"),
            });
        }
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
        for byte in value.bytes() {
            match byte {
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                other => out.push(other),
            }
        }
        out.push(b'\n');
    }
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the preamble in a local `sh` fed `lines`, and returns the environment the agent would see.
    fn through_preamble(lines: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let script = format!("{ENV_PREAMBLE}exec env");
        let mut child = std::process::Command::new("env")
            .args(["-i", "sh", "-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(lines).unwrap();
        child.wait_with_output().unwrap().stdout
    }

    #[test]
    fn hostile_values_cross_the_preamble_unchanged() {
        let hostile = "a b 'q' \"d\" $(touch /tmp/x) `id` \\n \\ \n\nend\n";
        let env = BTreeMap::from([
            ("HOSTILE".to_string(), hostile.to_string()),
            ("PLAIN".into(), "x=y".into()),
        ]);
        let seen = through_preamble(&env_lines(&env).unwrap());
        let seen = String::from_utf8(seen).unwrap();
        assert!(seen.contains(&format!("HOSTILE={hostile}")), "{seen:?}");
        assert!(seen.contains("PLAIN=x=y\n"), "{seen:?}");
        assert!(!seen.contains("agent_api_"), "{seen:?}");
    }

    #[test]
    fn a_bad_variable_name_is_refused() {
        let env = BTreeMap::from([("A=B".to_string(), String::new())]);
        assert!(matches!(
            env_lines(&env),
            Err(AgentError::InvalidRequest { .. })
        ));
    }

    #[test]
    fn secrets_stay_off_the_ssh_argv_and_the_client_env() {
        let launcher =
            crate::vocabulary::launcher::Launcher::Ssh(Ssh::parse("dev@build-3:2222").unwrap());
        let spec = crate::kit::CommandSpec::new("agent-cli")
            .arg("it's")
            .env("API_KEY", "s3cret-sentinel")
            .cwd("/w")
            .with_launcher(launcher);
        let planned = crate::kit::launch::plan(&spec, "agent-cli".into(), "r1").unwrap();
        let preamble = planned.stdin_preamble.clone();
        let args: Vec<String> = planned
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args[..9],
            [
                "-T",
                "-o",
                "BatchMode=yes",
                "-p",
                "2222",
                "-l",
                "dev",
                "--",
                "build-3"
            ]
        );
        assert!(args[9].starts_with("env -i sh -c "), "{}", args[9]);
        assert!(
            args[9].ends_with(r#" agent-api r1 /w agent-cli "it's""#),
            "{}",
            args[9]
        );
        assert!(!args.iter().any(|a| a.contains("s3cret-sentinel")));
        assert!(!planned.env.values().any(|v| v.contains("s3cret-sentinel")));
        assert!(String::from_utf8(preamble)
            .unwrap()
            .contains("API_KEY=s3cret-sentinel\n"));
    }
}
