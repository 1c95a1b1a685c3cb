#!/usr/bin/env bash
# The fleet test: one PostgreSQL cluster, three `memkv serve` on it and HAProxy in front
# (tests/fleet/haproxy.cfg.template), all on 127.0.0.1, under load from the memkv Python package
# (./python) through the balancer: keys and settings reach every server within a second, a server
# killed costs the clients no acknowledged write, a rolling restart costs them nothing, a backup
# over HTTP restores clean. Prints the figures (throughput, latency, failover, propagation) and
# writes them as JSON to $MEMKV_FLEET_REPORT when it is set.
#
# Needs PostgreSQL's server binaries and haproxy (tools/install-postgres.sh installs both). Creates
# target/fleet-venv from tests/fleet/requirements.txt (pinned) when it is missing or stale, and
# imports the package from the tree (python/src); the binary under test is $MEMKV_BIN, else the debug
# build, built now. MEMKV_PREPARE_ONLY=1 stops once the virtualenv is ready. Extra arguments go
# to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
venv="$target/fleet-venv"
req=tests/fleet/requirements.txt
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
if ! cmp -s "$req" "$venv/requirements.txt"; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "${pip[@]}" install -r "$req"
    cp "$req" "$venv/requirements.txt"
fi
[ "${MEMKV_PREPARE_ONLY:-}" = 1 ] && exit 0

for tool in haproxy; do
    command -v "$tool" >/dev/null 2>&1 || { echo "no $tool: run tools/install-postgres.sh" >&2; exit 1; }
done
if [ -z "${MEMKV_BIN:-}" ]; then
    cargo build --quiet --locked -p memkv-cli
    MEMKV_BIN="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/memkv"
fi
export MEMKV_BIN
# The package as it is in the tree now (its wheel, which also carries the binary, is built and
# tested by tools/test-python.sh).
export PYTHONPATH="$PWD/python/src${PYTHONPATH:+:$PYTHONPATH}"

status=0
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/fleet "$@" || status=$?
if [ "$status" = 5 ]; then
    echo "tools/test-fleet.sh: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
