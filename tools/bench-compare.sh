#!/usr/bin/env bash
# Runs the side-by-side comparison of BENCHMARKS.md on this machine:
# memkv against a bare redb commit, the disk's raw fdatasync rate, SQLite (WAL, synchronous=FULL)
# and the Python SDK's reference handler (BetaLocalFilesystemMemoryTool), installed here from
# PyPI into a virtualenv. Prints a Markdown table. Takes about two minutes.
#
#   tools/bench-compare.sh [--seconds N] [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/sdk-venv
if [ ! -x "$venv/bin/python" ]; then
  echo "setting up $venv with anthropic==2.14.0 …" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet 'anthropic==2.14.0'
fi
"$venv/bin/python" -c 'from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool' \
  || { echo "the SDK's memory handler is missing from $venv" >&2; exit 1; }

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r); disk of $(pwd): $(df -h . | awk 'NR==2 {print $1, $2}')" >&2
cargo bench -p memkv-bench-compare --bench compare -- --python "$venv/bin/python" "$@"
