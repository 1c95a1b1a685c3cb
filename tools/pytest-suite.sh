#!/usr/bin/env bash
# Runs one pytest suite of tests/ against the memkv binary: `tools/pytest-suite.sh DIR [ARGS]`.
# Creates target/DIR-venv from tests/DIR/requirements.txt (pinned) when it is missing or stale;
# the binary under test is $MEMKV_BIN (tools/test.sh sets it), else the debug build, built now.
# MEMKV_PREPARE_ONLY=1 stops once the virtualenv is ready (tools/test.sh, while cargo builds).
# MEMKV_SDK=current uses tests/DIR/requirements-current.txt (the current anthropic SDK) and
# target/DIR-current-venv instead. Extra arguments go to pytest. tools/test-mcp.sh and
# tools/test-memory-stores.sh call it.
set -euo pipefail
cd "$(dirname "$0")/.."

suite="${1:?usage: tools/pytest-suite.sh DIR [pytest args]}"
shift
target="${CARGO_TARGET_DIR:-target}"
venv="$target/${suite//_/-}-venv"
req="tests/$suite/requirements.txt"
if [ "${MEMKV_SDK:-}" = current ]; then
    venv="$target/${suite//_/-}-current-venv"
    req="tests/$suite/requirements-current.txt"
fi
if ! cmp -s "$req" "$venv/requirements.txt"; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$venv/requirements.txt"
fi
[ "${MEMKV_PREPARE_ONLY:-}" = 1 ] && exit 0

if [ -z "${MEMKV_BIN:-}" ]; then
    cargo build --quiet --locked -p memkv-cli
    MEMKV_BIN="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/memkv"
    export MEMKV_BIN
fi
"$venv/bin/python" -m pytest -q -p no:cacheprovider "tests/$suite" "$@"
