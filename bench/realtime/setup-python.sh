#!/usr/bin/env bash
# Sets up bench/realtime/.venv for the Python clients of the Scoreboard (clients/py/): the
# pinned packages of requirements.txt, and ratelane built from this checkout (`pip install
# ./bindings-python`: maturin through PEP 517, into the workspace's target/). Idempotent:
# the virtualenv is recreated when the interpreter or requirements.txt changed, ratelane is
# rebuilt and reinstalled when its sources changed. Prints little.
#
#   bench/realtime/setup-python.sh        then   bench/realtime/.venv/bin/python clients/py/...
#
# RATELANE_PYTHON names the interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")"
BENCH="$PWD"
ROOT="$(cd ../.. && pwd)"
PY="${RATELANE_PYTHON:-python3}"
VENV="$BENCH/.venv"
REQS="$BENCH/requirements.txt"
PIP=("$VENV/bin/pip" --disable-pip-version-check -q)

stamp="$("$PY" -c 'import sys; print(sys.version)') $(sha256sum "$REQS" | cut -c1-16)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "setup-python: creating $VENV ($("$PY" --version 2>&1))"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "${PIP[@]}" install -r "$REQS"
  echo "$stamp" > "$VENV/.stamp"
fi

# What the wheel is built from: the core, the binding (its tests and benchmarks aside) and the
# Lua scripts it embeds (tracked and untracked files alike), the binding's resolved dependency
# tree and the workspace's build profiles. Not the whole Cargo.lock and workspace Cargo.toml:
# other workspace members change those without changing the wheel.
sources_hash() {
  (cd "$ROOT" &&
    { git ls-files -z -c -o --exclude-standard -- core bindings-python redis/scripts |
        grep -zv -e '^bindings-python/tests/' -e '^bindings-python/bench/' |
        sort -z | xargs -0 sha256sum
      cargo tree -p ratelane-python --features python --locked -e normal,build --prefix none 2>/dev/null |
        sort -u || cat Cargo.lock
      awk '/^\[profile/ { p = 1 } p' Cargo.toml
    } | sha256sum | cut -c1-16)
}
want="$(sources_hash)"
if [ "$(cat "$VENV/.ratelane-stamp" 2>/dev/null)" != "$want" ] || ! "$VENV/bin/python" -c 'import ratelane' 2>/dev/null; then
  echo "setup-python: building ratelane from bindings-python (cargo; can take a few minutes)"
  # Reuse the workspace's target/ (pip builds in-tree); --force-reinstall as the version
  # number does not change when the sources do.
  CARGO_TARGET_DIR="$ROOT/target" "${PIP[@]}" install --no-deps --force-reinstall "$ROOT/bindings-python"
  echo "$want" > "$VENV/.ratelane-stamp"
fi
"$VENV/bin/python" -c 'import aiohttp, discord, hikari, ratelane
print(f"setup-python: ready: ratelane {ratelane.__version__}, hikari {hikari.__version__}, "
      f"discord.py {discord.__version__}, aiohttp {aiohttp.__version__}")'
