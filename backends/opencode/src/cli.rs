//! One short `opencode` command (a listing, an export, an import) run to its end, what it prints
//! read bounded: the session store ([`crate::history`]) and the snapshots ([`crate::snapshot`])
//! read OpenCode's database through the CLI itself.

use std::time::Duration;

use agent_api::kit::CommandSpec;
use agent_api::run::TimeoutKind;
use agent_api::AgentError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long one command may take (a first start in an empty home migrates its database).
pub(crate) const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// What a command printed and how it ended.
#[derive(Debug)]
pub(crate) struct CliOutput {
    /// Its stdout, at most the cap's bytes.
    pub stdout: Vec<u8>,
    /// It printed more than the cap (the process was killed at the cap).
    pub over: bool,
    /// It exited with status 0 (false when over).
    pub success: bool,
}

impl CliOutput {
    /// Its stdout when it succeeded within the cap.
    pub(crate) fn ok(self) -> Option<Vec<u8>> {
        (self.success && !self.over).then_some(self.stdout)
    }
}

/// Runs `spec` (stdin `input`, when given: the spec must have asked for it), reads at most `cap`
/// bytes of its stdout (its stderr is drained, never kept: it may quote the session), within
/// [`CLI_TIMEOUT`]. The process group is killed when this returns, on every path.
pub(crate) async fn run(
    spec: &CommandSpec,
    input: Option<&[u8]>,
    cap: u64,
) -> Result<CliOutput, AgentError> {
    let mut process = agent_api::kit::process::spawn(spec)?;
    let mut stdout = process
        .child
        .stdout
        .take()
        .ok_or_else(|| AgentError::Protocol {
            reason: "opencode has no stdout".into(),
        })?;
    let mut stderr = process.child.stderr.take();
    let mut stdin = process.child.stdin.take();
    let work = async {
        let feed = async {
            if let (Some(pipe), Some(bytes)) = (stdin.as_mut(), input) {
                // A command that exits early closes the pipe: what it said tells why.
                let _ = pipe.write_all(bytes).await;
            }
            drop(stdin.take());
        };
        let drain_stderr = async {
            if let Some(stderr) = stderr.as_mut() {
                let _ = tokio::io::copy(&mut stderr.take(cap), &mut tokio::io::sink()).await;
            }
        };
        let mut out = Vec::new();
        let mut limited = (&mut stdout).take(cap.saturating_add(1));
        let (read, (), ()) = tokio::join!(limited.read_to_end(&mut out), feed, drain_stderr);
        read?;
        if out.len() as u64 > cap {
            out.truncate(cap as usize);
            return Ok(CliOutput {
                stdout: out,
                over: true,
                success: false,
            });
        }
        let status = process.child.wait().await?;
        Ok::<_, std::io::Error>(CliOutput {
            stdout: out,
            over: false,
            success: status.success(),
        })
    };
    tokio::time::timeout(CLI_TIMEOUT, work)
        .await
        .map_err(|_| AgentError::Timeout {
            which: TimeoutKind::Total,
            after: CLI_TIMEOUT,
        })?
        .map_err(AgentError::Io)
}
