"""A local imitation of the OpenAI and Anthropic APIs' rate limits, for the SDK tests: the
core's server model (``ratelane.sim.Server``, the provider's dialect: its headers, its 429s)
behind ``discord_server.serve``, answering the SDKs' real requests (``POST
/v1/chat/completions``, ``POST /v1/messages``) with bodies the SDKs parse.

Each request's real cost is computed from its JSON body as an API would (a token per 0.75
word of the prompt, and the completion the model's choice between a quarter of
``max_tokens`` and all of it), charged when it arrives (``Server.handle(..., tokens=N)``),
and reported in the answer's ``usage``. Each model has its own limits.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any, Dict, List, Tuple

from aiohttp import web

from ratelane.sim import Server

SECOND = 1_000_000_000
CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


def true_cost(body: Dict[str, Any]) -> Tuple[int, int]:
    """``(prompt_tokens, completion_tokens)`` the imitation charges for a request body."""
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    prompt = math.ceil(len(text.split()) / 0.75)
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 256)
    share = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return prompt, max(1, round(max_tokens * (0.25 + 0.75 * share)))


class LlmImitation:
    """``dialect`` is ``"openai"`` or ``"anthropic"``; ``requests`` and ``tokens`` per
    ``window_s`` (fixed windows, from the first arrival)."""

    def __init__(self, dialect: str, requests: int, tokens: int, window_s: float) -> None:
        self.dialect = dialect
        path = CHAT if dialect == "openai" else MESSAGES
        self.model = Server({
            "profile": dialect, "dialect": dialect, "global": None,
            "buckets": {"api": {"limit": requests, "window_ns": int(window_s * SECOND), "kind": "fixed"}},
            "routes": {f"POST {path}": {"bucket": "api"}},
            "tokens": {"cost": max(1, tokens // requests), "limit": requests, "window_ns": int(window_s * SECOND),
                       "kind": "fixed"},
            "wall_epoch_ms": int(time.time() * 1000),  # absolute resets on the client's clock
        })
        self.start = time.monotonic_ns()
        self.statuses: Dict[int, int] = {}
        self.admitted: List[int] = []  # the tokens of every request answered 200
        self.models: List[str] = []

    def count(self, status: int) -> int:
        return self.statuses.get(status, 0)

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        prompt, completion = true_cost(body)
        # Limits are per model (the providers' rule): the model is the major parameter.
        answer = self.model.handle(time.monotonic_ns() - self.start, request.method, request.path,
                                   major=str(body.get("model")), tokens=prompt + completion)
        self.statuses[answer.status] = self.statuses.get(answer.status, 0) + 1
        headers = [(k, v) for k, v in answer.headers if k.lower() not in ("content-type", "date")]
        if answer.status != 200:
            return web.Response(status=answer.status, text=answer.body_text or "{}", headers=headers,
                                content_type="application/json")
        self.admitted.append(prompt + completion)
        self.models.append(str(body.get("model")))
        if self.dialect == "openai":
            reply: Dict[str, Any] = {
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion},
            }
        else:
            reply = {
                "id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model"),
                "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": prompt, "output_tokens": completion},
            }
        return web.Response(text=json.dumps(reply), headers=headers, content_type="application/json")
