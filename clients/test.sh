#!/usr/bin/env bash
# Checks and tests the client packages of `agent-api serve` (clients/python, clients/typescript) against
# real servers running the scripted agent, and their packaging:
#
#   bash clients/test.sh            # tests/run.sh runs it
#
# 1. Python: `mypy --strict`; `python -m build` (wheel and sdist); the wheel installed in a fresh virtual
#    environment with no index (its dependencies from a local wheel folder); the package's tests run against
#    that installed wheel; examples/http/client.py run with it.
# 2. TypeScript: `tsc --strict`; `npm pack`; the tests (node --test) against the built package; the tarball
#    installed offline in a fresh folder; examples/http/client.mjs run with it.
#
# The tools are pinned (clients/python/requirements-dev.txt, clients/typescript/package-lock.json) and
# installed once into ${AGENT_API_CLIENTS_CACHE:-$HOME/.cache/agent_api/clients} (PyPI and the npm registry),
# never into the checkout. Anything missing fails loudly: this script never skips. Costs about a minute when
# the cache is warm. The server is $AGENT_API_BIN, else the workspace's agent-api, built here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
cache="${AGENT_API_CLIENTS_CACHE:-$HOME/.cache/agent_api/clients}"
say() { echo "clients/test.sh: $*" >&2; }
fail() { say "ERROR: $*"; exit 1; }

command -v python3 > /dev/null 2>&1 || fail "python3 is missing: the Python client cannot be checked"
python3 -c 'import venv, ensurepip' 2> /dev/null || fail "python3 has no venv/ensurepip (Debian: apt-get install python3-venv)"
command -v node > /dev/null 2>&1 || fail "node is missing: the TypeScript client cannot be checked (Node.js 20 or newer)"
command -v npm > /dev/null 2>&1 || fail "npm is missing: the TypeScript client cannot be checked"

if [ -z "${AGENT_API_BIN:-}" ]; then
    cargo build -q -p agent_api_cli
    export AGENT_API_BIN="${CARGO_TARGET_DIR:-$root/target}/debug/agent-api"
fi
[ -x "$AGENT_API_BIN" ] || fail "no agent-api binary at $AGENT_API_BIN"
# The tests run from copies: they find the checkout (spec/universal-schema.json) here.
export AGENT_API_REPO="$root"

work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2> /dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$cache"

# --- The pinned tools, cached by the hash of what pins them --------------------------------------------------
pykey="$(cat clients/python/requirements-dev.txt clients/python/pyproject.toml | sha256sum | cut -c1-16)"
tools="$cache/python-$pykey"
wheels="$cache/wheels-$pykey"
if [ ! -f "$tools/.ready" ]; then
    say "installing the pinned Python tools into $tools"
    rm -rf "$tools" "$wheels"
    python3 -m venv "$tools" || fail "cannot make a virtual environment in $tools"
    "$tools/bin/pip" install -q --disable-pip-version-check -r clients/python/requirements-dev.txt \
        || fail "cannot install clients/python/requirements-dev.txt from PyPI"
    # The package's own dependencies as wheels, for the install with no index below.
    "$tools/bin/pip" download -q --disable-pip-version-check --only-binary=:all: -d "$wheels" \
        "$(sed -n 's/^httpx==/httpx==/p' clients/python/requirements-dev.txt)" \
        || fail "cannot download httpx's wheels from PyPI"
    touch "$tools/.ready"
fi
tskey="$(cat clients/typescript/package.json clients/typescript/package-lock.json | sha256sum | cut -c1-16)"
tstools="$cache/typescript-$tskey"
if [ ! -f "$tstools/.ready" ]; then
    say "installing the pinned TypeScript tools into $tstools"
    rm -rf "$tstools"
    mkdir -p "$tstools"
    cp clients/typescript/package.json clients/typescript/package-lock.json "$tstools/"
    (cd "$tstools" && npm ci --no-audit --no-fund --loglevel=error >&2) || fail "cannot install clients/typescript's tools from the npm registry"
    touch "$tstools/.ready"
