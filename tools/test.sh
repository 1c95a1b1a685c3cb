#!/usr/bin/env bash
# The README's test command: every suite of the repository. Rust first; then the Python and
# TypeScript packages, the MCP client tests and schemathesis against the `memkv` binary that
# `cargo test` built; then a short run of every fuzz target. A suite that cannot run fails the
# script.
#
# MEMKV_FULL_TESTS=1 adds the heavy suites: the fuzz smoke (cargo-fuzz installed and every target
# built and run, about 6 minutes on a fresh 2-core machine) and a longer schemathesis run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's time, printed as it ends.
phase_start=$SECONDS
took() { echo "== ($1: $((SECONDS - phase_start)) s)"; phase_start=$SECONDS; }

echo "== cargo test --workspace (redb, and PostgreSQL when its binaries are installed:"
echo "   tools/install-postgres.sh; without them its halves print SKIPPED)"
cargo test --workspace --locked
took "cargo test"

# The debug binary is built by the CLI's tests above (dependencies are optimized even in dev).
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
export MEMKV_BIN="${MEMKV_BIN:-$target_dir/debug/memkv}"
# `cargo build -p memkv-cli` here would build it again, with other features (no dev-dependencies
# unified): 100 s on a fresh machine for the same binary.
[ -x "$MEMKV_BIN" ] || cargo build --locked -p memkv-cli

echo "== Python (tools/test-python.sh)"
tools/test-python.sh
took Python

echo "== TypeScript (tools/test-typescript.sh)"
tools/test-typescript.sh
took TypeScript

echo "== MCP, with the official Python MCP client (tools/test-mcp.sh)"
tools/test-mcp.sh
took MCP

echo "== the memory-stores API, with the real anthropic SDK (tools/test-memory-stores.sh)"
tools/test-memory-stores.sh
took "memory stores"

echo "== schemathesis against a live memkv serve (tools/test-schemathesis.sh)"
if [ "${MEMKV_FULL_TESTS:-}" = 1 ]; then
    SCHEMATHESIS_SECONDS=${SCHEMATHESIS_SECONDS:-300} tools/test-schemathesis.sh
else
    tools/test-schemathesis.sh
fi
took schemathesis

if [ "${MEMKV_FULL_TESTS:-}" = 1 ]; then
    echo "== fuzz smoke (tools/fuzz-smoke.sh)"
    tools/fuzz-smoke.sh
    took "fuzz smoke"
else
    echo "== fuzz smoke: not run (MEMKV_FULL_TESTS=1 tools/test.sh runs it, or tools/fuzz-smoke.sh alone)"
fi
