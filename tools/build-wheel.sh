#!/usr/bin/env bash
# Builds the Python package's wheel as `pip install ./python` does (maturin, python/pyproject.toml:
# the package and the `memkv` binary in one wheel) into target/wheels, and prints its path.
# MEMKV_WHEEL_PROFILE picks cargo's profile: `dev` (the default here: it reuses what `cargo test`
# compiled) or `release` (what `pip install ./python` builds). The build relinks the binary in
# target/<profile>/: tools/test.sh runs this before any suite runs that binary.
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${MEMKV_WHEEL_PROFILE:-dev}"
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
wheels="$target_dir/wheels"
rm -rf "$wheels"
MATURIN_PEP517_ARGS="--profile $profile" python3 -m pip wheel --disable-pip-version-check --quiet --no-deps ./python -w "$wheels" >&2
ls "$wheels"/memkv-*.whl
