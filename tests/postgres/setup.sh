#!/usr/bin/env bash
# Starts the PostgreSQL server the store tests of `agent-api serve` use (server/tests/postgres.rs), on this
# machine, offline: Debian's `postgresql` package (installed when missing), a cluster of its own under
# $AGENT_API_POSTGRES_DATA (default: under $AGENT_API_POSTGRES_DIR, which defaults to
# $HOME/.cache/agent_api/postgres; as root /var/tmp/agent_api-postgres) run by the `postgres` user, listening on
# 127.0.0.1 only, port $AGENT_API_POSTGRES_PORT (default 54329), a role and database `agent_api` trusted on
# loopback (a throwaway test server: nothing else connects to it).
#
#   bash tests/postgres/setup.sh       # idempotent: a second run only checks (and starts a stopped server)
#   bash tests/postgres/setup.sh stop  # stops the server (the store-outage test stops and starts its own)
#
# It writes the database URL (or why there is none) to $AGENT_API_POSTGRES_DIR/postgres.env, which the tests
# read. What it cannot set up it says LOUDLY and exits 0 so that the rest of the suite runs; the tests that
# need it then fail with that reason. Never a silent skip.
set -uo pipefail

state="${AGENT_API_POSTGRES_DIR:-$HOME/.cache/agent_api/postgres}"
port="${AGENT_API_POSTGRES_PORT:-54329}"
mkdir -p "$state"
env_file="$state/postgres.env"
loud() {
    echo "########################################################################" >&2
    echo "tests/postgres/setup.sh: NOT SET UP: $*" >&2
    echo "########################################################################" >&2
    printf 'NOT_SET_UP=%s\n' "$*" > "$env_file"
    exit 0
}
say() { echo "tests/postgres/setup.sh: $*" >&2; }

bindir="$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -1)"
if [ -z "$bindir" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
        say "installing Debian's postgresql package"
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y postgresql > "$state/apt.log" 2>&1 \
            || { apt-get -o DPkg::Lock::Timeout=300 update > /dev/null 2>&1 \
                && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y postgresql > "$state/apt.log" 2>&1; } \
            || loud "apt-get install postgresql failed (see $state/apt.log)"
        bindir="$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -1)"
    fi
    [ -n "$bindir" ] || loud "PostgreSQL is not installed and cannot be (needs root and apt-get)"
fi

# PostgreSQL refuses to run as root: the cluster belongs to the `postgres` user when we are root.
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        id postgres > /dev/null 2>&1 || loud "no postgres user to run the server as"
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# The cluster's directory must be reachable by its owner: as root (whose home the postgres user cannot
# enter), under /var/tmp.
if [ "$(id -u)" = 0 ]; then
    data="${AGENT_API_POSTGRES_DATA:-/var/tmp/agent_api-postgres/data}"
    mkdir -p "$(dirname "$data")"
    chown postgres "$(dirname "$data")"
else
    data="${AGENT_API_POSTGRES_DATA:-$state/data}"
fi
if [ "${1:-}" = stop ]; then
    if ! as_owner "$bindir/pg_ctl" -D "$data" status > /dev/null 2>&1; then
        say "no server runs in $data"
        exit 0
    fi
    as_owner "$bindir/pg_ctl" -D "$data" -m fast -w -t 60 stop > /dev/null 2>&1 || { say "cannot stop the server in $data"; exit 1; }
    say "stopped the server in $data"
    exit 0
fi
if [ ! -f "$data/PG_VERSION" ]; then
    say "creating a cluster in $data"
    as_owner "$bindir/initdb" -D "$data" -U agent_api --auth=trust --no-sync > "$state/initdb.log" 2>&1 \
        || loud "initdb failed (see $state/initdb.log)"
fi
if ! as_owner "$bindir/pg_ctl" -D "$data" status > /dev/null 2>&1; then
    say "starting it on 127.0.0.1:$port"
    as_owner "$bindir/pg_ctl" -D "$data" -l "$(dirname "$data")/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $data -c fsync=off" start > /dev/null 2>&1 \
        || loud "the server did not start (see $(dirname "$data")/server.log)"
fi
if ! as_owner "$bindir/psql" -h 127.0.0.1 -p "$port" -U agent_api -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'agent_api'" 2> /dev/null | grep -q 1; then
    as_owner "$bindir/createdb" -h 127.0.0.1 -p "$port" -U agent_api agent_api > "$state/createdb.log" 2>&1 \
        || loud "createdb failed (see $state/createdb.log)"
fi
printf 'AGENT_API_TEST_POSTGRES_URL=postgres://agent_api@127.0.0.1:%s/agent_api\n' "$port" > "$env_file"
say "PostgreSQL ready at postgres://agent_api@127.0.0.1:$port/agent_api"
