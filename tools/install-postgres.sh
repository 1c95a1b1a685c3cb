#!/usr/bin/env bash
# What the PostgreSQL backend needs on a Debian machine, installed when missing (idempotent,
# quiet): OpenSSL's headers and pkg-config to build its TLS, and PostgreSQL's server binaries for
# the tests, which start a throwaway cluster of their own (tests/support/pg.rs); and ripgrep,
# which the search tests compare memkv's exact search with (tests/it/search.rs); groff and
# systemd-analyze for the CLI's tests of the manual pages and the systemd unit; HAProxy, the
# balancer in front of the fleet test's three servers (tools/test-fleet.sh); Chromium and its
# ChromeDriver, the browser of the console's tests (tools/test-console.sh).
set -euo pipefail
missing=()
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
pkg-config --exists openssl 2>/dev/null || missing+=(libssl-dev pkg-config)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
# The CLI's tests of what an install needs: groff formats the manual pages, systemd-analyze
# verifies the unit of docs/deployment.md (both on Debian's images already, as a rule).
command -v groff >/dev/null 2>&1 || missing+=(groff-base)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
ls -d /usr/lib/postgresql/*/bin | tail -1
