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


def test_the_install_line_brings_what_the_demo_imports() -> None:
    """README.md's install line names extras (``pip install './bindings-python[aiohttp]'``)
    whose requirements cover every library the demo it runs next imports (a newcomer's
    ``No module named 'aiohttp'``)."""
    import ast
    import importlib.metadata
    import re
    import sys

    from readme_snippets import ROOT

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Using it from Python"):]
    install = re.search(r"pip install '\./bindings-python\[([a-z0-9,]+)\]'", section)
    demo = re.search(r"python (examples/python/\w+\.py)", section)
    assert install and demo, "the Python section opens with an install line and a demo"
    extras = set(install.group(1).split(","))
    provided = set()
    for requirement in importlib.metadata.requires("ratelane") or []:
        marker = re.search(r"""extra == ["']([a-z0-9]+)["']""", requirement)
        if marker and marker.group(1) in extras:
            provided.add(re.split(r"[<>=!~; \[]", requirement, 1)[0].lower())
    imported = set()
    for node in ast.walk(ast.parse((ROOT / demo.group(1)).read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    local = {p.stem for p in (ROOT / "examples/python").glob("*.py")}
    third_party = imported - set(sys.stdlib_module_names) - local - {"ratelane"}
    assert third_party and third_party <= provided, (third_party, provided)
