#!/usr/bin/env bash
# The memory-stores API tests: the real anthropic SDK (2.14.0, `client.beta.memory_stores`)
# against `memkv serve` processes on loopback, with memory-tool commands on the same stores, and
# the SDK's own memory sync (SessionMemoryStores) keeping a sandbox directory in step with one.
# Extra arguments go to pytest.
exec "$(dirname "$0")/pytest-suite.sh" memory_stores "$@"
