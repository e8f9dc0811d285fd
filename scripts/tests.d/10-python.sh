#!/usr/bin/env bash
# Python: lint the pyo3 module, install the package as a user does (`pip install
# ./bindings-python`: a PEP 517 build through maturin from PyPI) into a virtualenv, check the
# stubs (mypy.stubtest) and types (mypy --strict), run the whole pytest suite, and check that
# the same abi3 wheel imports and passes the sans-IO tests on the oldest supported CPython.
set -euo pipefail
cd "$(dirname "$0")/../.."

PY="${RATELANE_PYTHON:-python3}"
VENV=.venv-py-test
REQS=bindings-python/tests/requirements.txt
# Reuse the workspace's target/ for the extension build (pip builds in-tree).
export CARGO_TARGET_DIR="$PWD/target"

echo "lint: the pyo3 module (the workspace lint builds the crate without its 'python' feature)"
cargo clippy -p ratelane-python --features python --all-targets --locked -q -- -D warnings

# The virtualenv is recreated when the interpreter or the pinned test dependencies change,
# and ratelane itself is reinstalled from source on every run.
stamp="$("$PY" -c 'import sys; print(sys.version)') $(sha256sum "$REQS" | cut -c1-16)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.stamp" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q -r "$REQS"
  echo "$stamp" > "$VENV/.stamp"
fi
"$VENV/bin/pip" uninstall -q -y ratelane >/dev/null 2>&1 || true
echo "pip install ./bindings-python"
"$VENV/bin/pip" install -q ./bindings-python

cd bindings-python
# Run against the installed package, never the source folder next to the tests.
export PYTHONSAFEPATH=1
echo "stubs and types"
"../$VENV/bin/python" -m mypy.stubtest ratelane
"../$VENV/bin/python" -m mypy --strict -p ratelane --no-incremental 2>&1 | tail -1

# The abi3 wheel on CPython 3.9 (the oldest supported), when the machine has one (pyenv).
py39="$(ls "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.9*/bin/python3.9 2>/dev/null | tail -1 || true)"
if [ -n "$py39" ]; then
  echo "abi3: the same wheel on $("$py39" --version)"
  old="$PWD/../$VENV/py39"
  [ -x "$old/bin/python" ] || { "$py39" -m venv "$old" && "$old/bin/pip" install -q pytest==8.4.2; }
  wheels="$(mktemp -d)"
  trap 'rm -rf "$wheels"' EXIT
  "../$VENV/bin/pip" wheel -q --no-deps -w "$wheels" .
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

echo "pytest"
cd tests
set +e
"../../$VENV/bin/python" -m pytest -q -p no:cacheprovider
status=$?
set -e
exit "$status"
