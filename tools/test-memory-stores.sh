#!/usr/bin/env bash
# The memory-stores API tests: the real anthropic SDK (2.14.0, `client.beta.memory_stores`)
# against `memkv serve` processes on loopback, with memory-tool commands on the same stores.
# Extra arguments go to pytest.
exec "$(dirname "$0")/pytest-suite.sh" memory_stores "$@"
