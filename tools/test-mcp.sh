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

cargo build --quiet -p memkv-cli
MEMKV_BIN="$PWD/$target/debug/memkv" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/mcp "$@"
