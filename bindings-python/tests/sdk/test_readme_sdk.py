"""The READMEs' Python snippets that need the OpenAI / Anthropic SDKs (see
readme_snippets.py), run as pasted against the local imitation of the OpenAI API."""

from __future__ import annotations

from typing import Any

import pytest

from discord_server import serve_in_thread
from llm_server import LlmImitation
from readme_snippets import Snippet, run_snippet, snippets

SNIPPETS = [s for s in snippets() if s.needs_sdk]


def test_there_are_sdk_snippets() -> None:
    assert SNIPPETS


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.name)
def test_readme_sdk_snippet_runs_as_pasted(snippet: Snippet, monkeypatch: Any) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key")  # a user has theirs set
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-real-key")
    imitation = LlmImitation("openai", requests=10, tokens=100_000, window_s=1.0)
    with serve_in_thread(imitation) as base:  # type: ignore[arg-type]
        run_snippet(snippet, {"OPENAI": base + "/v1"})
    assert imitation.statuses == {200: 1}
