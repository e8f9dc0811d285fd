#!/usr/bin/env bash
# Coverage-guided fuzzing with cargo-fuzz (needs the nightly toolchain). Not part of the test
# command: the proptest fuzzers (core/tests/fuzz_*.rs) run there instead.
#   bash scripts/fuzz.sh [seconds per target, default 60]
set -euo pipefail
cd "$(dirname "$0")/../core"
secs="${1:-60}"
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install --locked cargo-fuzz --version 0.13.2
fi
cargo +nightly fuzz run headers -- -max_total_time="$secs" -dict=fuzz/headers.dict
cargo +nightly fuzz run engine -- -max_total_time="$secs"
