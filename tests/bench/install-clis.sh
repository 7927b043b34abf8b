#!/usr/bin/env bash
# Installs the pinned coding-agent CLIs (tests/bench/clis/package-lock.json) into a cache folder outside
# the checkout and prints the folder that holds their executables.
#
#   bash tests/bench/install-clis.sh          # prints e.g. /root/.cache/agent_api/clis/3f2a.../node_modules/.bin
#
# The cache root is ${AGENT_API_CLI_DIR:-$HOME/.cache/agent_api/clis}; each lock file gets its own folder named
# by the lock file's hash, so a second run with the same lock file does nothing and a new lock file installs
# next to the old one. The Rust harness (agent_bench::clis) looks in the same place: it takes the folder whose
# .pinned-lock.json equals the checkout's lock file.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/clis"
root="${AGENT_API_CLI_DIR:-$HOME/.cache/agent_api/clis}"

if ! command -v npm >/dev/null 2>&1; then
    echo "install-clis.sh: npm is not on PATH (install Node.js 20 or newer)" >&2
    exit 1
fi

key="$(sha256sum "$src/package-lock.json" | cut -c1-16)"
dest="$root/$key"
bin="$dest/node_modules/.bin"

if cmp -s "$src/package-lock.json" "$dest/.pinned-lock.json"; then
    echo "$bin"
    exit 0
fi

mkdir -p "$root"
work="$(mktemp -d "$root/.install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$src/package.json" "$src/package-lock.json" "$work/"
echo "install-clis.sh: installing pinned CLIs into $dest" >&2
# `npm ci` is tried first. It refuses a lock file that lacks any optional platform package, and a registry
# that does not serve every platform's binaries (as on the project's machines) leaves some out, so the
# fallback is `npm install` against the same lock file; the versions are checked against the pins below.
if ! (cd "$work" && npm ci --no-audit --no-fund --loglevel=error >&2 2>"$work/.npm-ci.err"); then
    echo "install-clis.sh: npm ci refused the lock file ($(grep -m1 'Missing:' "$work/.npm-ci.err" || echo 'see npm log')); using npm install with the lock file" >&2
    (cd "$work" && npm install --no-audit --no-fund --loglevel=error >&2)
fi
rm -f "$work/.npm-ci.err"
check() { # package, executable
    local want got
    want="$(node -e 'console.log(require(process.argv[1]).dependencies[process.argv[2]])' "$src/package.json" "$1")"
    got="$(node -e 'console.log(require(process.argv[1]).version)' "$work/node_modules/$1/package.json")"
    if [ "$want" != "$got" ]; then
        echo "install-clis.sh: $1 installed as $got, pinned $want" >&2
        exit 1
    fi
    if [ ! -x "$work/node_modules/.bin/$2" ]; then
        echo "install-clis.sh: $2 is missing after the install" >&2
        exit 1
    fi
}
check @anthropic-ai/claude-code claude
check @openai/codex codex
check opencode-ai opencode
check @google/gemini-cli gemini
check @qwen-code/qwen-code qwen
# Amp: the npm package's `bin/amp.exe` is replaced at install by the platform binary of
# @ampcode/cli-linux-x64 (a native executable, no Node.js at run time).
check @ampcode/cli amp
# Written last: its presence marks a complete install of exactly this lock file.
cp "$src/package-lock.json" "$work/.pinned-lock.json"
rm -rf "$dest"
# npm ci wrote absolute paths nowhere that matters, but .bin links are relative, so the folder can move.
mv "$work" "$dest"
trap - EXIT
echo "$bin"
