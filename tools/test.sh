#!/usr/bin/env bash
# The README's test command: every suite of the repository, Rust first.
# Each later suite is added here as it lands; a suite that cannot run fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test --workspace"
cargo test --workspace
