#!/usr/bin/env bash
# Runs the `memkv sync` benchmark of BENCHMARKS.md (Sync, issue 44) on this machine: `memkv sync`
# against the anthropic SDK's own memory sync (SessionMemoryStores, the environment worker's),
# both against one `memkv serve` on loopback, in one run; prints a Markdown table. Builds the
# release binary, and installs the SDK (anthropic 2.17.0, with the pins of
# tests/memory_stores/requirements-current.txt) from PyPI into target/sync-bench-venv. Takes
# about 12 minutes with the defaults (200 writes and 60 s idle per side).
#
#   tools/bench-sync.sh [--writes N] [--idle-seconds N] [--files N] [--bytes-each N] [--keep]
#   MEMKV_SYNC_BENCH_SDK=0 tools/bench-sync.sh ...     # memkv sync alone
#
# Every process it starts (the server, the syncs, the SDK's sandboxes) is stopped at the end;
# the scratch folders are under target/tmp and removed (kept with --keep).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd -P)

cargo build --release --locked -p memkv-cli
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
args=(--memkv "$target/release/memkv")

if [ "${MEMKV_SYNC_BENCH_SDK:-1}" != 0 ]; then
  venv="$root/target/sync-bench-venv"
  req="$root/tests/memory_stores/requirements-current.txt"
  check='from anthropic.lib.tools._memories import SessionMemoryStores'
  if ! { cmp -s "$req" "$venv/requirements.txt" && "$venv/bin/python" -c "$check" 2>/dev/null; }; then
    echo "setting up $venv (anthropic 2.17.0) …" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$venv/requirements.txt"
  fi
  args+=(--python "$venv/bin/python")
fi

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r); disk of $root: $(df -h . | awk 'NR==2 {print $1, $2}'); load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# The harness only starts processes and watches folders: it is built unoptimized (`--profile
# dev`, the workspace's test build), so that its dev-dependencies (memkv, SQLite, tantivy) are not
# built a second time in release (a quarter of an hour on two cores). What it measures is the
# release binary above.
cargo bench --locked --profile dev -p memkv-bench-compare --bench sync -- "${args[@]}" "$@"
