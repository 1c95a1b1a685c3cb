#!/usr/bin/env bash
# The README's test command: every suite of the repository. cargo builds the Rust tests first;
# then the Rust tests, the Python and TypeScript packages, the MCP client tests, the memory-stores
# API tests, schemathesis and the fleet test (PostgreSQL, three servers and HAProxy:
# tools/test-fleet.sh) run, the others against the `memkv` binary that build made. A suite that
# cannot run fails the script.
#
# While cargo builds, the suites' virtualenvs and node_modules are installed in the background
# (MEMKV_PREPARE_ONLY=1 of each script). The suites then run three at a time (the Rust tests in a
# lane of their own): each mostly waits on the processes it starts. A suite's output goes to
# target/test-logs/NAME.log; its last lines are shown when it passes, all of it when it fails.
#
# The Python, TypeScript and memory-stores suites run against two versions of the anthropic SDKs:
# the pinned ones (anthropic 2.14.0, @anthropic-ai/sdk 1.14.0, the oldest the packages declare)
# and the current ones (2.17.0, 1.17.0), each pinned exactly in a second requirements file or
# lock; each script's header says what its second run covers (about 2 minutes more in all,
# spread over the lanes below).
#
# MEMKV_FULL_TESTS=1 adds the heavy suites: the fuzz smoke (cargo-fuzz installed and every target
# built and run, about 6 minutes on a fresh 2-core machine), a longer schemathesis run and the
# heaviest Rust cases at full size; and the whole Python suite against the current SDK too.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's time, printed as it ends.
phase_start=$SECONDS
took() { echo "== ($1: $((SECONDS - phase_start)) s)"; phase_start=$SECONDS; }

target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
logs="$target_dir/test-logs"
rm -rf "$logs"
mkdir -p "$logs"

# Everything started here is stopped when the script ends, however it ends.
background=()
stop_background() {
    for pid in "${background[@]}"; do
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    done
}
trap stop_background EXIT

# Runs `tools/SCRIPT` with its output in $logs/NAME.log; says how it went.
suite() {
    local name=$1 start=$SECONDS
    shift
    if "$@" >"$logs/$name.log" 2>&1; then
        # One write, so that the other lane's lines do not come between.
        printf '%s\n' "== $name: passed in $((SECONDS - start)) s" "$(tail -n 3 "$logs/$name.log" | sed 's/^/   /')"
    else
        echo "== $name: FAILED after $((SECONDS - start)) s; its output ($logs/$name.log):"
        cat "$logs/$name.log"
        return 1
    fi
}

echo "== installing the suites' Python and npm packages in the background ($logs/prepare.log)"
set -m
(
    export MEMKV_PREPARE_ONLY=1
    tools/test-python.sh
    tools/test-typescript.sh
    tools/pytest-suite.sh mcp
    tools/test-memory-stores.sh
    tools/pytest-suite.sh console
    tools/test-schemathesis.sh
    tools/test-fleet.sh
) >"$logs/prepare.log" 2>&1 &
prepare=$!
set +m
background+=("$prepare")

echo "== cargo test --workspace --no-run (the build; the tests run below, beside the other suites)"
cargo test --workspace --locked --no-run
took "cargo test's build"

# The debug binary is built with the CLI's tests above (dependencies are optimized even in dev).
export MEMKV_BIN="${MEMKV_BIN:-$target_dir/debug/memkv}"
# (crates/memkv-cli/Cargo.toml turns on what the test build turns on, so that a build of the
# binary alone, here or in the wheel's build, reuses it.)
[ -x "$MEMKV_BIN" ] || cargo build --locked -p memkv-cli
# The Python package's wheel (maturin: the package and the binary), built now: it relinks the
# debug binary, which the suites below run.
MEMKV_WHEEL="$(tools/build-wheel.sh)"
export MEMKV_WHEEL
took "the wheel"

if ! wait "$prepare"; then
    echo "== installing the suites' packages FAILED; its output:"
    cat "$logs/prepare.log"
    exit 1
fi
took "package installs, after cargo test's build"

if [ "${MEMKV_FULL_TESTS:-}" = 1 ]; then
    export SCHEMATHESIS_SECONDS=${SCHEMATHESIS_SECONDS:-300}
fi
# The Rust tests (redb, and PostgreSQL when its binaries are installed: tools/install-postgres.sh;
# without them its halves print SKIPPED) in a lane of their own, beside two lanes of about the
# same length for the other suites: all of them mostly wait on the processes, servers and disk
# flushes they start, so three lanes share the two cores.
set -m
(
    suite "cargo test" cargo test --workspace --locked
) &
lane0=$!
(
    suite Python tools/test-python.sh
    suite MCP tools/test-mcp.sh
    suite "memory stores" tools/test-memory-stores.sh
) &
lane1=$!
(
    suite TypeScript tools/test-typescript.sh
    suite schemathesis tools/test-schemathesis.sh
    MEMKV_FLEET_REPORT="$logs/fleet.json" suite fleet tools/test-fleet.sh
    MEMKV_CONSOLE_REPORT="$logs/console.json" suite console tools/test-console.sh
) &
lane2=$!
set +m
background+=("$lane0" "$lane1" "$lane2")
status=0
wait "$lane0" || status=1
wait "$lane1" || status=1
wait "$lane2" || status=1
took "cargo test, Python, TypeScript, MCP, memory stores, the console, schemathesis and the fleet"
[ "$status" = 0 ] || exit 1

if [ "${MEMKV_FULL_TESTS:-}" = 1 ]; then
    echo "== fuzz smoke (tools/fuzz-smoke.sh)"
    tools/fuzz-smoke.sh
    took "fuzz smoke"
else
    echo "== fuzz smoke: not run (MEMKV_FULL_TESTS=1 tools/test.sh runs it, or tools/fuzz-smoke.sh alone)"
fi
