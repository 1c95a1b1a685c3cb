#!/usr/bin/env bash
# The memory-stores API tests: the real anthropic SDK (`client.beta.memory_stores`) against
# `memkv serve` processes on loopback, with memory-tool commands on the same stores, and the SDK's
# own memory sync (SessionMemoryStores) keeping a sandbox directory in step with one, and from
# 2.17.0 on writing the agent's file edits through to it (test_write_through.py).
#
# The whole suite runs twice (about 25 s each): with anthropic 2.14.0, the pinned SDK
# (tests/memory_stores/requirements.txt), then with the current 2.17.0 (requirements-current.txt,
# its own virtualenv; tools/pytest-suite.sh). MEMKV_SDK=pinned or MEMKV_SDK=current runs one of
# them. Extra arguments go to pytest, in both runs.
set -euo pipefail
here="$(dirname "$0")"
case "${MEMKV_SDK:-}" in
    "") runs=(pinned current) ;;
    pinned | current) runs=("$MEMKV_SDK") ;;
    *) echo "MEMKV_SDK must be pinned or current, not ${MEMKV_SDK}" >&2; exit 2 ;;
esac
for run in "${runs[@]}"; do
    [ "${MEMKV_PREPARE_ONLY:-}" = 1 ] || echo "== the memory-stores API tests, the $run SDK"
    MEMKV_SDK=$run "$here/pytest-suite.sh" memory_stores "$@"
done
