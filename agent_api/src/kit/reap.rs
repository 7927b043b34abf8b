//! Killing every process a run started, including those that left its process group.
//!
//! A process group is not enough: an agent may start children with `setsid` (for its tool
//! shells, say), which puts them in a new session and group that the group kill misses,
//! and once the agent exits they are reparented away from it. On Linux two things keep them
//! findable:
//! - the SDK's process is made a child subreaper (`PR_SET_CHILD_SUBREAPER`) when it first spawns
//!   an agent, so orphans of an agent are reparented to the SDK (and reaped by it) instead of to
//!   PID 1;
//! - every agent is started with [`RUN_MARKER_VAR`] set to a value unique to the run, which its
//!   descendants inherit.
//!
//! [`kill_tree`] then kills the agent's group, every process carrying the run's marker and every
//! descendant of those, until none is left, and reaps those that were reparented to the SDK.
//! Elsewhere than Linux only the group is killed.

/// Environment variable set in every agent's environment to the run's unique marker.
pub const RUN_MARKER_VAR: &str = "AGENT_API_RUN";

/// Environment variable set in every agent's environment to its owner's identity
/// ([`owner_token`]): the process that spawned it, as `<pid>.<start time>`, so that agents whose
/// owner died (killed with SIGKILL: nothing of its own could stop them) are found and stopped
/// ([`stop_orphans`]) by a watchdog or by the next process that starts.
pub const OWNER_VAR: &str = "AGENT_API_OWNER";

/// This process's identity as [`OWNER_VAR`] holds it: `<pid>.<start time in clock ticks since
/// boot>` (the pair no other process has, even after the pid is reused).
pub fn owner_token() -> String {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN
        .get_or_init(|| {
            let pid = std::process::id() as i32;
            format!("{pid}.{}", start_time(pid).unwrap_or(0))
        })
        .clone()
}

