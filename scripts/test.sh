#!/usr/bin/env bash
# Every test in every language this repository has, from a fresh clone.
# Idempotent: installs only what is missing. CI runs exactly this (see .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
cargo --version
if ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add clippy
fi

step "lint (clippy, warnings are errors; the core may not read a clock)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "Rust tests: unit, integration, vectors, simulator, property tests, doctests"
# Property tests and proptest fuzzers use a fixed seed here so a CI run is reproducible; run
# them locally without it (or with PROPTEST_CASES=5000) to explore new cases.
PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261122}" cargo test --workspace --locked

step "benchmarks compile (run them with the commands in BENCHMARKS.md)"
cargo bench --workspace --locked --no-run
