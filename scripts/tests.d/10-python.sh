#!/usr/bin/env bash
# Python: lint the pyo3 module, build the package as a user's pip does (a PEP 517 build of
# ./bindings-python through maturin from PyPI) and install it into two virtualenvs (the
# second holds the integrations whose pins conflict with the first's: the OpenAI and
# Anthropic SDKs on httpx2, py-cord), check the stubs (mypy.stubtest), the types (mypy
# --strict, and that it rejects a user's misspelt settings), run the whole pytest suite in
# both, and check that the same abi3 wheel imports and passes the sans-IO tests on the oldest
# supported CPython.
set -euo pipefail
cd "$(dirname "$0")/../.."

PY="${RATELANE_PYTHON:-python3}"
VENV=.venv-py-test
REQS=bindings-python/tests/requirements.txt
SDK_VENV=.venv-py-sdk
SDK_REQS=bindings-python/tests/requirements-sdk.txt
# Reuse the workspace's target/ for the extension build (pip builds in-tree).
export CARGO_TARGET_DIR="$PWD/target"

echo "lint: the pyo3 module (the workspace lint builds the crate without its 'python' feature)"
cargo clippy -p ratelane-python --features python --all-targets --locked -q -- -D warnings

# Each virtualenv is recreated when the interpreter or its pinned dependencies change, and
# ratelane itself is reinstalled from source on every run (one wheel, built once).
venv() {  # venv DIR REQUIREMENTS
  local stamp
  stamp="$("$PY" -c 'import sys; print(sys.version)') $(sha256sum "$2" | cut -c1-16)"
  if [ ! -x "$1/bin/python" ] || [ "$(cat "$1/.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$1"
    "$PY" -m venv "$1"
    "$1/bin/pip" install -q -r "$2"
    echo "$stamp" > "$1/.stamp"
  fi
}
venv "$VENV" "$REQS"
venv "$SDK_VENV" "$SDK_REQS"
wheels="$(mktemp -d)"
trap 'rm -rf "$wheels"' EXIT
echo "pip wheel ./bindings-python (the build pip install runs)"
"$VENV/bin/pip" wheel -q --no-deps -w "$wheels" ./bindings-python
for env in "$VENV" "$SDK_VENV"; do
  "$env/bin/pip" uninstall -q -y ratelane >/dev/null 2>&1 || true
  "$env/bin/pip" install -q --no-deps "$wheels"/ratelane-*-abi3-*.whl
done

cd bindings-python
# Run against the installed package, never the source folder next to the tests.
export PYTHONSAFEPATH=1
echo "stubs and types"
# The native module's stub against the module (the package's other modules are their own
# stubs; ratelane.httpx2's library is only in the second environment).
"../$VENV/bin/python" -m mypy.stubtest ratelane._core
# Every module in the first environment but ratelane.httpx2, whose library lives in the second.
modules="$("../$VENV/bin/python" -c 'import pkgutil, ratelane; print(" ".join("-m ratelane." + m.name for m in pkgutil.iter_modules(ratelane.__path__) if m.name != "httpx2"))')"
# shellcheck disable=SC2086
"../$VENV/bin/python" -m mypy --strict -m ratelane $modules --no-incremental 2>&1 | tail -1
"../$SDK_VENV/bin/python" -m mypy --strict -m ratelane.httpx2 --no-incremental 2>&1 | tail -1
echo "types: mypy --strict accepts a user's file and rejects each misspelt or mistyped setting"
(cd tests/typing && "../../../$VENV/bin/python" -m mypy --strict --no-incremental --cache-dir=/dev/null user_ok.py | tail -1)
(cd tests/typing && "../../../$VENV/bin/python" - <<'PY'
import re, subprocess, sys
lines = open("user_misspelt.py").read().splitlines()
expected = {n for n, line in enumerate(lines, 1) if re.search(r"# E\d+:", line)}
out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir=/dev/null", "user_misspelt.py"],
                     capture_output=True, text=True).stdout
reported = {int(m) for m in re.findall(r"^user_misspelt\.py:(\d+): error", out, re.M)}
if reported != expected:
    sys.exit(f"mypy --strict on user_misspelt.py: errors on lines {sorted(reported)}, expected {sorted(expected)}\n{out}")
print(f"user_misspelt.py: mypy --strict reports all {len(expected)} mistakes")
PY
)

# The abi3 wheel on CPython 3.9 (the oldest supported), when the machine has one (pyenv).
py39="$(ls "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.9*/bin/python3.9 2>/dev/null | tail -1 || true)"
if [ -n "$py39" ]; then
  echo "abi3: the same wheel on $("$py39" --version)"
  old="$PWD/../$VENV/py39"
  [ -x "$old/bin/python" ] || { "$py39" -m venv "$old" && "$old/bin/pip" install -q pytest==8.4.2; }
  "$old/bin/pip" install -q --force-reinstall --no-deps "$wheels"/ratelane-*-cp39-abi3-*.whl
  (cd tests && "$old/bin/python" -m pytest -q -p no:cacheprovider test_vectors.py test_sans_io.py | tail -1)
fi

echo "demo: examples/python/discord_bot.py"
"../$VENV/bin/python" ../examples/python/discord_bot.py | tail -1

# Asserts that every prompt is answered; the 429 count is printed, not asserted (a real-time
# run: an actual cost above every ratio settled so far may overrun a window's last tokens).
echo "demo: examples/python/openai_chat.py (token estimates against a local LLM API imitation)"
"../$VENV/bin/python" ../examples/python/openai_chat.py | tail -1

# Celery is a dependency of this example only: installed here (a no-op once it is).
echo "example: examples/python/celery_defer.py (Celery retry(eta=...) when ratelane defers a job)"
"../$VENV/bin/pip" install -q -r ../examples/python/requirements-celery.txt
"../$VENV/bin/python" ../examples/python/celery_defer.py | tail -1

# ratelane.redis (shared mode, and the server-side limiters in Redis) is tested against a real
# Redis: the one named by RATELANE_REDIS_URL, or a throwaway redis-server started here
# (installed when missing) and stopped on exit. The outage tests start and stop their own
# servers too.
. ../scripts/lib/redis-server.sh
redis_dir=""
if [ -z "${RATELANE_REDIS_URL:-}" ]; then
  redis_install
  redis_dir="$(mktemp -d)"
  redis_start "$redis_dir"
  echo "redis-server $REDIS_PID on $RATELANE_REDIS_URL (for the shared-mode tests)"
fi
cleanup() {
  redis_stop
  [ -z "$redis_dir" ] || rm -rf "$redis_dir"
  [ -z "${wheels:-}" ] || rm -rf "$wheels"
}
trap cleanup EXIT

echo "demo: examples/python/two_processes.py (two processes sharing limits through Redis)"
"../$VENV/bin/python" ../examples/python/two_processes.py "$RATELANE_REDIS_URL" | tail -1

echo "demo: examples/python/protect_endpoint_redis.py (an aiohttp endpoint limited in Redis)"
"../$VENV/bin/python" ../examples/python/protect_endpoint_redis.py "$RATELANE_REDIS_URL" | tail -1

echo "pytest (the second environment: tests/sdk, the SDKs on httpx2 and py-cord)"
cd tests
"../../$SDK_VENV/bin/python" -m pytest -q -p no:cacheprovider sdk | tail -1

echo "pytest"
set +e
"../../$VENV/bin/python" -m pytest -q -p no:cacheprovider --ignore=sdk
status=$?
set -e
exit "$status"
