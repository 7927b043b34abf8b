//! Where the agent runs: the same spawn through a prefix and a bubblewrap sandbox
//! (`spec/launchers.md`). The "agent" here is `sh` printing what it sees, so the example runs
//! anywhere `sh` and `setsid` are; bwrap is used when installed. A real backend gets the same by
//! carrying the request's launcher (`CommandSpec::for_request`); the in-process scripted agent spawns
//! nothing, so it refuses a launcher with a typed error, shown last.
//!
//! Kubernetes is the same code path as the prefix here (`Launcher::Prefix(["kubectl", "exec", "-i",
//! POD, "-c", CONTAINER, "--"])`) but cannot be run in this example.
//!
//! `cargo run -p agent_api_examples --example launchers`

use std::ffi::OsString;
use std::path::Path;

use agent_api::kit::process::spawn;
use agent_api::kit::CommandSpec;
use agent_api::request::{Bwrap, Launcher};
use agent_api::{AgentBackend, AgentError, RunRequest};
use tokio::io::AsyncReadExt;

/// Runs the stand-in agent through `launcher`, prints what it printed, and whether its write to
/// `outside` (a directory that is not the agent's) reached this machine.
async fn show(launcher: Launcher, outside: &Path) -> Result<(), AgentError> {
    let probe = outside.join("probe");
    // Argv only: the hostile-looking argument reaches the agent as one word, never run.
    let script = "echo \"args: $1\"; echo \"token: ${EXAMPLE_TOKEN:-absent}\"; echo \"other: ${EXAMPLE_OTHER:-absent}\"; echo x > \"$2\" 2>/dev/null";
    let spec = CommandSpec::new("sh")
        .args(["-c", script, "agent", "$(rm -rf ~) it's"])
        .arg(&probe)
        .reads_env(["EXAMPLE_TOKEN"])
        .with_launcher(launcher.clone());
    let mut child = spawn(&spec)?;
    let mut out = String::new();
    child
        .child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut out)
        .await?;
    println!(
        "--- via {launcher}\n{}\nwrote outside its directories: {}",
        out.trim_end(),
        probe.exists()
    );
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    std::env::set_var("EXAMPLE_TOKEN", "declared: the agent reads it");
    std::env::set_var("EXAMPLE_OTHER", "undeclared: stays here");
    // Not the agent's: not its working directory, home or temp (/tmp is the sandbox's own).
    let outside = std::env::temp_dir().join(format!("agent-api-launchers-{}", std::process::id()));
    std::fs::create_dir_all(&outside)?;
    // A prefix whose far side detaches (a new session, as a remote one would be).
    show(
        Launcher::Prefix(["setsid", "-w"].map(OsString::from).to_vec()),
        &outside,
    )
    .await?;
    let bwrap = Launcher::Sandbox(Bwrap::new().with_network(false));
    match bwrap.check_available() {
        Ok(()) => show(bwrap, &outside).await?,
        Err(error) => println!("--- via bwrap: {error} (install bubblewrap to see it)"),
    }
    std::fs::remove_dir(&outside)?;
    let scripted = agent_api_scripted::ScriptedBackend::new();
    let refused =
        scripted.validate(&RunRequest::new("hi").with_launcher(Launcher::Sandbox(Bwrap::new())));
    println!(
        "--- the scripted agent through bwrap: {}",
        refused.err().map(|e| e.to_string()).unwrap_or_default()
    );
    Ok(())
}
