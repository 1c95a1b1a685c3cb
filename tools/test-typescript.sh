#!/usr/bin/env bash
# The TypeScript package's tests (typescript/): the real @anthropic-ai/sdk tool runner against a
# scripted Messages API on loopback and a real `memkv serve` or memkv in the Node process (the
# native addon, built here: crates/memkv-node), and the package installed into
# projects outside the repository (test/install.test.ts: from the directory and from `npm pack`'s
# tarball, beside SDK 1.14.0 and the newest 1.x, which needs the npm registry or a warm cache).
# Needs Node.js >= 20 and npm. MEMKV_BIN, if set, names the memkv binary to test; otherwise the
# workspace's is built. MEMKV_NPM_CACHE, if set, is npm's cache for those installs.
#
# One build, run twice, once per SDK:
#
# - pinned: @anthropic-ai/sdk 1.14.0, the package's devDependency and the oldest its
#   peerDependency allows (package-lock.json): every test.
# - current: @anthropic-ai/sdk 1.17.0 (typescript/sdk-current/package-lock.json), loaded in place
#   of 1.14.0 by a module-resolution hook (sdk-current/register.mjs, through NODE_OPTIONS, so the
#   example's own process loads it too): every test but install.test.ts, which already installs
#   the newest 1.x. About 15 to 30 s, as the first run without install.test.ts.
#
# MEMKV_SDK=pinned or MEMKV_SDK=current runs one of the two. MEMKV_PREPARE_ONLY=1 stops after
# `npm ci` (tools/test.sh, while cargo builds).
set -euo pipefail
cd "$(dirname "$0")/.."

case "${MEMKV_SDK:-}" in
  "") runs=(pinned current) ;;
  pinned | current) runs=("$MEMKV_SDK") ;;
  *) echo "MEMKV_SDK must be pinned or current, not ${MEMKV_SDK}" >&2; exit 2 ;;
esac

cd typescript
echo "== node $(node --version), npm $(npm --version)"
# `npm ci` again only when the lock file changed since the last one.
for dir in . sdk-current; do
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.memkv-package-lock.json"; then
    echo "== npm ci ($dir)"
    (cd "$dir" && npm ci --no-audit --no-fund && cp package-lock.json node_modules/.memkv-package-lock.json)
  fi
done
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

echo "== the native addon (crates/memkv-node): memkv in the Node process, and the package's memkv command"
# The dev profile reuses what `cargo test` compiled; MEMKV_NODE_PROFILE=release for what a
# published package carries.
(cd typescript && MEMKV_NODE_PROFILE="${MEMKV_NODE_PROFILE:-dev}" node scripts/build-native.mjs)

cd typescript
echo "== tsc (package and tests)"
npm run --silent build
npm run --silent build:test  # tests and examples/typescript

sdk_version='import("@anthropic-ai/sdk/version").then((m) => console.log(m.VERSION))'
for run in "${runs[@]}"; do
  tests=(build/test/*.test.js)
  if [ "$run" = current ]; then
    export NODE_OPTIONS="--import=$PWD/sdk-current/register.mjs"
    tests=()
    for file in build/test/*.test.js; do
      [ "$file" = build/test/install.test.js ] || tests+=("$file")
    done
  fi
  version="$(node --input-type=module -e "$sdk_version")"
  want="$(node -p 'require("./'"$([ "$run" = current ] && echo sdk-current/)"'package.json").devDependencies["@anthropic-ai/sdk"]')"
  if [ "$version" != "$want" ]; then
    echo "== the $run run loads @anthropic-ai/sdk $version, not $want" >&2
    exit 1
  fi
  echo "== node --test, @anthropic-ai/sdk $version ($run)"
  start=$SECONDS
  node --test --test-timeout=120000 "${tests[@]}"
  echo "== @anthropic-ai/sdk $version ($run): $((SECONDS - start)) s"
  unset NODE_OPTIONS
done
