"""The READMEs' Python snippets run as pasted (see readme_snippets.py), against the local
Discord imitation and the test Redis; the ones that need the OpenAI / Anthropic SDKs run in
the second environment (sdk/test_readme_sdk.py)."""

from __future__ import annotations

from typing import Any

import pytest

from discord_server import DiscordImitation, serve_in_thread
from readme_snippets import Snippet, redis_url, run_snippet, snippets

SNIPPETS = [s for s in snippets() if not s.needs_sdk]


def test_every_snippet_runs_somewhere() -> None:
    """Each snippet is run here or in the second environment, and both have some."""
    assert SNIPPETS and len(SNIPPETS) < len(snippets())
    assert all(s.run is not None for s in snippets()), [s.name for s in snippets() if s.run is None]


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda s: s.name)
def test_readme_snippet_runs_as_pasted(snippet: Snippet, monkeypatch: Any) -> None:
    if "REDIS_URL" in (snippet.run or "") and not redis_url():
        pytest.skip("RATELANE_REDIS_URL is not set (scripts/tests.d/10-python.sh sets it)")
    imitation = DiscordImitation(objects=True)
    with serve_in_thread(imitation) as base:
        run_snippet(snippet, {"DISCORD": base + "/api/v10", "TOKEN": "not-a-real-token", "REDIS_URL": redis_url()})
    assert imitation.count(429) == 0
