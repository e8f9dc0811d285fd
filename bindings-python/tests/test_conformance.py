"""The drivers' conformance table (``tests/conformance/drivers.json``, ``docs/driver-contract.md``)
replayed by the asyncio driver in virtual time.

The event loop's clock is virtual: it moves only when the loop would wait, straight to the next
timer, so the table's milliseconds cost none. The driver's core is the native ``Limiter`` with
every input recorded, and each request's ``send`` returns a future the table settles. The
JavaScript driver replays the same table."""

from __future__ import annotations

import asyncio
import json
import pathlib
import selectors
from typing import Any, Dict, List, Optional, Tuple

import pytest

import ratelane
from ratelane import _core

TABLE = json.loads((pathlib.Path(__file__).parents[2] / "tests" / "conformance" / "drivers.json").read_text())


class _VirtualSelector(selectors.DefaultSelector):
    """A selector that never sleeps: a wait of ``timeout`` moves the loop's clock instead."""

    loop: "VirtualLoop"

    def select(self, timeout: Optional[float] = None) -> List[Tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise RuntimeError("virtual time: nothing is scheduled, the loop would wait forever")
        self.loop.now += max(0.0, timeout)
        return super().select(0)


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        selector = _VirtualSelector()
        super().__init__(selector)
        selector.loop = self
        self.now = 0.0

    def time(self) -> float:
        return self.now


def _ms(ns: int) -> float:
    return round(ns / 1e3) / 1e3


class Recording:
    """The native core with every input recorded as the table writes it (``ns`` -> ms, ids ->
    the table's names)."""

    def __init__(self, inner: Any, calls: List[List[Any]], names: Dict[int, str], pending: List[str]) -> None:
        self._inner = inner
        self._calls = calls
        self._names = names
        self._pending = pending

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _name(self, rid: int) -> str:
        return self._names.get(rid, f"#{rid}")

    def enqueue(self, now_ns: int, method: str, path: str, **options: Any) -> int:
        rid: int = self._inner.enqueue(now_ns, method, path, **options)
        self._names[rid] = self._pending.pop(0)
        self._calls.append(["enqueue", _ms(now_ns), self._name(rid), method, path])
        return rid

    def handle_response(self, now_ns: int, rid: int, status: int, headers: Any = None, wall_clock_ms: Any = None, **body: Any) -> Any:
        raw = body.get("body")
        text = raw.decode() if isinstance(raw, (bytes, bytearray)) else raw
        self._calls.append(["respond", _ms(now_ns), self._name(rid), status, text, isinstance(wall_clock_ms, int)])
        return self._inner.handle_response(now_ns, rid, status, headers, wall_clock_ms, **body)

    def handle_failure(self, now_ns: int, rid: int, failure: str) -> Any:
        self._calls.append(["failure", _ms(now_ns), self._name(rid), failure])
        return self._inner.handle_failure(now_ns, rid, failure)

    def handle_written(self, now_ns: int, rid: int) -> Any:
        self._calls.append(["written", _ms(now_ns), self._name(rid)])
        return self._inner.handle_written(now_ns, rid)

    def cancel(self, now_ns: int, rid: int) -> Any:
        self._calls.append(["cancel", _ms(now_ns), self._name(rid)])
        return self._inner.cancel(now_ns, rid)

    def handle_timeout(self, now_ns: int) -> Any:
        self._calls.append(["timeout", _ms(now_ns)])
        return self._inner.handle_timeout(now_ns)

    def handle_reservation(self, now_ns: int, rid: int, answer: str, **fields: Any) -> Any:
        self._calls.append(["reservation", _ms(now_ns), self._name(rid), answer])
        return self._inner.handle_reservation(now_ns, rid, answer, **fields)

    def close(self, now_ns: int) -> Any:
        self._calls.append(["close", _ms(now_ns)])
        return self._inner.close(now_ns)


def _settings(config: Dict[str, Any]) -> Dict[str, Any]:
    """The case's core settings (the core's JSON form) as the driver's keyword arguments: names
    and units from the core's settings table."""
    kinds = dict(_core.SETTINGS)
    out = {}
    for key, value in config.items():
        if key == "shared":
            continue
        kind = kinds[key]
        if kind.startswith("nanos"):
            out[key[: -len("_ns")]] = None if value is None else value / 1e9
        else:
            out[key] = value
    return out


class TableStore:
    """A shared-mode store of the driver's interface whose answers the table gives."""

    timeout = 1.0

    def __init__(self, settings: Dict[str, Any]) -> None:
        self._settings = settings
        self.asked: Dict[int, "asyncio.Future[Any]"] = {}

    def core_settings(self) -> Dict[str, Any]:
        return dict(self._settings)

    def bind(self, shared_config: Dict[str, Any]) -> None:
        pass

    def reserve(self, reservation: Any) -> "asyncio.Future[Any]":
        future: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        self.asked[reservation.id] = future
        return future

    def record(self, update: Any) -> None:
        pass

    async def aclose(self) -> None:
        pass


class _Response:
    def __init__(self, status: int, headers: List[List[str]], body: Optional[str]) -> None:
        self.status = status
        self.headers = [(name, value) for name, value in headers]
        self._body = None if body is None else body.encode()

    async def read(self) -> bytes:
        if self._body is None:
            raise ValueError("no body")
        return self._body


def _transport_error(kind: str) -> BaseException:
    return {"refused": ConnectionRefusedError, "reset": ConnectionResetError}[kind](f"transport: {kind}")


async def _replay(case: Dict[str, Any]) -> Tuple[List[List[Any]], Dict[str, Any]]:
    loop = asyncio.get_running_loop()
    calls: List[List[Any]] = []
    names: Dict[int, str] = {}
    pending_names: List[str] = []
    config = case["config"]
    store = TableStore(config["shared"]) if "shared" in config else None
    limiter = ratelane.RateLimiter(shared=store, **_settings(config))
    limiter._core = Recording(limiter._core, calls, names, pending_names)  # type: ignore[assignment]
    sends: Dict[str, "asyncio.Future[Any]"] = {}
    tasks: Dict[str, "asyncio.Task[Any]"] = {}
    outcomes: Dict[str, Any] = {}

    async def request(step: Dict[str, Any]) -> None:
        name = step["run"]

        async def send() -> Any:
            calls.append(["send", _ms(int(loop.time() * 1e9)), name])
            sends[name] = loop.create_future()
            return await sends[name]

        options: Dict[str, Any] = {}
        if "costs" in step:
            options["costs"] = step["costs"]
        if "timeout" in step:
            options["timeout"] = step["timeout"] / 1e3
        pending_names.append(name)
        try:
            response = await limiter.run(step["method"], step["path"], send, **options)
        except asyncio.CancelledError:
            outcomes[name] = {"error": "aborted"}
        except ratelane.RateLimitError as exc:
            outcomes[name] = {"error": exc.code}
        else:
            outcomes[name] = {"status": response.status}

    def act(step: Dict[str, Any]) -> None:
        if "run" in step:
            tasks[step["run"]] = loop.create_task(request(step))
        elif "answer" in step or "fail" in step:
            name = step.get("answer", step.get("fail"))
            future = sends.pop(name, None)
            if future is None:
                calls.append(["not_sent", loop.time() * 1e3, name])
            elif "answer" in step:
                future.set_result(_Response(step["status"], step["headers"], step.get("body")))
            else:
                future.set_exception(_transport_error(step["error"]))
        elif "abort" in step:
            tasks[step["abort"]].cancel()
        elif "close" in step:
            loop.create_task(limiter.aclose())
        elif "store" in step:
            assert store is not None
            rid = next(rid for rid, n in names.items() if n == step["store"])
            reply = step["reply"]
            answer = (reply["answer"], reply.get("retry_after_ns"), reply.get("scope"), reply.get("processes"), None, None)
            future = store.asked.pop(rid, None)
            if future is None:
                calls.append(["not_reserving", loop.time() * 1e3, step["store"]])
            else:
                future.set_result(answer)

    # One callback per instant, its steps in the table's order (timers due at the same time
    # run in no set order).
    at: Dict[float, List[Dict[str, Any]]] = {}
    for step in case["steps"]:
        at.setdefault(step["at"], []).append(step)
    for when, steps in at.items():
        loop.call_at(when / 1e3, lambda steps=steps: [act(step) for step in steps])
    await asyncio.sleep(case.get("until", 60_000) / 1e3)
    return calls, outcomes


def _same_calls(actual: List[List[Any]], expected: List[List[Any]]) -> bool:
    """Equal, a call's time within 1 ms after the table's (a timer fires on its clock's tick)."""
    if len(actual) != len(expected):
        return False
    for got, want in zip(actual, expected):
        if len(got) != len(want) or got[0] != want[0] or got[2:] != want[2:]:
            return False
        if not 0 <= got[1] - want[1] <= 1:
            return False
    return True


@pytest.mark.parametrize("case", TABLE["cases"], ids=[c["name"] for c in TABLE["cases"]])
def test_conformance(case: Dict[str, Any]) -> None:
    loop = VirtualLoop()
    try:
        calls, outcomes = loop.run_until_complete(_replay(case))
    finally:
        loop.close()
    shown = "\n".join(json.dumps(c) for c in calls)
    wanted = "\n".join(json.dumps(c) for c in case["calls"])
    assert _same_calls(calls, case["calls"]), f"calls into the core:\n{shown}\nexpected:\n{wanted}"
    assert outcomes == case["outcomes"]
