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

cargo test --workspace --all-targets --no-fail-fast
cargo test --workspace --doc --no-fail-fast

# Every example runs to completion offline; a hang fails here instead of blocking CI.
for example in $(sed -n 's/^name = "\(.*\)"$/\1/p' examples/Cargo.toml | grep -v '^agent_api_examples$'); do
    echo "tests/run.sh: example $example" >&2
    timeout 120 cargo run -q -p agent_api_examples --example "$example" > /dev/null
done
echo "tests/run.sh: every example finished" >&2