fi

# --- A server for the examples --------------------------------------------------------------------------------
token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s\n' "$token" > "$work/token"
chmod 600 "$work/token"
serve() {
    "$AGENT_API_BIN" serve --host 127.0.0.1 --port 0 --store memory --token-file "$work/token" 2> "$work/serve.log" &
    server_pid=$!
    for _ in $(seq 300); do
        grep -q '^agent-api: listening on ' "$work/serve.log" && break
        sleep 0.1
    done
    server_url="$(sed -n 's/^agent-api: listening on //p' "$work/serve.log")"
    [ -n "$server_url" ] || { cat "$work/serve.log" >&2; fail "agent-api serve did not start"; }
}

# --- Python -----------------------------------------------------------------------------------------------------
say "python: mypy --strict"
(cd clients/python && "$tools/bin/mypy" --strict --cache-dir "$work/mypy" src tests) || fail "mypy --strict failed"
say "python: python -m build"
cp -r clients/python "$work/python"
rm -rf "$work/python/dist" "$work/python/build"
(cd "$work/python" && "$tools/bin/python" -m build --no-isolation --outdir "$work/dist" . > "$work/build.log" 2>&1) \
    || { cat "$work/build.log" >&2; fail "python -m build failed"; }
wheel="$(ls "$work"/dist/agent_api_client-*.whl)"
ls "$work"/dist/agent_api_client-*.tar.gz > /dev/null || fail "no sdist was built"
say "python: the wheel in a fresh virtual environment, offline"
python3 -m venv "$work/fresh"
"$work/fresh/bin/pip" install -q --disable-pip-version-check --no-index --find-links "$wheels" "$wheel" \
    || fail "the wheel does not install offline in a fresh virtual environment"
# The tests import the installed package, never the checkout's sources.
(cd "$work/python" && rm -rf src && "$work/fresh/bin/python" -m unittest discover -s tests -t . -v) \
    || fail "the Python client's tests failed"
serve
AGENT_API_URL="$server_url" AGENT_API_TOKEN="$token" timeout 120 "$work/fresh/bin/python" examples/http/client.py > "$work/example.log" 2>&1 \
    || { cat "$work/example.log" >&2; fail "examples/http/client.py failed"; }
tail -1 "$work/example.log" >&2

# --- TypeScript -------------------------------------------------------------------------------------------------
say "typescript: tsc --strict, npm pack"
mkdir -p "$work/ts"
cp -r clients/typescript/package.json clients/typescript/package-lock.json clients/typescript/tsconfig.json \
    clients/typescript/README.md clients/typescript/src clients/typescript/test "$work/ts/"
ln -s "$tstools/node_modules" "$work/ts/node_modules"
(cd "$work/ts" && node_modules/.bin/tsc -p tsconfig.json) || fail "tsc --strict failed"
(cd "$work/ts" && npm pack --ignore-scripts --pack-destination "$work" --loglevel=error > /dev/null) || fail "npm pack failed"
tarball="$(ls "$work"/agent-api-client-*.tgz)"
say "typescript: the tests"
(cd "$work/ts" && node --test --test-reporter=spec test/live.test.mjs) || fail "the TypeScript client's tests failed"
say "typescript: the tarball in a fresh folder, offline"
mkdir -p "$work/tsfresh"
cp examples/http/client.mjs "$work/tsfresh/"
(cd "$work/tsfresh" && echo '{"name":"fresh","private":true,"type":"module"}' > package.json \
    && npm install --offline --no-audit --no-fund --loglevel=error "$tarball" > /dev/null) \
    || fail "the tarball does not install offline in a fresh folder"
(cd "$work/tsfresh" && AGENT_API_URL="$server_url" AGENT_API_TOKEN="$token" timeout 120 node client.mjs > "$work/example.log" 2>&1) \
    || { cat "$work/example.log" >&2; fail "examples/http/client.mjs failed"; }
grep '^answer:' "$work/example.log" >&2
say "both clients passed against agent-api serve"
