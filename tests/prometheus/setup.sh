#!/usr/bin/env bash
# Prometheus for the metrics test of `agent-api serve` (server/tests/metrics.rs): Debian's package,
# installed when missing. The test starts its own server on a loopback port with a configuration of
# its own (it never uses a system service). Says loudly what it cannot set up; the test then fails
# naming the package, never skips.
#
#   bash tests/prometheus/setup.sh
set -uo pipefail
if command -v prometheus > /dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null 2>&1; then
    echo "tests/prometheus/setup.sh: installing Debian's prometheus package for the metrics test" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends prometheus > /dev/null 2>&1 \
        || { apt-get -o DPkg::Lock::Timeout=300 update > /dev/null 2>&1 \
            && apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends prometheus > /dev/null 2>&1; }
fi
if ! command -v prometheus > /dev/null 2>&1; then
    echo "########################################################################" >&2
    echo "tests/prometheus/setup.sh: NOT SET UP: prometheus is missing and could not be installed" >&2
    echo "(needs root and apt-get: package prometheus); the metrics test WILL FAIL" >&2
    echo "########################################################################" >&2
fi
exit 0
