#!/usr/bin/env bash
# The Python suite: the `memkv` package (python/) with the real anthropic SDK (2.14.0) against a
# real `memkv serve` on loopback. Creates or reuses a virtualenv (MEMKV_PY_VENV, default .venv),
# installs the exact pins of python/requirements-test.txt and ./python, builds the memkv binary
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
"${pip[@]}" install --no-build-isolation --no-deps --force-reinstall ./python
"${pip[@]}" check
[ "${MEMKV_PREPARE_ONLY:-}" = 1 ] && exit 0

if [ -z "${MEMKV_BIN:-}" ]; then
    cargo build --release --locked -p memkv-cli
    MEMKV_BIN="$(cargo metadata --format-version 1 --no-deps | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/memkv"
fi
export MEMKV_BIN

"$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests "$@"
