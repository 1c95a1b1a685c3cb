#!/usr/bin/env bash
# Writes tests/data/golden-sessions.jsonl anew: the sessions of the golden table (tests/it/golden.rs)
# as data, which the Python and TypeScript suites replay through their in-process objects
# (tests/it/golden_sessions.rs says which sessions are kept). Run it after a change to the
# golden table or to a model-facing string; `cargo test` then checks the file against the code.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
MEMKV_GOLDEN_RECORD="$out" cargo test --locked -q -p memkv --test it -- golden:: >&2
# Each case runs on every backend: the same session twice; sorted, so that the file changes only
# when the table does.
LC_ALL=C sort -u "$out" > tests/data/golden-sessions.jsonl
wc -l tests/data/golden-sessions.jsonl >&2
