#!/usr/bin/env bash
# The console's browser tests: `memkv serve` on loopback, driven by Playwright in Debian's
# headless Chromium (tools/install-postgres.sh installs it; the test fails without it). Screenshots
# of the main pages go to target/console-shots (MEMKV_CONSOLE_SHOTS=DIR: elsewhere, e.g.
# docs/console to update the README's). Extra arguments go to pytest.
exec "$(dirname "$0")/pytest-suite.sh" console "$@"
