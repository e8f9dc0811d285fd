"""The shared LLM request-body API from Python: ``ratelane.read_llm_request`` over the vectors
every binding replays (tests/vectors/llm_requests.json), and the ``model`` option that keys an
LLM API's per-model budgets (in the sans-IO limiter and through ``RateLimiter.run``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, List, Tuple

import pytest

import ratelane
from conftest import VECTORS

CASES = json.loads((VECTORS / "llm_requests.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["_comment"][:40])
def test_the_vectors_read_alike_from_str_bytes_and_bytearray(case: Any) -> None:
    expected = case["expected"]
    for body in (case["body"], case["body"].encode(), bytearray(case["body"].encode())):
        got = ratelane.read_llm_request(body)
        if expected is None:
            assert got is None
        else:
            assert got == ratelane.LlmRequest(expected["model"], expected["tokens"])
            assert (got.model, got.tokens) == (expected["model"], expected["tokens"])


def test_a_body_of_another_type_is_an_invalid_argument() -> None:
    for body in (None, 42, {"messages": []}, memoryview(b"{}")):
        with pytest.raises(ratelane.InvalidArgumentError, match="body must be bytes or str"):
            ratelane.read_llm_request(body)  # type: ignore[arg-type]
    assert repr(ratelane.LlmRequest("gpt-4o", 7)) == 'LlmRequest(model="gpt-4o", tokens=7)'


def headers(remaining_tokens: int) -> List[Tuple[str, str]]:
    return [
        ("x-ratelimit-limit-requests", "60"),
        ("x-ratelimit-remaining-requests", "59"),
        ("x-ratelimit-reset-requests", "1s"),
        ("x-ratelimit-limit-tokens", "10000"),
        ("x-ratelimit-remaining-tokens", str(remaining_tokens)),
        ("x-ratelimit-reset-tokens", "6s"),
    ]


def test_two_models_never_share_a_budget() -> None:
    limiter = ratelane.Limiter(profile="openai")
    a1 = limiter.enqueue(0, "POST", "/v1/chat/completions", model="gpt-a", costs={"tokens": 3000})
    a2 = limiter.enqueue(0, "POST", "/v1/chat/completions", model="gpt-a", costs={"tokens": 3000})
    b1 = limiter.enqueue(0, "POST", "/v1/chat/completions", model="gpt-b", costs={"tokens": 3000})
    # One pioneer per model: gpt-b's does not wait for gpt-a's.
    assert [o for o in limiter.drain() if isinstance(o, ratelane.Send)] == [ratelane.Send(a1), ratelane.Send(b1)]
    limiter.handle_response(100_000_000, a1, 200, headers(1000), usage={"total_tokens": 3000})
    assert not [o for o in limiter.drain() if isinstance(o, ratelane.Send)], "gpt-a has 1000 tokens left"
    b2 = limiter.enqueue(150_000_000, "POST", "/v1/chat/completions", model="gpt-b", costs={"tokens": 3000})
    limiter.drain()
    limiter.handle_response(200_000_000, b1, 200, headers(7000), usage={"total_tokens": 3000})
    assert ratelane.Send(b2) in limiter.drain()
    assert a2 != b2
    with pytest.raises(ratelane.InvalidRequestError, match="model"):
        limiter.enqueue(300_000_000, "POST", "/v1/chat/completions", model="")
    with pytest.raises(ratelane.InvalidArgumentError):
        limiter.enqueue(300_000_000, "POST", "/v1/chat/completions", model=5)


class Answer:
    def __init__(self, remaining: int) -> None:
        self.status = 200
        self.headers = dict(headers(remaining))


def test_run_takes_the_model_option() -> None:
    async def main() -> List[str]:
        limiter = ratelane.RateLimiter(profile="openai")
        sent: List[str] = []

        def send_for(model: str) -> Any:
            async def send() -> Answer:
                sent.append(model)
                return Answer(9000)

            return send

        body = json.dumps({"model": "gpt-4o", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]})
        req = ratelane.read_llm_request(body)
        assert req is not None and req.model == "gpt-4o"
        for model in ("gpt-4o", "o3"):
            await limiter.run("POST", "/v1/chat/completions", send_for(model), model=model, costs={"tokens": req.tokens})
        with pytest.raises(ratelane.InvalidRequestError):
            await limiter.run("POST", "/v1/chat/completions", send_for("x"), model="")
        await limiter.aclose()
        return sent

    assert asyncio.run(main()) == ["gpt-4o", "o3"]
