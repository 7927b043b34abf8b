#!/usr/bin/env bash
# Sets up what the container and ssh launcher tests need, on this machine, offline:
#   - Docker: installs docker.io when dockerd is missing, starts dockerd when it is not running, builds the
#     image `agent-api-test:<hash>` with `docker import` from a root filesystem made of this machine's own
#     binaries (no registry is reached), and starts the containers `agent-api-test-0..4` from it (host
#     network, the pinned CLIs, Node and the bench sandboxes bind-mounted at their own paths);
#   - ssh: installs openssh-server when sshd is missing, makes a host key and a client key, and runs sshd on
#     127.0.0.1 on a free port (root login with that key only), with a client config naming it.
#
#   bash tests/launchers/setup.sh      # idempotent: a second run only checks
#
# It writes what it set up to $AGENT_API_LAUNCHERS_DIR/launchers.env (default
# $HOME/.cache/agent_api/launchers), which the tests read (agent_api_conformance::launchers). What it could not
# set up it says LOUDLY, records the reason there, and exits 0 so the rest of the suite runs; the tests that
# need it then fail with that reason. Never a silent skip.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

state="${AGENT_API_LAUNCHERS_DIR:-$HOME/.cache/agent_api/launchers}"
mkdir -p "$state"
out="$state/launchers.env.new"
: > "$out"
record() { printf '%s=%s\n' "$1" "$2" >> "$out"; }
loud() {
    echo "########################################################################" >&2
    echo "tests/launchers/setup.sh: NOT SET UP: $*" >&2
    echo "########################################################################" >&2
}
say() { echo "tests/launchers/setup.sh: $*" >&2; }

apt_install() {
    command -v apt-get > /dev/null || return 1
    # Another job may hold the dpkg lock for a while: wait for it instead of failing at once.
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y "$@" > "$state/apt.log" 2>&1 \
        || { apt-get -o DPkg::Lock::Timeout=300 update > /dev/null 2>&1 \
            && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y "$@" > "$state/apt.log" 2>&1; }
}

# ---------------------------------------------------------------------------------------------- docker

clis="$(bash tests/bench/install-clis.sh 2> /dev/null)"
cli_root="${clis%/node_modules/.bin}"
node_bin="$(readlink -f "$(command -v node)" 2> /dev/null)"
sandboxes="${AGENT_API_SANDBOX_DIR:-$HOME/.cache/agent_api/sandboxes}"
mkdir -p "$sandboxes"

docker_up() { docker info > /dev/null 2>&1; }

start_dockerd() {
    # This machine may itself be a container: no iptables, no bridge, no overlayfs; vfs storage works everywhere.
    mkdir -p "$state/dockerd"
    nohup dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver=vfs \
        --exec-root "$state/dockerd/exec" --pidfile "$state/dockerd/dockerd.pid" \
        > "$state/dockerd/dockerd.log" 2>&1 < /dev/null &
    for _ in $(seq 60); do
        docker_up && return 0
        kill -0 $! 2> /dev/null || break
        sleep 0.5
    done
    return 1
}

# The binaries the agents and the tests run inside the container, with the libraries they load (Node is
# bind-mounted, its libraries are in the image).
rootfs_tools="sh bash dash env cat ps kill sleep setsid ls grep sed head tail mkdir rm cp mv touch echo printf
true false id uname date tr wc sort find xargs dirname basename readlink chmod ln pwd stat timeout which git"

