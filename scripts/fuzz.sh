#!/usr/bin/env bash
# Coverage-guided fuzzing with cargo-fuzz (needs the nightly toolchain). Not part of the test
# command: their proptest twins run there instead (core/tests/fuzz_*.rs, and
# bindings-js-common/tests/fuzz_conversions.rs for `conversions`), for a bounded number of cases.
#   bash scripts/fuzz.sh [seconds per target, default 60] [target...]
# Targets: headers, engine, snapshot (mutated snapshots: every wait within max_server_wait),
# store (a fake store answering every reply shape), conversions (the JS cores' argument
# conversions driving the core). Each prints libFuzzer's closing "Done N runs" line.
set -euo pipefail
cd "$(dirname "$0")/../core"
secs="${1:-60}"
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(headers engine snapshot store conversions)
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz --version 0.13.2
fi
for target in "${targets[@]}"; do
  extra=()
  [ "$target" = headers ] && extra=(-dict=fuzz/headers.dict)
  echo "== $target ($secs s)"
  set +e
  cargo +nightly fuzz run "$target" -- -max_total_time="$secs" "${extra[@]}" 2>&1 | grep -E '^Done [0-9]+ runs|^#[0-9]+\s+DONE|SUMMARY|panicked'
  status=${PIPESTATUS[0]}
  set -e
  # libFuzzer exits non-zero on a crash.
  [ "$status" -eq 0 ] || { echo "fuzz target $target failed: see core/fuzz/artifacts/$target" >&2; exit 1; }
done
