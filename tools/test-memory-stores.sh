#!/usr/bin/env bash
# The memory-stores API tests: the real anthropic SDK (2.14.0, `client.beta.memory_stores`)
# against `memkv serve` processes on loopback, with memory-tool commands on the same stores.
# Creates target/memory-stores-venv from tests/memory_stores/requirements.txt (pinned) when it
# is missing or stale. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
venv="$target/memory-stores-venv"
req=tests/memory_stores/requirements.txt
if ! cmp -s "$req" "$venv/requirements.txt"; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$venv/requirements.txt"
fi

# The binary under test: $MEMKV_BIN (tools/test.sh sets it), else the debug build, built now.
if [ -z "${MEMKV_BIN:-}" ]; then
    cargo build --quiet --locked -p memkv-cli
    export MEMKV_BIN="$PWD/$target/debug/memkv"
fi
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/memory_stores "$@"
