#!/usr/bin/env bash
# The TypeScript package's tests (typescript/): the real @anthropic-ai/sdk tool runner against a
# scripted Messages API on loopback and a real `memkv serve`, and the package installed into
# projects outside the repository (test/install.test.ts: from the directory and from `npm pack`'s
# tarball, beside SDK 1.14.0 and the newest 1.x, which needs the npm registry or a warm cache).
# Needs Node.js >= 20 and npm. MEMKV_BIN, if set, names the memkv binary to test; otherwise the
# workspace's is built. MEMKV_NPM_CACHE, if set, is npm's cache for those installs.
# MEMKV_PREPARE_ONLY=1 stops after `npm ci` (tools/test.sh, while cargo builds).
set -euo pipefail
cd "$(dirname "$0")/.."

cd typescript
echo "== node $(node --version), npm $(npm --version)"
# `npm ci` again only when the lock file changed since the last one.
if ! cmp -s package-lock.json node_modules/.memkv-package-lock.json; then
  echo "== npm ci"
  npm ci --no-audit --no-fund
  cp package-lock.json node_modules/.memkv-package-lock.json
fi
[ "${MEMKV_PREPARE_ONLY:-}" = 1 ] && exit 0
cd ..
if [ -z "${MEMKV_BIN:-}" ]; then
  echo "== cargo build --release -p memkv-cli (the memkv binary)"
  cargo build --release --locked -p memkv-cli
  target_dir=$(cargo metadata --format-version 1 --no-deps |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).target_directory))')
  export MEMKV_BIN="$target_dir/release/memkv"
fi
echo "MEMKV_BIN=$MEMKV_BIN"

cd typescript
echo "== tsc (package and tests)"
npm run --silent build
npm run --silent build:test  # tests and examples/typescript
echo "== node --test"
node --test --test-timeout=120000 build/test/*.test.js