/// The start time of process `pid` (`/proc/PID/stat` field 22), if it runs.
fn start_time(pid: i32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state …`: comm may hold spaces, so count after the last `)`; field 22 is
        // the 20th after it.
        stat.get(stat.rfind(')')? + 1..)?
            .split_whitespace()
            .nth(19)?
            .parse()
            .ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// Whether the owner an [`OWNER_VAR`] value ([`owner_token`]) names still runs.
pub fn owner_alive(token: &str) -> bool {
    let Some((pid, start)) = token.split_once('.') else {
        return true;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<i32>(), start.parse::<u64>()) else {
        return true;
    };
    // An owner whose start time could not be read is never taken for gone.
    if start == 0 {
        return true;
    }
    start_time(pid) == Some(start)
}

/// Stops (SIGKILL, with their descendants) every agent whose owner no longer runs: those a
/// process killed with SIGKILL left behind. Returns how many processes were stopped. Only this
/// user's processes can be read, and so stopped; agents on the far side of a launcher are not
/// seen. Does nothing off Linux.
pub fn stop_orphans() -> usize {
    #[cfg(target_os = "linux")]
    return linux::stop_owned(&|owner: &str| !owner_alive(owner));
    #[cfg(not(target_os = "linux"))]
    0
}

/// Stops every agent (and its descendants) that `owner` (an [`owner_token`]) spawned, once it
/// no longer runs: what a watchdog does when the process it watches is gone. Returns how many
/// processes were stopped; none while `owner` runs.
pub fn stop_orphans_of(owner: &str) -> usize {
    if owner_alive(owner) {
        return 0;
    }
    #[cfg(target_os = "linux")]
    return linux::stop_owned(&|found: &str| found == owner);
    #[cfg(not(target_os = "linux"))]
    0
}

/// A fresh marker for one run (random; kept as a number, shown as 16 hex digits).
pub(super) fn new_marker() -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0
}

/// The value of [`RUN_MARKER_VAR`] for `marker`.
pub(super) fn marker_value(marker: u64) -> String {
    format!("{marker:016x}")
}

/// Makes this process a child subreaper, once; afterwards orphaned descendants of the agents it
/// spawns are reparented to it rather than to PID 1. Does nothing off Linux.
pub(super) fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a flag on this process.
            unsafe {
                libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            }
        });
    }
}

/// Kills with SIGKILL the process group `root` leads, every process whose environment holds
/// `RUN_MARKER_VAR=marker` (the agent and what it started) and their descendants; then reaps those
/// of them that are this process's children (reparented orphans), never `root` itself (its owner
/// reaps it).
pub fn kill_tree(root: i32, marker: u64) {
    signal_group(root, libc::SIGKILL);
    #[cfg(target_os = "linux")]
    linux::kill_descendants(root, marker);
    #[cfg(not(target_os = "linux"))]
    let _ = marker;
}

/// The pids of the processes that carry `marker` and of their descendants, alive or not yet
/// reaped, except `root` itself. Always empty off Linux.
pub fn descendants(root: i32, marker: u64) -> Vec<i32> {
    #[cfg(target_os = "linux")]
    return linux::descendants(root, marker)
        .into_iter()
        .map(|p| p.pid)
        .collect();
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (root, marker);
        Vec::new()
    }
}

/// Reaps what earlier runs' kills left to reap ([`kill_tree`]: processes of a run whose parent
/// had not exited yet); called as each agent is spawned.
pub(super) fn reap_left_orphans() {
    #[cfg(target_os = "linux")]
    linux::reap_orphans(None);
}

/// Sends `signal` to process group `pgid`.
pub fn signal_group(pgid: i32, signal: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid only sends a signal; it touches no memory.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeSet;
    use std::time::{Duration, Instant};

    use crate::kit::reap::RUN_MARKER_VAR;

    pub(super) struct Proc {
        pub(super) pid: i32,
        ppid: i32,
        /// Its process group.
        pgrp: i32,
        /// Dead, not yet reaped.
        zombie: bool,
        /// Its start time (clock ticks since boot): with the pid, names it across pid reuse.
        start: u64,
    }

    fn processes() -> Vec<Proc> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                // `pid (comm) state ppid pgrp …`: comm may hold spaces and parentheses, so read
                // after the last `)`; the start time is field 22, the 20th after it.
                let fields: Vec<&str> = stat
                    .get(stat.rfind(')')? + 1..)?
                    .split_whitespace()
                    .collect();
                Some(Proc {
                    pid,
                    zombie: *fields.first()? == "Z",
                    ppid: fields.get(1)?.parse().ok()?,
                    pgrp: fields.get(2)?.parse().ok()?,
                    start: fields.get(19)?.parse().ok()?,
                })
            })
            .collect()
    }

    fn carries(pid: i32, needle: &[u8]) -> bool {
        std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == needle))
    }

    pub(super) fn descendants(root: i32, marker: u64) -> Vec<Proc> {
        let me = std::process::id() as i32;
        let needle = format!(
            "{RUN_MARKER_VAR}={}",
            crate::kit::reap::marker_value(marker)
        )
        .into_bytes();
        let all = processes();
        // The agent itself counts only while it carries the marker: once reaped, its pid may
        // already belong to an unrelated process whose children must not be touched.
        let mut found: BTreeSet<i32> = all
            .iter()
            .filter(|p| p.pid != me && carries(p.pid, &needle))
            .map(|p| p.pid)
            .collect();
        with_children(&mut found, &all, me);
        all.into_iter()
            .filter(|p| p.pid != root && found.contains(&p.pid))
            .collect()
    }

    /// Closes `found` over parent links: children of anything found are found too (a child that
    /// cleared its environment is still found through its parent), never `me`.
    fn with_children(found: &mut BTreeSet<i32>, all: &[Proc], me: i32) {
        loop {
            let before = found.len();
            for p in all {
                if p.pid != me && found.contains(&p.ppid) {
                    found.insert(p.pid);
                }
            }
            if found.len() == before {
                break;
            }
        }
    }

    /// The owner token (`OWNER_VAR`) in the environment of `pid`, if any.
    fn owner_of(pid: i32) -> Option<String> {
        let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        let prefix = format!("{}=", crate::kit::reap::OWNER_VAR).into_bytes();
        env.split(|b| *b == 0)
            .find_map(|var| var.strip_prefix(prefix.as_slice()))
            .map(|value| String::from_utf8_lossy(value).into_owned())
    }

    /// SIGKILLs every process whose owner token `stale` accepts, and every descendant of those,
    /// looking again until none is left; returns how many were signalled.
    pub(super) fn stop_owned(stale: &dyn Fn(&str) -> bool) -> usize {
        let me = std::process::id() as i32;
        let mut stopped = BTreeSet::new();
        for _ in 0..5 {
            let all = processes();
            let mut found: BTreeSet<i32> = all
                .iter()
                .filter(|p| p.pid != me)
                .filter(|p| owner_of(p.pid).is_some_and(|owner| stale(&owner)))
                .map(|p| p.pid)
                .collect();
            with_children(&mut found, &all, me);
            found.retain(|pid| !stopped.contains(pid));
            if found.is_empty() {
                break;
            }
            for pid in &found {
                // SAFETY: kill(2) only sends a signal.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                }
            }
            stopped.extend(found);
            std::thread::sleep(Duration::from_millis(20));
        }
        stopped.len()
    }

    pub(super) fn kill_descendants(root: i32, marker: u64) {
        let mut killed = Vec::new();
        // A process killed mid-fork can leave a child behind: look again until nothing is left.
        for _ in 0..5 {
            let victims = descendants(root, marker);
            if victims.is_empty() {
                break;
            }
            for p in &victims {
                // SAFETY: kill(2) only sends a signal.
                unsafe {
                    libc::kill(p.pid, libc::SIGKILL);
                }
            }
            killed.extend(victims.into_iter().map(|p| (p.pid, p.start)));
        }
        reap_orphans(Some(Leftovers {
            group: root,
            killed,
        }));
    }

    /// What one run's kill left to reap: the members of its process group (the agent `group`
    /// leads) and the processes it killed elsewhere, each by pid and start time.
    pub(super) struct Leftovers {
        group: i32,
        killed: Vec<(i32, u64)>,
    }

    /// Leftovers not reaped yet: their parent had not exited when their run's kill ended.
    static PENDING: std::sync::Mutex<Vec<Leftovers>> = std::sync::Mutex::new(Vec::new());

    /// Reaps what runs' kills left (`now`'s, waiting at most 200 ms for them, and those earlier
    /// kills left, looked at once): as this process is a child subreaper, the processes an agent
    /// started become its own children once their parent exits, the dead ones as zombies that
    /// nothing else would ever wait for. Only processes that are surely a run's are reaped: the
    /// members of its process group but its leader (its owner reaps that one, and no other run's
    /// agent is in that group), and the ones its kill found, by pid and start time. What is left
    /// (a parent that has not exited yet) waits for the next kill, or the next spawn.
    pub(super) fn reap_orphans(now: Option<Leftovers>) {
        let mut pending = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|p| p.into_inner()));
        pending.retain_mut(|left| !reap_leftovers(left));
        if let Some(mut now) = now {
            let until = Instant::now() + Duration::from_millis(200);
            let mut done = reap_leftovers(&mut now);
            while !done && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
                done = reap_leftovers(&mut now);
            }
            if !done {
                pending.push(now);
            }
        }
        PENDING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(pending);
    }

    /// Reaps those of `left` that are zombie children of this process; true once none of them
    /// is left.
    fn reap_leftovers(left: &mut Leftovers) -> bool {
        let me = std::process::id() as i32;
        let all = processes();
        let mut remaining = false;
        for p in &all {
            let killed = left
                .killed
                .iter()
                .any(|&(pid, start)| pid == p.pid && start == p.start);
            let member = p.pgrp == left.group && p.pid != left.group;
            if !(killed || member) {
                continue;
            }
            let reaped = p.ppid == me && p.zombie && {
                // SAFETY: waitpid on one pid with WNOHANG; the status is discarded.
                unsafe { libc::waitpid(p.pid, std::ptr::null_mut(), libc::WNOHANG) == p.pid }
            };
            remaining |= !reaped;
        }
        // A killed process that is gone (reaped by its own parent) is forgotten.
        left.killed
            .retain(|&(pid, start)| all.iter().any(|p| p.pid == pid && p.start == start));
        !remaining
    }
}
