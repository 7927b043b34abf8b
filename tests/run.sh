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

cargo test --workspace --all-targets --no-fail-fast
cargo test --workspace --doc --no-fail-fast

# Every example runs to completion offline; a hang fails here instead of blocking CI.
for example in $(sed -n 's/^name = "\(.*\)"$/\1/p' examples/Cargo.toml | grep -v '^agent_api_examples$'); do
    echo "tests/run.sh: example $example" >&2
    timeout 120 cargo run -q -p agent_api_examples --example "$example" > /dev/null
done
echo "tests/run.sh: every example finished" >&2

# The HTTP API from another language (issue 36): the standard-library Python client of `agent-api serve`
# against a server started here. Without python3 this fails, loudly: it never skips.
if ! command -v python3 > /dev/null 2>&1; then
    echo "tests/run.sh: ERROR: python3 is missing; the Python client of agent-api serve (examples/http/client.py) cannot run" >&2
    exit 1
fi
cargo build -q -p agent_api_cli
serve_log="$(mktemp)"
"${CARGO_TARGET_DIR:-target}/debug/agent-api" serve --port 0 --store memory --no-token 2> "$serve_log" &
serve_pid=$!
trap 'kill "$serve_pid" 2> /dev/null || true; rm -f "$serve_log"' EXIT
for _ in $(seq 300); do
    grep -q '^agent-api: listening on ' "$serve_log" && break
    sleep 0.1
done
serve_url="$(sed -n 's/^agent-api: listening on //p' "$serve_log")"
if [ -z "$serve_url" ]; then
    echo "tests/run.sh: ERROR: agent-api serve did not start:" >&2
    cat "$serve_log" >&2
    exit 1
fi
AGENT_API_URL="$serve_url" timeout 120 python3 examples/http/client.py > /dev/null
kill "$serve_pid"
wait "$serve_pid" || true
echo "tests/run.sh: the Python HTTP client finished against agent-api serve" >&2
