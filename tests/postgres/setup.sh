#!/usr/bin/env bash
# Starts the PostgreSQL server the store tests of `agent-api serve` use (server/tests/postgres.rs), on this
# machine, offline: Debian's `postgresql` package (installed when missing), a cluster of its own under
# $AGENT_API_POSTGRES_DATA (default: under $AGENT_API_POSTGRES_DIR, which defaults to
# $HOME/.cache/agent_api/postgres; as root /var/tmp/agent_api-postgres) run by the `postgres` user, listening on
# 127.0.0.1 only, port $AGENT_API_POSTGRES_PORT (default 54329), a role and database `agent_api` trusted on
# loopback (a throwaway test server: nothing else connects to it).
#
# Beside it, a second cluster with TLS on (port $AGENT_API_POSTGRES_TLS_PORT, default 54330) for the TLS tests
# (server/tests/postgres_tls.rs): a CA and a server certificate for localhost and 127.0.0.1 made with openssl at
# setup, plus a second CA that signed nothing (the "wrong CA"). Plain connections stay allowed on it; the first
# cluster has no TLS (the `sslmode=require` refusal is tested on it). Its URL and CA files go to the env file.
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

# The TLS cluster. What fails here is written to the env file (TLS_NOT_SET_UP=why) and said loudly; the TLS tests
# then fail with it, and the plain cluster's tests run on.
tls_port="${AGENT_API_POSTGRES_TLS_PORT:-54330}"
tls_dir="$state/tls"
tls_data="${data}-tls"
tls_loud() {
    echo "########################################################################" >&2
    echo "tests/postgres/setup.sh: TLS CLUSTER NOT SET UP: $*" >&2
    echo "########################################################################" >&2
    printf 'TLS_NOT_SET_UP=%s\n' "$*" >> "$env_file"
    exit 0
}
command -v openssl > /dev/null || tls_loud "openssl is missing (apt-get install openssl)"
if [ ! -s "$tls_dir/server.crt" ] || [ ! -s "$tls_dir/other-ca.crt" ]; then
    mkdir -p "$tls_dir"
    (
        set -e
        cd "$tls_dir"
        ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        # shellcheck disable=SC2086
        openssl req -x509 $ec -keyout ca.key -out ca.crt -days 3650 -subj "/CN=agent_api test CA" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
        # shellcheck disable=SC2086
        openssl req -x509 $ec -keyout other-ca.key -out other-ca.crt -days 3650 -subj "/CN=agent_api other CA" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
        # shellcheck disable=SC2086
        openssl req $ec -keyout server.key -out server.csr -subj "/CN=localhost"
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' > server.ext
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 3650 -extfile server.ext
        rm -f server.csr server.ext ca.srl other-ca.key
    ) > "$state/openssl.log" 2>&1 || tls_loud "openssl could not make the certificates (see $state/openssl.log)"
fi
if [ ! -f "$tls_data/PG_VERSION" ]; then
    say "creating a TLS cluster in $tls_data"
    as_owner "$bindir/initdb" -D "$tls_data" -U agent_api --auth=trust --no-sync > "$state/initdb-tls.log" 2>&1 \
        || tls_loud "initdb of the TLS cluster failed (see $state/initdb-tls.log)"
fi
# The server's key and certificate live in its data directory, its owner's, the key private.
install -m 600 "$tls_dir/server.key" "$tls_data/server.key" && install -m 644 "$tls_dir/server.crt" "$tls_data/server.crt" \
    || tls_loud "cannot copy the server certificate into $tls_data"
if [ "$(id -u)" = 0 ]; then chown postgres "$tls_data/server.key" "$tls_data/server.crt"; fi
if ! as_owner "$bindir/pg_ctl" -D "$tls_data" status > /dev/null 2>&1; then
    say "starting the TLS cluster on 127.0.0.1:$tls_port"
    as_owner "$bindir/pg_ctl" -D "$tls_data" -l "$(dirname "$tls_data")/server-tls.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $tls_port -k $tls_data -c fsync=off -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key" start > /dev/null 2>&1 \
        || tls_loud "the TLS cluster did not start (see $(dirname "$tls_data")/server-tls.log)"
fi
as_owner "$bindir/psql" "host=127.0.0.1 port=$tls_port user=agent_api dbname=postgres sslmode=require" -tAc "SHOW ssl" 2> /dev/null | grep -q on \
    || tls_loud "the cluster on $tls_port does not speak TLS"
{
    printf 'AGENT_API_TEST_POSTGRES_TLS_URL=postgres://agent_api@localhost:%s/postgres\n' "$tls_port"
    printf 'AGENT_API_TEST_POSTGRES_TLS_CA=%s\n' "$tls_dir/ca.crt"
    printf 'AGENT_API_TEST_POSTGRES_OTHER_CA=%s\n' "$tls_dir/other-ca.crt"
} >> "$env_file"
say "PostgreSQL with TLS ready at postgres://agent_api@localhost:$tls_port/postgres (CA: $tls_dir/ca.crt)"
