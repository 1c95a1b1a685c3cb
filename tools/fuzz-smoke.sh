#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ for a short, bounded time on the committed seed corpus
# (fuzz/corpus/<target>), on stable Rust: cargo-fuzz is installed if missing, and the targets
# build without a sanitizer (`--sanitizer none`; the library forbids unsafe code, so
# AddressSanitizer, which needs nightly, would add little: the fuzzers look for panics, hangs,
# unbounded memory and broken invariants).
#
#   tools/fuzz-smoke.sh [TARGET...]      default: every target; FUZZ_SECONDS (default 20) each
#
# New inputs go to a temporary directory (FUZZ_WORK to keep them); a crash leaves its input in
# fuzz/artifacts/<target>/ and fails the script. Turn it into a regression test in tests/it.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

CARGO_FUZZ_VERSION=0.13.2
seconds=${FUZZ_SECONDS:-20}

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  echo "== cargo install cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --version "=$CARGO_FUZZ_VERSION" --locked
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi

work=${FUZZ_WORK:-$(mktemp -d)}
[ -n "${FUZZ_WORK:-}" ] || trap 'rm -rf "$work"' EXIT

echo "== cargo fuzz build (${targets[*]})"
cargo fuzz build --sanitizer none

for target in "${targets[@]}"; do
  echo "== fuzz $target for ${seconds}s"
  mkdir -p "$work/$target"
  # -timeout: one input running over 10 s is a hang; -rss_limit_mb: memory stays bounded.
  status=0
  cargo fuzz run --sanitizer none "$target" "$work/$target" "corpus/$target" -- \
    -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 >"$work/$target.log" 2>&1 || status=$?
  # libFuzzer's chatter stays in the log; its summary, and any failure, is shown.
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$work/$target.log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$work/$target.log" >&2
    echo "fuzz target $target failed (exit $status); its input is in fuzz/artifacts/$target/" >&2
    exit 1
  fi
done