build_image() {
    local root="$state/rootfs" tools=() t
    for t in $rootfs_tools; do
        # type -P: the executable file, also for names that are shell builtins (kill, echo, printf).
        t="$(type -P "$t")" && tools+=("$(readlink -f "$t")" "$t")
    done
    # The CLIs' own native executables (Claude Code, OpenCode, Amp) load libraries from the image too.
    local libs_for=("$node_bin") exe
    for exe in "$clis"/*; do
        exe="$(readlink -f "$exe")"
        head -c 4 "$exe" 2> /dev/null | grep -q ELF && libs_for+=("$exe")
    done
    local hash
    hash="$(printf '%s\n' "${tools[@]}" "${libs_for[@]}" | xargs -r ls -lL 2> /dev/null | sha256sum | cut -c1-12)"
    image="agent-api-test:$hash"
    if docker image inspect "$image" > /dev/null 2>&1; then return 0; fi
    say "building $image from this machine's files"
    rm -rf "$root" && mkdir -p "$root"/{tmp,root,etc,proc,sys,dev,usr/bin,usr/lib,usr/lib64}
    chmod 1777 "$root/tmp"
    ln -s usr/bin "$root/bin" && ln -s usr/lib "$root/lib" && ln -s usr/lib64 "$root/lib64" && ln -s usr/bin "$root/usr/sbin"
    local files
    files="$( (printf '%s\n' "${tools[@]}"; for t in "${tools[@]}" "${libs_for[@]}"; do
        ldd "$t" 2> /dev/null | grep -o '/[^ ]*'; done) | sort -u)"
    local f
    for f in $files; do
        [ -e "$f" ] || continue
        # /bin, /lib and /lib64 are links into /usr here; keep one copy under /usr.
        local dest="$root/usr/${f#/usr/}"
        case "$f" in /bin/* | /lib/* | /lib64/*) dest="$root/usr$f" ;; esac
        mkdir -p "$(dirname "$dest")" && cp -L "$f" "$dest"
        # The real file as well, when $f is a link (ld.so and libc are found by either name).
        local real; real="$(readlink -f "$f")"
        [ "$real" != "$f" ] && mkdir -p "$root$(dirname "$real")" && cp -L "$real" "$root$real" 2> /dev/null
    done
    cp /etc/passwd /etc/group /etc/nsswitch.conf "$root/etc/" 2> /dev/null
    tar -C "$root" -c . | docker import - "$image" > /dev/null
}

start_containers() {
    local i name
    # seccomp unconfined: Codex sandboxes its commands with bwrap, which needs user namespaces.
    local opts=(--init --network host --security-opt seccomp=unconfined
        -v "$cli_root:$cli_root:ro" -v "$node_bin:/usr/bin/node:ro" -v "$sandboxes:$sandboxes")
    # A container made with other options or another image is made again.
    local config; config="$(printf '%s\n' "$image" "${opts[@]}" | sha256sum | cut -c1-12)"
    for i in 0 1 2 3 4; do
        name="agent-api-test-$i"
        if [ "$(docker inspect -f '{{.State.Running}} {{index .Config.Labels "agent-api-setup"}}' "$name" 2> /dev/null)" = "true $config" ]; then
            continue
        fi
        docker rm -f "$name" > /dev/null 2>&1
        # --init: orphans inside are reaped by docker-init instead of staying zombies of `sleep`.
        docker run -d --name "$name" --label "agent-api-setup=$config" "${opts[@]}" "$image" sleep infinity \
            > /dev/null 2> "$state/docker-run.err" || return 1
    done
    # Images of earlier builds take disk (vfs keeps whole copies): drop them.
    docker images agent-api-test --format '{{.Repository}}:{{.Tag}}' | grep -vxF "$image" | xargs -r docker rmi > /dev/null 2>&1
    return 0
}

setup_docker() {
    if ! command -v dockerd > /dev/null && ! command -v docker > /dev/null; then
        say "installing docker.io"
        apt_install docker.io || { loud "docker: apt-get install docker.io failed (see $state/apt.log)"; record DOCKER "apt-get install docker.io failed"; return; }
    fi
    if ! docker_up; then
        command -v dockerd > /dev/null || apt_install docker.io
        say "starting dockerd (log: $state/dockerd/dockerd.log)"
        if ! start_dockerd; then
            local why; why="$(grep -iE 'level=(error|fatal)|failed' "$state/dockerd/dockerd.log" | tail -1 | tr -d '\n')"
            loud "docker: dockerd does not start here: $why"
            record DOCKER "dockerd does not start: $why"
            return
        fi
    fi
    [ -n "$clis" ] || { loud "docker: the pinned CLIs are not installed (bash tests/bench/install-clis.sh)"; record DOCKER "pinned CLIs not installed"; return; }
    [ -n "$node_bin" ] || { loud "docker: node not found"; record DOCKER "node not found"; return; }
    build_image || { loud "docker: docker import failed"; record DOCKER "docker import failed"; return; }
    if ! start_containers; then
        loud "docker: docker run failed: $(tr -d '\n' < "$state/docker-run.err")"
        record DOCKER "docker run failed: $(tr -d '\n' < "$state/docker-run.err")"
        return
    fi
    record DOCKER ok
    record DOCKER_IMAGE "$image"
    record DOCKER_CONTAINERS "agent-api-test-0 agent-api-test-1 agent-api-test-2 agent-api-test-3 agent-api-test-4"
    say "docker: image $image, containers agent-api-test-0..4 running"
}

# ------------------------------------------------------------------------------------------------- ssh

free_port() {
    local port
    for port in $(shuf -i 20000-40000 -n 50); do
        (: < "/dev/tcp/127.0.0.1/$port") 2> /dev/null || { echo "$port"; return; }
    done
    return 1
}

setup_ssh() {
    local dir="$state/ssh"
    mkdir -p "$dir" && chmod 700 "$dir"
    if [ ! -x /usr/sbin/sshd ]; then
        say "installing openssh-server"
        apt_install openssh-server openssh-client || { loud "ssh: apt-get install openssh-server failed (see $state/apt.log)"; record SSH "apt-get install openssh-server failed"; return; }
    fi
    command -v ssh > /dev/null || { loud "ssh: no ssh client"; record SSH "no ssh client"; return; }
    [ -f "$dir/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key"
    [ -f "$dir/client_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/client_key"
    cp "$dir/client_key.pub" "$dir/authorized_keys"
    local port=""
    if [ -f "$dir/sshd.pid" ] && kill -0 "$(cat "$dir/sshd.pid")" 2> /dev/null && [ -f "$dir/port" ]; then
        port="$(cat "$dir/port")"
    else
        port="$(free_port)" || { loud "ssh: no free port"; record SSH "no free port"; return; }
        cat > "$dir/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $port
HostKey $dir/host_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
StrictModes no
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
LogLevel ERROR
EOF
        mkdir -p /run/sshd
        /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log" || { loud "ssh: sshd does not start: $(tail -1 "$dir/sshd.log")"; record SSH "sshd does not start: $(tail -1 "$dir/sshd.log")"; return; }
        echo "$port" > "$dir/port"
    fi
    echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$dir/host_key.pub")" > "$dir/known_hosts"
    cat > "$dir/ssh_config" <<EOF
Host agent-api-test-ssh
    HostName 127.0.0.1
    Port $port
    User root
    IdentityFile $dir/client_key
    IdentitiesOnly yes
    UserKnownHostsFile $dir/known_hosts
    StrictHostKeyChecking yes
    BatchMode yes
EOF
    local probe
    if ! probe="$(ssh -F "$dir/ssh_config" agent-api-test-ssh true 2>&1)"; then
        loud "ssh: cannot log in to sshd on 127.0.0.1:$port: $probe"
        record SSH "cannot log in: $probe"
        return
    fi
    record SSH ok
    record SSH_CONFIG "$dir/ssh_config"
    record SSH_HOST agent-api-test-ssh
    record SSH_PORT "$port"
    record SSHD_PID "$(cat "$dir/sshd.pid")"
    say "ssh: sshd on 127.0.0.1:$port; ssh -F $dir/ssh_config agent-api-test-ssh"
}

setup_docker
setup_ssh
record SANDBOXES "$sandboxes"
mv "$out" "$state/launchers.env"
say "state in $state/launchers.env"
