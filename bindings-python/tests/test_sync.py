"""The synchronous driver (``ratelane.SyncRateLimiter``) and the requests adapter
(``ratelane.requests``), against the local Discord imitation served from a thread; and the
drivers' settings (typed names, messages in the driver's names and units, positional misuse).
Assertions are on counts, outcomes and exception types, never on durations."""

from __future__ import annotations

import concurrent.futures
import re
import threading
from typing import Any, List

import pytest
import requests

import ratelane
import ratelane.requests
from discord_server import DiscordImitation, messages_bucket, serve_in_thread

CHANNEL = "/api/v10/channels/100000000000000001/messages"


def timer_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ratelane-timer"]


def test_threads_share_one_limiter_and_one_timer() -> None:
    """Eight threads post at once through one limiter, with a bucket of 2 per 0.3 s: every
    request answered, no 429, and the waits are timed by one timer thread, which ends with
    ``close()``."""
    imitation = DiscordImitation(**messages_bucket(2, 0.3))
    with serve_in_thread(imitation) as base, requests.Session() as session:
        limiter = ratelane.SyncRateLimiter(max_wait=10.0)

        def post(n: int) -> int:
            response = limiter.run("POST", CHANNEL, lambda: session.post(base + CHANNEL, json={"n": n}))
            return int(response.status_code)

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            assert list(pool.map(post, range(8))) == [200] * 8
        assert len(timer_threads()) == 1
        assert (limiter.queued, limiter.in_flight) == (0, 0)
        limiter.close()
        assert timer_threads() == []
    assert imitation.count(429) == 0 and len(imitation.log) == 8


def test_close_wakes_waiting_threads_with_closed_error() -> None:
    """Requests waiting in threads when the limiter closes fail with ``ClosedError``; new
    ones, and ``predict``, raise ``LimiterClosedError``."""
    limiter = ratelane.SyncRateLimiter(global_limit=1, global_window=60.0)
    sent: List[str] = []
    errors: List[BaseException] = []
    blocked = threading.Barrier(4)

    class Answer:
        status_code = 200
        headers: Any = {}

    def one(n: int) -> None:
        blocked.wait()
        try:
            limiter.run("GET", "/api/v10/users/@me", lambda: sent.append(str(n)) or Answer())
        except ratelane.RatelaneError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    blocked.wait()
    while limiter.queued < 2:  # one goes, two wait for the next 60 s window
        threading.Event().wait(0.01)
    limiter.close()
    for thread in threads:
        thread.join(10)
    assert len(sent) == 1 and [e.code for e in errors] == ["closed", "closed"]
    with pytest.raises(ratelane.LimiterClosedError):
        limiter.run("GET", "/api/v10/users/@me", Answer)
    with pytest.raises(ratelane.LimiterClosedError):
        limiter.predict("GET", "/api/v10/users/@me")


def test_requests_adapter_mounted_on_a_session() -> None:
    imitation = DiscordImitation(**messages_bucket(2, 0.3))
    with serve_in_thread(imitation) as base, requests.Session() as session:
        adapter = ratelane.requests.RateLimitedAdapter(max_wait=10.0)
        session.mount(base, adapter)
        session.headers["Authorization"] = "Bot a"
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(lambda n: session.post(base + CHANNEL, json={"n": n}).status_code, range(6)))
        assert statuses == [200] * 6
        assert adapter.limiter.limiter.buckets >= 1
    assert adapter.limiter.closed  # the session closed its adapter, which made the limiter
    assert imitation.count(429) == 0 and len(imitation.log) == 6


