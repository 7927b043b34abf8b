//! `amp-permission-delegate`: the program an Amp run's settings delegate tool calls to
//! (`spec/amp-delegate.md`). amp runs it with `AGENT_TOOL_NAME` set and the tool's arguments as
//! JSON on stdin; it asks the run that wrote the settings and exits 0 (allow) or 2 (reject).
//! It reads nothing else of its environment, forwards nothing else, and starts no program.
//!
//! Run as `amp-permission-delegate relay` (by the SDK, through a container, ssh or prefix
//! launcher) it is the far side's relay instead: see `agent_api_amp::delegate::relay`.

fn main() {
    let invoked_as = std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .unwrap_or_default();
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == agent_api_amp::delegate::wire::RELAY_ARG)
    {
        // The settings delegate to this very program, which is then found by its own path.
        let helper = std::env::current_exe().unwrap_or(invoked_as);
        std::process::exit(agent_api_amp::delegate::relay::main(&helper));
    }
    let tool = std::env::var("AGENT_TOOL_NAME").unwrap_or_default();
    let code = agent_api_amp::delegate::wire::ask_sdk(&invoked_as, &tool, std::io::stdin().lock());
    std::process::exit(code);
}
