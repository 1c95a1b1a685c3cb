#!/usr/bin/env bash
# The Python suite: the `memkv` package (python/) with the real anthropic SDK against a real
# `memkv serve` on loopback, run twice, once per SDK:
#
# - pinned: anthropic 2.14.0, the oldest the package declares (python/requirements-test.txt),
#   in MEMKV_PY_VENV (default .venv): the whole suite.
# - current: anthropic 2.17.0 (python/requirements-test-current.txt), in MEMKV_PY_VENV_CURRENT
#   (default .venv-sdk-current): the tests of what the SDK's classes and runner touch, the tool,
#   the search tool, the tool runner and the examples ($CURRENT_TESTS below: about 70 s, the
#   whole suite 85 s); the whole suite when MEMKV_FULL_TESTS=1. What is left out there (the
#   transport limits, the wheel, webhooks, replay) goes through httpx2 and memkv, not the SDK.
#
# MEMKV_SDK=pinned or MEMKV_SDK=current runs one of the two. Extra arguments go to pytest, in both
# runs (`-k runner`, `-x`). Each run installs the exact pins of its
# requirements file, and the package's wheel (maturin, with the memkv binary in it: built here
# unless MEMKV_WHEEL names one); the release memkv binary is built for the tests unless MEMKV_BIN
# names one. MEMKV_PREPARE_ONLY=1 stops once the virtualenvs are ready (tools/test.sh, while
# cargo builds).
set -euo pipefail
cd "$(dirname "$0")/.."

CURRENT_TESTS=(
    python/tests/test_tool.py
    python/tests/test_search.py
    python/tests/test_runner.py
    python/tests/test_example.py
    python/tests/test_context_editing.py
)
python="${PYTHON:-python3}"
runs=()
case "${MEMKV_SDK:-}" in
    "") runs=(pinned current) ;;
    pinned | current) runs=("$MEMKV_SDK") ;;
    *) echo "MEMKV_SDK must be pinned or current, not ${MEMKV_SDK}" >&2; exit 2 ;;
esac

venv_of() { if [ "$1" = pinned ]; then echo "${MEMKV_PY_VENV:-.venv}"; else echo "${MEMKV_PY_VENV_CURRENT:-.venv-sdk-current}"; fi; }
requirements_of() { if [ "$1" = pinned ]; then echo python/requirements-test.txt; else echo python/requirements-test-current.txt; fi; }

for run in "${runs[@]}"; do
    venv="$(venv_of "$run")"
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip --disable-pip-version-check --quiet install -r "$(requirements_of "$run")"
done
[ "${MEMKV_PREPARE_ONLY:-}" = 1 ] && exit 0

# The package as `pip install ./python` makes it: a wheel that carries the `memkv` binary
# (maturin; tools/build-wheel.sh, unless MEMKV_WHEEL names one already built), installed into
# each run's virtualenv from the wheel. python/tests/test_wheel.py installs it again into a
# fresh virtualenv with no cargo.
if [ -z "${MEMKV_WHEEL:-}" ]; then
    MEMKV_WHEEL="$(tools/build-wheel.sh)"
fi
export MEMKV_WHEEL

if [ -z "${MEMKV_BIN:-}" ]; then
    target_dir="$(cargo metadata --format-version 1 --no-deps | "$python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
    cargo build --release --locked -p memkv-cli
    MEMKV_BIN="$target_dir/release/memkv"
fi
export MEMKV_BIN

for run in "${runs[@]}"; do
    venv="$(venv_of "$run")"
    pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
    "${pip[@]}" install --no-deps --force-reinstall "$MEMKV_WHEEL"
    "${pip[@]}" check
    sdk="$("$venv/bin/python" -c 'import anthropic; print(anthropic.__version__)')"
    tests=(python/tests)
    if [ "$run" = current ] && [ "${MEMKV_FULL_TESTS:-}" != 1 ]; then
        tests=("${CURRENT_TESTS[@]}")
    fi
    echo "== pytest, anthropic $sdk ($run): ${tests[*]}"
    start=$SECONDS
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "${tests[@]}" "$@"
    echo "== anthropic $sdk ($run): $((SECONDS - start)) s"
done
