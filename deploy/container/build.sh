#!/usr/bin/env bash
# Builds the agent-api server image from the release binary, with no base image:
#
#   cargo build --release -p agent-api-cli
#   deploy/container/build.sh [BINARY] [TAG]      # defaults: target/release/agent-api, agent-api:<version>
#
# The image's root filesystem is the binary, the shared libraries `ldd` names (and their
# loader), a passwd/group entry for the unprivileged user 65532, a home and /tmp. To run agent
# CLIs in the server's container, put their files (a Node.js install and the CLIs' packages) in
# a directory laid out as the image's root and pass it as EXTRA_ROOTFS=DIR.
# CONTAINER_TOOL=podman builds with podman instead of docker.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
binary="${1:-$repo/target/release/agent-api}"
tool="${CONTAINER_TOOL:-docker}"
if [[ ! -x "$binary" ]]; then
    echo "build.sh: no binary at $binary: cargo build --release -p agent-api-cli first" >&2
    exit 1
fi
version="$("$binary" --version | awk '{print $2}')"
tag="${2:-agent-api:$version}"

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
install -D -m 0755 "$binary" "$root/usr/local/bin/agent-api"
# Every library the binary loads, at the path the loader looks for it, and the loader itself.
ldd "$binary" | awk '/=> \//{print $3} /^[ \t]*\/[^ ]+ \(/{print $1}' | sort -u | while read -r lib; do
    install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
done
install -d -m 0755 "$root/etc" "$root/home" "$root/run/secrets/agent-api"
install -d -m 1777 "$root/tmp"
install -d -m 0700 "$root/home/agent-api"
echo 'root:x:0:0:root:/root:/sbin/nologin' > "$root/etc/passwd"
echo 'agent-api:x:65532:65532:agent-api:/home/agent-api:/sbin/nologin' >> "$root/etc/passwd"
printf 'root:x:0:\nagent-api:x:65532:\n' > "$root/etc/group"
if ! chown -R 65532:65532 "$root/home/agent-api" 2>/dev/null; then
    echo "build.sh: not root: the image's home is not its user's (mount a writable volume there)" >&2
fi
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
fi
if [[ -n "${EXTRA_ROOTFS:-}" ]]; then
    cp -a "$EXTRA_ROOTFS"/. "$root"/
fi
"$tool" build --file "$here/Containerfile" --tag "$tag" "$root"
echo "$tag"
