#!/usr/bin/env bash
# How lean a one-backend program is (issue 40): a program on `agent_api` + `agent_api_claude_code`
# with default features. Prints the number of crates it compiles (every package in its build,
# proc-macros and build scripts' dependencies included) and, with --time, the wall time of a clean
# release build in a fresh target directory. BENCHMARKS.md quotes both.
#
#   bash tests/lean-build.sh [--time] [CHECKOUT]
#
# CHECKOUT (default: this one) lets the same program be measured against another revision.
set -euo pipefail
time_it=false
if [ "${1:-}" = "--time" ]; then time_it=true; shift; fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
checkout="$(cd "${1:-$here}" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cat > "$work/Cargo.toml" <<TOML
[package]
name = "one_backend"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
agent_api = { path = "$checkout/agent_api" }
agent_api_claude_code = { path = "$checkout/backends/claude_code" }
tokio = { version = "1", features = ["rt-multi-thread", "macros"] }
futures = "0.3"

[workspace]
TOML
cat > "$work/src/main.rs" <<'RS'
use futures::StreamExt;

#[tokio::main]
async fn main() -> Result<(), agent_api::AgentError> {
    use agent_api::AgentBackend;
    let backend = agent_api_claude_code::ClaudeCodeBackend::default();
    let handle = backend.run(agent_api::RunRequest::new("Say hello")).await?;
    let (mut events, completion) = handle.into_wrapper();
    while let Some(event) = events.next().await {
        println!("{:?}", event.kind);
    }
    println!("{:?}", completion.await.map(|c| c.final_text));
    Ok(())
}
RS
# The lock file of the checkout pins the same versions the workspace builds with.
cp "$checkout/Cargo.lock" "$work/Cargo.lock"
cd "$work"
crates="$(cargo tree -e normal,build --prefix none --offline 2>/dev/null || cargo tree -e normal,build --prefix none)"
count="$(printf '%s\n' "$crates" | sed 's/ (\*)//; s/ (proc-macro)//' | grep -v '^one_backend ' | sort -u | wc -l)"
echo "lean-build: crates compiled by a program on agent_api + agent_api_claude_code (default features): $count"
if $time_it; then
    start=$(date +%s.%N)
    CARGO_TARGET_DIR="$work/target" CARGO_INCREMENTAL=0 cargo build --release --quiet
    end=$(date +%s.%N)
    echo "lean-build: clean release build, wall seconds: $(echo "$end - $start" | bc)"
fi
