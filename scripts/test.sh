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

step "docs: every relative link of the Markdown pages resolves"
python3 scripts/check_links.py

step "benchmarks and examples compile (run them with the commands in BENCHMARKS.md / README.md)"
cargo bench --workspace --locked --no-run
cargo build --workspace --locked --examples

step "Rust tests: unit, integration, vectors, simulator, property tests, doctests"
# Property tests and proptest fuzzers explore a fresh seed on every run: their properties must
# hold for any seed. The seed is printed so a failure replays with PROPTEST_RNG_SEED=<seed>
# (proptest also writes the failing case to the test's .proptest-regressions file, which every
# later run replays first; commit it with the fix).
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}"
echo "PROPTEST_RNG_SEED=$PROPTEST_RNG_SEED (also for the Redis tests below)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --locked 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

# One closing line for the Rust run (cargo prints one per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
     END { printf "\nrust tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
[ "$status" -eq 0 ] || exit "$status"

# Every other language: one script each in scripts/tests.d/, run in name order. Each installs
# what it needs (idempotently), runs its suite and prints its own closing line.
for part in scripts/tests.d/*.sh; do
  [ -e "$part" ] || continue
  step "$(basename "$part" .sh)"
  bash "$part"
done
step "all tests passed"
