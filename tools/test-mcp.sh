#!/usr/bin/env bash
# MCP tests: the official Python MCP SDK (a real client, another implementation than rmcp) drives
# `memkv mcp` over stdio and `memkv serve` over streamable HTTP, as processes on loopback.
# Extra arguments go to pytest.
exec "$(dirname "$0")/pytest-suite.sh" mcp "$@"
