#!/usr/bin/env bash
# The README's test command: every suite of the repository. Rust first; then the Python and
# TypeScript packages, the MCP client tests and schemathesis against the `memkv` binary that
# `cargo test` built; then a short run of every fuzz target. A suite that cannot run fails the
# script.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test --workspace (redb, and PostgreSQL when its binaries are installed:"
echo "   tools/install-postgres.sh; without them its halves print SKIPPED)"
cargo test --workspace --locked

# The debug binary is built by the CLI's tests above (dependencies are optimized even in dev).
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
export MEMKV_BIN="${MEMKV_BIN:-$target_dir/debug/memkv}"
cargo build --locked -p memkv-cli

echo "== Python (tools/test-python.sh)"
tools/test-python.sh

echo "== TypeScript (tools/test-typescript.sh)"
tools/test-typescript.sh

echo "== MCP, with the official Python MCP client (tools/test-mcp.sh)"
tools/test-mcp.sh

echo "== the memory-stores API, with the real anthropic SDK (tools/test-memory-stores.sh)"
tools/test-memory-stores.sh

echo "== schemathesis against a live memkv serve (tools/test-schemathesis.sh)"
tools/test-schemathesis.sh

echo "== fuzz smoke (tools/fuzz-smoke.sh)"
tools/fuzz-smoke.sh
