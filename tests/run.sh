#!/usr/bin/env bash
# The project's test command: installs the pinned agent CLIs (cached outside the checkout), then runs every
# test of the workspace, end-to-end tests against the real CLIs included.
#
#   bash tests/run.sh
#
# Without npm, or with AGENT_API_E2E=skip, the CLIs are not installed; every end-to-end test then fails
# with instructions, or (AGENT_API_E2E=skip) prints a loud SKIPPED line: never a silent skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# A one-off build gains nothing from incremental state, which is half of target/ (about 9 GiB here):
# without it a full test run fits on a small disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

if [ "${AGENT_API_E2E:-}" = "skip" ]; then
    echo "tests/run.sh: AGENT_API_E2E=skip: not installing the agent CLIs; end-to-end tests will report SKIPPED" >&2
else
    bin="$(bash tests/bench/install-clis.sh)"
    echo "tests/run.sh: pinned agent CLIs in $bin" >&2
fi
# Docker and sshd for the container and ssh launcher tests (says loudly what it cannot set up).
bash tests/launchers/setup.sh
# PostgreSQL on a loopback port for the store tests of `agent-api serve` (says loudly what it cannot set up);
# the database's URL is exported for the tests that start servers on it.
bash tests/postgres/setup.sh
postgres_env="${AGENT_API_POSTGRES_DIR:-$HOME/.cache/agent_api/postgres}/postgres.env"
if grep -q '^AGENT_API_TEST_POSTGRES_URL=' "$postgres_env" 2> /dev/null; then
    export "$(grep '^AGENT_API_TEST_POSTGRES_URL=' "$postgres_env")"
fi

# Prometheus (Debian's package) for the metrics test of `agent-api serve`, which scrapes a server and asks its
# query API (says loudly what it cannot set up).
bash tests/prometheus/setup.sh

# The bubblewrap launcher's tests run the real `bwrap` (spec/launchers.md): install it when missing, and say
# loudly when that is impossible (those tests then fail naming it, never skip).
if ! command -v bwrap > /dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null 2>&1; then
        echo "tests/run.sh: installing bubblewrap for the bwrap launcher tests" >&2
        apt-get install -y bubblewrap > /dev/null || { apt-get update > /dev/null && apt-get install -y bubblewrap > /dev/null; } || true
    fi
    if ! command -v bwrap > /dev/null 2>&1; then
        echo "tests/run.sh: WARNING: bwrap is missing and could not be installed (needs root and apt-get); the bwrap launcher tests WILL FAIL" >&2
    fi
fi

# The inspector's browser tests (tests/inspector, spec/inspector.md) drive Debian's headless Chromium through its
# chromedriver: install both when missing, and say loudly when that is impossible (those tests then fail naming
# the packages, never skip).
if ! command -v chromium > /dev/null 2>&1 || ! command -v chromedriver > /dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null 2>&1; then
        echo "tests/run.sh: installing chromium and chromium-driver for the inspector's browser tests" >&2
        apt-get install -y chromium chromium-driver > /dev/null || { apt-get update > /dev/null && apt-get install -y chromium chromium-driver > /dev/null; } || true
    fi
    if ! command -v chromium > /dev/null 2>&1 || ! command -v chromedriver > /dev/null 2>&1; then
        echo "tests/run.sh: WARNING: chromium or chromedriver is missing and could not be installed (needs root and apt-get: packages chromium, chromium-driver); the inspector's browser tests WILL FAIL" >&2
    fi
fi

# Every test target is built once; the suites then run in four lanes side by side. Most of a lane's time is
# spent waiting (a real CLI's retries and back-offs, containers, servers starting), so lanes overlap well on
# two cores: one after the other they took about 2,500 s here, a lane alone at most about 700 s. Each lane
# writes its own log, printed whole when every lane has ended; a failing lane fails the command.
cargo test --workspace --all-targets --no-run
lane_logs="$(mktemp -d)"
# lane NAME COMMAND...: runs the commands of one lane (each a function or program), in order, logging to
# NAME's file; a command that fails marks the lane failed and the next one still runs (no-fail-fast).
lane() {
    local name="$1" start=$SECONDS status=0
    shift
    for step in "$@"; do
        eval "$step" >> "$lane_logs/$name.log" 2>&1 || status=1
    done
    if [ "$status" = 0 ]; then
        echo "tests/run.sh: lane $name passed in $((SECONDS - start)) s" >&2
    else
        echo "tests/run.sh: lane $name FAILED after $((SECONDS - start)) s" >&2
        touch "$lane_logs/$name.failed"
    fi
}
# The slow real-CLI crates each lead a lane; the rest of the workspace is the fourth.
slow_crates=(agent_api_conformance agent_api_qwen agent_api_gemini agent_api_claude_code agent_api_opencode
    agent_api_codex agent_api_amp)
excluded=()
for crate in "${slow_crates[@]}"; do excluded+=(--exclude "$crate"); done

# Every example runs to completion offline; a hang fails here instead of blocking CI.
run_examples() {
    local example
    for example in $(sed -n 's/^name = "\(.*\)"$/\1/p' examples/Cargo.toml | grep -v '^agent_api_examples$'); do
        echo "tests/run.sh: example $example"
        timeout 120 cargo run -q -p agent_api_examples --example "$example" > /dev/null || return 1
    done
    echo "tests/run.sh: every example finished"
}

# The HTTP API from other languages (issues 36 and 52): the Python and TypeScript client packages (clients/),
# type-checked, built, installed offline in a fresh environment and tested against real servers, with the
# examples examples/http/client.py and client.mjs. Their pinned tools install from PyPI and npm into a cache
# outside the checkout; anything missing fails loudly (never a skip). About a minute with a warm cache.
run_clients() {
    cargo build -q -p agent_api_cli &&
        AGENT_API_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/agent-api" bash clients/test.sh
}

lane conformance "cargo test -p agent_api_conformance --all-targets --no-fail-fast" \
    "cargo test --workspace --doc --no-fail-fast" run_examples &
lane acp-clis "cargo test -p agent_api_qwen -p agent_api_gemini -p agent_api_claude_code --all-targets --no-fail-fast" &
lane other-clis "cargo test -p agent_api_opencode -p agent_api_codex -p agent_api_amp --all-targets --no-fail-fast" \
    run_clients &
lane workspace "cargo test --workspace ${excluded[*]} --all-targets --no-fail-fast" &
wait

failed=0
for log in "$lane_logs"/*.log; do
    name="$(basename "$log" .log)"
    echo "======== tests/run.sh: lane $name ========"
    cat "$log"
    if [ -e "$lane_logs/$name.failed" ]; then failed=1; fi
done
for marker in "$lane_logs"/*.failed; do
    if [ -e "$marker" ]; then
        echo "tests/run.sh: lane $(basename "$marker" .failed) FAILED (its log is above)" >&2
    fi
done
rm -rf "$lane_logs"
exit "$failed"