def test_requests_adapter_refusals() -> None:
    """A request refused before it is sent: a 429 answer by default (``raise_for_status``
    raises requests' ``HTTPError``), or ratelane's error with ``refusal="raise"``."""
    imitation = DiscordImitation()
    with serve_in_thread(imitation) as base:
        for refusal in ("respond", "raise"):
            with requests.Session() as session:
                adapter = ratelane.requests.RateLimitedAdapter(
                    refusal=refusal, global_limit=1, global_window=30.0, max_wait=1.0  # type: ignore[arg-type]
                )
                session.mount(base, adapter)
                assert session.get(base + "/api/v10/users/@me").status_code == 200
                if refusal == "respond":
                    refused = session.get(base + "/api/v10/users/@me")
                    assert refused.status_code == 429
                    assert refused.json()["error"]["code"] == "max_wait_exceeded"
                    assert int(refused.headers["Retry-After"]) > 1
                    with pytest.raises(requests.HTTPError):
                        refused.raise_for_status()
                else:
                    with pytest.raises(ratelane.MaxWaitExceededError):
                        session.get(base + "/api/v10/users/@me")
    assert len(imitation.log) == 2


# ------------------------------------------------------------------------------ settings


@pytest.mark.parametrize("driver", [ratelane.RateLimiter, ratelane.SyncRateLimiter])
def test_settings_misuse_is_named_in_the_drivers_terms(driver: Any) -> None:
    with pytest.raises(TypeError, match=r"keyword arguments.*max_wait=30\.0"):
        driver(30.0)
    with pytest.raises(ratelane.InvalidConfigError) as info:
        driver(max_wiat=30.0)
    message = str(info.value)
    assert "'max_wiat'" in message and "did you mean 'max_wait'" in message
    assert "_ns" not in message  # the driver's names, not the core's
    with pytest.raises(ratelane.InvalidConfigError, match="max_wait: expected a number of seconds"):
        driver(max_wait="30")
    driver({"max_wait": 30.0}).limiter.config_json()  # a mapping is fine
    driver(max_wait_ns=30_000_000_000)  # the core's names are still accepted


def core_keys() -> List[str]:
    """The core's setting names, from its own message for an unknown one."""
    with pytest.raises(ratelane.InvalidConfigError) as info:
        ratelane.Limiter(not_a_setting=1)
    listed = re.search(r"expected one of: (.*)$", str(info.value))
    assert listed is not None
    return [key.strip() for key in listed.group(1).split(",")]


def test_typed_settings_are_the_cores() -> None:
    """``LimiterSettings`` names every setting of the core (durations without ``_ns``), so the
    typed signature cannot fall behind a core that grew one; its ``profile`` type lists
    ``ratelane.PROFILES``."""
    from typing import get_args

    from ratelane._settings import DURATION_KEYS, Profile

    expected = {key[: -len("_ns")] if key[: -len("_ns")] in DURATION_KEYS else key for key in core_keys()}
    expected.discard("shared")  # the asyncio driver's shared=RedisStore(...)
    assert set(ratelane.LimiterSettings.__annotations__) == expected
    assert set(get_args(Profile)) == set(ratelane.PROFILES)


# ------------------------------------------------------------------------------ LLM bodies


def test_transports_estimate_tokens_and_model_from_an_llm_body() -> None:
    """What the httpx / httpx2 transports and the requests adapter give the driver for an
    OpenAI-style body: the core's estimate (``read_llm_request``) as ``costs`` and the model,
    or the caller's own estimate; nothing for a body that is not an LLM request."""
    import json

    from ratelane._transport import request_options

    body = json.dumps({"model": "gpt-sim", "messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 64})
    headers = {"content-type": "application/json", "authorization": "Bearer k"}
    core = ratelane.read_llm_request(body)
    assert core is not None and core.tokens == (4 + 400) // 4 + 64  # "user" counts too
    options = request_options("POST", headers, body.encode())
    assert options["costs"] == {"tokens": core.tokens} and options["model"] == "gpt-sim"
    assert options["identity"] and options["body_keys"] == ["model", "messages", "max_tokens"]
    own = request_options("POST", headers, body.encode(), estimate=lambda raw: len(raw))
    assert own["costs"] == {"tokens": len(body)} and own["model"] == "gpt-sim"
    assert "costs" not in request_options("POST", headers, body.encode(), estimate=lambda raw: None)
    discord = request_options("POST", headers, json.dumps({"content": "hi"}).encode())
    assert "costs" not in discord and "model" not in discord
