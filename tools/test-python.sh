#!/usr/bin/env bash
# The Python suite: the `memkv` package (python/) with the real anthropic SDK (2.14.0) against a
# real `memkv serve` on loopback. Creates or reuses a virtualenv (MEMKV_PY_VENV, default .venv),
# installs the exact pins of python/requirements-test.txt, builds the package's wheel (maturin,
# with the memkv binary in it) and installs it, builds the release memkv binary for the tests
# (unless MEMKV_BIN names one) and runs pytest. Extra arguments go to pytest.
# MEMKV_PREPARE_ONLY=1 stops once the virtualenv is ready (tools/test.sh, while cargo builds).
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${MEMKV_PY_VENV:-.venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
"${pip[@]}" install -r python/requirements-test.txt
[ "${MEMKV_PREPARE_ONLY:-}" = 1 ] && exit 0

target_dir="$(cargo metadata --format-version 1 --no-deps | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
# The package as `pip install ./python` makes it: a wheel that carries the `memkv` binary
# (maturin; tools/build-wheel.sh, unless MEMKV_WHEEL names one already built), installed into
# the suite's virtualenv from the wheel. python/tests/test_wheel.py installs it again into a
# fresh virtualenv with no cargo.
if [ -z "${MEMKV_WHEEL:-}" ]; then
    MEMKV_WHEEL="$(tools/build-wheel.sh)"
fi
export MEMKV_WHEEL
"${pip[@]}" install --no-deps --force-reinstall "$MEMKV_WHEEL"
"${pip[@]}" check

if [ -z "${MEMKV_BIN:-}" ]; then
    cargo build --release --locked -p memkv-cli
    MEMKV_BIN="$target_dir/release/memkv"
fi
export MEMKV_BIN

"$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests "$@"
