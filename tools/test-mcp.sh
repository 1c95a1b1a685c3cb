#!/usr/bin/env bash
# MCP tests: the official Python MCP SDK (a real client, another implementation than rmcp) drives
# `memkv mcp` over stdio and `memkv serve` over streamable HTTP, as processes on loopback.
# Creates target/mcp-venv from tests/mcp/requirements.txt (pinned) when it is missing or stale.
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
venv="$target/mcp-venv"
req=tests/mcp/requirements.txt
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
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/mcp "$@"
