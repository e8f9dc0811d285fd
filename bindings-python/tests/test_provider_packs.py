"""The provider packs from Python: selection by name, the body hints the driver reads, and a
GitHub 403 and a throttled Shopify 200 handled as rate limits (issue 17 item 2)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List, Tuple

import pytest

import ratelane
from ratelane._responses import MAX_ERROR_LEN, MAX_ERRORS, hints_from_body


def test_every_profile_by_name() -> None:
    assert ratelane.PROFILES == (
        "discord", "ietf", "github", "retry_after_only", "openai", "anthropic", "azure_openai", "shopify", "auto",
    )
    for name in ratelane.PROFILES:
        assert json.loads(ratelane.Limiter(profile=name).config_json())["profile"] == name
        assert json.loads(ratelane.RateLimiter(profile=name)._core.config_json())["profile"] == name
    for bad in ("OpenAI", "open_ai", "azure", ""):
        with pytest.raises(ratelane.InvalidConfigError) as info:
            ratelane.Limiter(profile=bad)
        assert info.value.code == "invalid_config"
        assert all(name in str(info.value) for name in ratelane.PROFILES)


def test_reads_body_per_profile() -> None:
    assert [ratelane.Limiter(profile=p).reads_body(s) for p, s in [
        ("discord", 429), ("discord", 403), ("github", 403), ("github", 200), ("shopify", 200), ("auto", 201), ("openai", 200),
    ]] == [True, False, True, False, True, True, False]
    # Not an HTTP status: refused as every status the host passes is (the core's one check).
    with pytest.raises(ratelane.InvalidArgumentError):
        ratelane.Limiter(profile="auto").reads_body(-1)


def test_hints_from_body_fixed_places() -> None:
    # Discord's 429.
    assert hints_from_body({"retry_after": 1.5, "global": False, "message": "You are being rate limited."}) == {
        "retry_after": 1.5, "global_": False, "errors": ["You are being rate limited."],
    }
    # Shopify GraphQL, throttled.
    body = {
        "errors": [{"message": "Throttled", "extensions": {"code": "THROTTLED"}}],
        "extensions": {"cost": {"requestedQueryCost": 101, "actualQueryCost": None,
                                "throttleStatus": {"maximumAvailable": 1000.0, "currentlyAvailable": 50, "restoreRate": 50.0}}},
    }
    assert hints_from_body(body) == {
        "cost": {"requested": 101.0, "actual": None, "maximum_available": 1000.0, "currently_available": 50.0, "restore_rate": 50.0},
        "errors": ["THROTTLED", "Throttled"],
    }
    # OpenAI / Anthropic error objects, GitHub's message, Shopify REST's string, Salesforce's array.
    assert hints_from_body({"error": {"type": "rate_limit_error", "code": "rate_limit_exceeded"}})["errors"] == [
        "rate_limit_error", "rate_limit_exceeded",
    ]
    assert hints_from_body({"errors": "Exceeded 2 calls per second for api client."})["errors"] == [
        "Exceeded 2 calls per second for api client.",
    ]
    assert hints_from_body([{"message": "x", "errorCode": "REQUEST_LIMIT_EXCEEDED"}]) == {"errors": ["REQUEST_LIMIT_EXCEEDED"]}
    # Hostile: wrong types are skipped, booleans are not numbers, NaN is not finite, long and
    # many strings are cut.
    assert hints_from_body({"retry_after": True, "global": 1, "message": 5, "extensions": {"cost": {"requestedQueryCost": float("nan")}}}) == {}
    many = hints_from_body({"errors": [{"message": "é" * 500} for _ in range(40)]})["errors"]
    assert len(many) == MAX_ERRORS and all(len(e.encode()) <= MAX_ERROR_LEN for e in many)
    assert hints_from_body("<html>") == {} and hints_from_body(None) == {}


def test_handle_response_body_arguments() -> None:
    limiter = ratelane.Limiter(profile="shopify")
    rid = limiter.enqueue(0, "POST", "/admin/api/2024-01/graphql.json")
    limiter.drain()
    cost = {"requested": 101, "actual": None, "maximum_available": 1000, "currently_available": 50, "restore_rate": 50}
    assert limiter.handle_response(10_000_000, rid, 200, [], cost=cost, errors=["THROTTLED"]) == "retry"
    outputs = limiter.drain()
    assert isinstance(outputs[-1], ratelane.WaitUntil) and outputs[-1].at_ns == 10_000_000 + 19_000_000_000
    for bad in ({"requested": "1"}, {"requested": True}, {"cost": 1}, [1]):
        with pytest.raises(ratelane.InvalidArgumentError):
            limiter.handle_response(1, rid, 200, [], cost=bad)
    with pytest.raises(ratelane.InvalidArgumentError):
        limiter.handle_response(1, rid, 200, [], errors="THROTTLED")


class _Response:
    def __init__(self, status: int, headers: List[Tuple[str, str]], body: Any) -> None:
        self.status = status
        self.headers = headers
        self._body = body

    def json(self) -> Any:
        return self._body


def test_driver_retries_a_github_secondary_403() -> None:
    async def main() -> List[int]:
        limiter = ratelane.RateLimiter(profile="github", min_rate_limit_wait=0.001)
        answers = [
            # A secondary limit with a (tiny) retry-after: retried, not handed back.
            _Response(403, [("x-ratelimit-remaining", "10"), ("retry-after", "0")], {"message": "You have exceeded a secondary rate limit."}),
            _Response(200, [("x-ratelimit-remaining", "9")], {}),
        ]
        seen: List[int] = []

        async def send() -> _Response:
            answer = answers[len(seen)]
            seen.append(answer.status)
            return answer

        response = await limiter.run("POST", "/repos/octo/hello/issues", send)
        # A 403 without a sign of a rate limit is the caller's.
        denied = await limiter.run("GET", "/repos/octo/private", lambda: _async(_Response(403, [], {"message": "Not allowed"})))
        await limiter.aclose()
        return seen + [response.status, denied.status]

    assert asyncio.run(main()) == [403, 200, 200, 403]


async def _async(value: Any) -> Any:
    return value


def test_driver_reads_shopify_bodies() -> None:
    async def main() -> Dict[str, Any]:
        limiter = ratelane.RateLimiter(profile="shopify", min_rate_limit_wait=0.001)
        throttled = {
            "errors": [{"message": "Throttled", "extensions": {"code": "THROTTLED"}}],
            "extensions": {"cost": {"requestedQueryCost": 10, "actualQueryCost": None,
                                    "throttleStatus": {"maximumAvailable": 1000.0, "currentlyAvailable": 999.99, "restoreRate": 1000.0}}},
        }
        ok = {"data": {}, "extensions": {"cost": {"requestedQueryCost": 10, "actualQueryCost": 10,
                                                  "throttleStatus": {"maximumAvailable": 1000.0, "currentlyAvailable": 990, "restoreRate": 1000.0}}}}
        answers = [_Response(200, [], throttled), _Response(200, [], ok)]
        sent: List[int] = []

        async def send() -> _Response:
            sent.append(1)
            return answers[len(sent) - 1]

        response = await limiter.run("POST", "/admin/api/2024-01/graphql.json", send)
        await limiter.aclose()
        return {"sends": len(sent), "body": response.json()}

    result = asyncio.run(main())
    # The throttled 200 was not handed back: the query was sent again.
    assert result["sends"] == 2 and "data" in result["body"]


def test_driver_leaves_a_stream_alone() -> None:
    class Stream(_Response):
        def json(self) -> Any:
            raise AssertionError("an event stream must not be read for hints")

    async def main() -> int:
        limiter = ratelane.RateLimiter(profile="auto")
        answer = Stream(200, [("Content-Type", "text/event-stream"), ("x-ratelimit-remaining-requests", "5")], None)
        response = await limiter.run("POST", "/v1/chat/completions", lambda: _async(answer))
        await limiter.aclose()
        return int(response.status)

    assert asyncio.run(main()) == 200
