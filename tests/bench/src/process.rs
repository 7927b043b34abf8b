//! Child processes without orphans: every CLI runs in its own process group, and the whole group is
//! killed (SIGKILL) when a run ends, times out, or its guard is dropped.

use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::BenchError;

/// Puts the command in its own process group with SIGINT and SIGTERM at their default disposition and
/// stdin at /dev/null (callers that drive stdin set it again afterwards).
pub fn isolate(cmd: &mut Command) {
    cmd.process_group(0).stdin(Stdio::null());
    // SAFETY: the closure only calls `signal`, which is async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
}

/// Sends `signal` to the whole process group `pgid` (ignoring a group that is already gone).
pub fn signal_group(pgid: u32, signal: i32) {
    if let Ok(pgid) = i32::try_from(pgid) {
        if pgid > 0 {
            // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
            unsafe {
                libc::kill(-pgid, signal);
            }
        }
    }
}

/// Kills a child's whole process group when dropped.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: u32,
}

impl GroupGuard {
    /// Guards the group led by `child` (which must have been spawned after [`isolate`]).
    pub fn new(child: &Child) -> Option<GroupGuard> {
        child.id().map(|pgid| GroupGuard { pgid })
    }

    /// The process group id (the leader's pid).
    pub fn pgid(&self) -> u32 {
        self.pgid
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        signal_group(self.pgid, libc::SIGKILL);
    }
}

/// What a finished run printed.
#[derive(Debug, Clone)]
pub struct Captured {
    /// Exit status of the leader.
    pub status: ExitStatus,
    /// Stdout lines (without the newline) with their time in seconds since spawn.
    pub stdout: Vec<(f64, String)>,
    /// Everything written to stderr.
    pub stderr: String,
    /// Seconds from spawn to exit.
    pub wall_s: f64,
}

impl Captured {
    /// Stdout lines parsed as JSON, skipping lines that are not JSON.
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .iter()
            .filter_map(|(_, l)| serde_json::from_str(l).ok())
            .collect()
    }

    /// The exit code, or `-N` when the process was killed by signal N.
    pub fn exit_code(&self) -> i32 {
        use std::os::unix::process::ExitStatusExt;
        self.status
            .code()
            .unwrap_or_else(|| -self.status.signal().unwrap_or(0))
    }
}

/// Runs `cmd` (stdin /dev/null, own process group) to completion within `timeout`, capturing its output.
/// On timeout the whole group is killed and [`BenchError::Timeout`] returned; after a normal exit the
/// group is killed too, so nothing the CLI left running survives it.
pub async fn run(mut cmd: Command, what: &str, timeout: Duration) -> Result<Captured, BenchError> {
    isolate(&mut cmd);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| BenchError::io(format!("spawning {what}"), e))?;
    let guard = GroupGuard::new(&child);
    let stdout = child
        .stdout
        .take()
        .map(|s| tokio::spawn(read_lines(s, started)));
    let stderr = child.stderr.take().map(|s| tokio::spawn(read_all(s)));
    let status = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => status.map_err(|e| BenchError::io(format!("waiting for {what}"), e))?,
        Err(_) => {
            drop(guard);
            let _ = child.wait().await;
            return Err(BenchError::Timeout {
                what: what.to_string(),
                seconds: timeout.as_secs(),
            });
        }
    };
    let wall_s = started.elapsed().as_secs_f64();
    drop(guard);
    let stdout = match stdout {
        Some(task) => task.await.unwrap_or_default(),
        None => Vec::new(),
    };
    let stderr = match stderr {
        Some(task) => task.await.unwrap_or_default(),
        None => String::new(),
    };
    Ok(Captured {
        status,
        stdout,
        stderr,
        wall_s,
    })
}

/// Reads lines with their arrival time (seconds since `started`); invalid UTF-8 is replaced.
pub async fn read_lines(stream: impl AsyncRead + Unpin, started: Instant) -> Vec<(f64, String)> {
    let mut reader = BufReader::new(stream);
    let mut lines = Vec::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let t = started.elapsed().as_secs_f64();
                if buf.ends_with(b"\n") {
                    buf.pop();
                }
                lines.push((t, String::from_utf8_lossy(&buf).into_owned()));
            }
        }
    }
    lines
}

async fn read_all(mut stream: impl AsyncRead + Unpin) -> String {
    let mut buf = Vec::new();
    let _ = stream.read_to_end(&mut buf).await;
    String::from_utf8_lossy(&buf).into_owned()
}

/// True while `pid` is a live process (a zombie waiting to be reaped counts as dead).
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// The live processes whose working directory is `dir` (what a run in a sandbox left behind).
pub fn processes_in(dir: &std::path::Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
        .filter(|pid| process_alive(*pid))
        .collect()
}

/// The value of `var` in the environment of process `pid`, if it has one (and is still there).
pub fn process_env(pid: i32, var: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{var}=");
    environ.split(|b| *b == 0).find_map(|entry| {
        entry
            .strip_prefix(prefix.as_bytes())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    })
}

/// Every file under `dir` with its size and modification time: equal snapshots mean nothing
/// under `dir` was written (a missing `dir` is an empty snapshot).
pub fn tree_snapshot(
    dir: &std::path::Path,
) -> std::collections::BTreeMap<std::path::PathBuf, (u64, std::time::SystemTime)> {
    let mut files = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(next) = todo.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                todo.push(entry.path());
            } else {
                files.insert(
                    entry.path(),
                    (meta.len(), meta.modified().unwrap_or(std::time::UNIX_EPOCH)),
                );
            }
        }
    }
    files
}

/// Every process of process group `pgid`, zombies included: a group is gone only when this is empty.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            // The group id is the third field after the parenthesised command name.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rsplit_once(") ")
                .and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse::<i32>().ok())
                == Some(pgid)
        })
        .collect()
}

/// Waits up to `limit` for process group `pgid` to have no process left; true once it has none.
pub async fn group_gone_within(pgid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !group_members(pgid).is_empty() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("grandchild.pid");
        // The grandchild writes its pid and sleeps; the leader waits for it.
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("sleep 60 & echo $! > \"$1\"; wait")
            .arg("sh")
            .arg(&marker);
        let err = run(cmd, "sleeper", Duration::from_millis(500))
            .await
            .unwrap_err();
        assert!(matches!(err, BenchError::Timeout { .. }), "{err}");
        let pid: i32 = std::fs::read_to_string(&marker)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!process_alive(pid), "grandchild {pid} survived the timeout");
    }

    #[tokio::test]
    async fn run_captures_lines_exit_code_and_stderr() {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("echo one; echo two; echo oops >&2; exit 3");
        let out = run(cmd, "sh", Duration::from_secs(10)).await.unwrap();
        let lines: Vec<_> = out.stdout.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(lines, ["one", "two"]);
        assert_eq!(out.stderr, "oops\n");
        assert_eq!(out.exit_code(), 3);
    }
}
