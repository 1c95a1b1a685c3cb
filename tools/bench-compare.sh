#!/usr/bin/env bash
# Runs the side-by-side comparison of BENCHMARKS.md on this machine:
# memkv against a bare redb commit, the disk's raw fdatasync rate, SQLite (WAL, synchronous=FULL)
# and the Python SDK's reference handler (BetaLocalFilesystemMemoryTool), installed here from
# PyPI into a virtualenv. Prints a Markdown table. Takes a few minutes.
#
#   tools/bench-compare.sh [--seconds N] [--rounds N]
#
# The virtualenv is always <repository>/target/sdk-venv, beside the project's other virtualenvs,
# whatever CARGO_TARGET_DIR says: CARGO_TARGET_DIR only moves cargo's build (and the bench's
# scratch databases, in $CARGO_TARGET_DIR/tmp). The interpreter is handed to the bench as an
# absolute path, since `cargo bench` runs the bench in crates/memkv-bench-compare, not here.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd -P)

venv="$root/target/sdk-venv"
sdk_check='from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool'
if ! { [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$sdk_check" 2>/dev/null; }; then
  echo "setting up $venv with anthropic==2.14.0 …" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet 'anthropic==2.14.0'
fi
"$venv/bin/python" -c "$sdk_check" \
  || { echo "the SDK's memory handler is missing from $venv" >&2; exit 1; }

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r); disk of $root: $(df -h . | awk 'NR==2 {print $1, $2}')" >&2
cargo bench -p memkv-bench-compare --bench compare -- --python "$venv/bin/python" "$@"
