"""The Python snippets of the READMEs, extracted and run as pasted (test_readme.py, and
sdk/test_readme_sdk.py for the ones that need the second environment's libraries).

A snippet is a ```python block of ``README.md``'s Python section (from "## Using it from
Python" to the next "## ") or of ``bindings-python/README.md``. It runs as a module (its
``__name__`` is not ``"__main__"``, so a closing ``asyncio.run(main(<the real API>))`` does not
run); then the statement of the HTML comment ``<!-- run: ... -->`` just above it, if any, runs
in an async function over the module's names and these: ``DISCORD`` (the local Discord
imitation's API base URL), ``TOKEN``, ``REDIS_URL`` (the test Redis) and ``OPENAI`` (the local
OpenAI imitation's base URL, in the second environment). Each imitation is served from a
thread, so a snippet may block (the synchronous driver) or run its own event loop.
"""

from __future__ import annotations

import ast
import asyncio
import os
import pathlib
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Set

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Modules only the second environment (requirements-sdk.txt) has.
SDK_ONLY = {"openai", "anthropic", "httpx2"}

_BLOCK = re.compile(r"(?:<!-- run: (?P<run>.*?) -->\n)?```python\n(?P<code>.*?)```", re.S)


@dataclass
class Snippet:
    file: str
    line: int
    code: str
    run: Optional[str]

    @property
    def name(self) -> str:
        return f"{self.file}:{self.line}"

    def imports(self) -> Set[str]:
        found: Set[str] = set()
        for node in ast.walk(ast.parse(self.code)):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
        return found

    @property
    def needs_sdk(self) -> bool:
        return bool(self.imports() & SDK_ONLY)


def snippets() -> List[Snippet]:
    found = []
    for file, start, end in (("README.md", "## Using it from Python", "\n## "), ("bindings-python/README.md", None, None)):
        text = (ROOT / file).read_text()
        offset = 0
        if start is not None:
            offset = text.index(start)
            stop = text.index(end, offset + len(start))
            text = text[:stop]
        for match in _BLOCK.finditer(text, offset):
            line = text.count("\n", 0, match.start("code"))
            found.append(Snippet(file, line, match.group("code"), match.group("run")))
    return found


def run_snippet(snippet: Snippet, names: Dict[str, Any]) -> None:
    """Runs ``snippet`` as pasted, then its run statement with ``names``."""
    from discord_server import run

    module: Dict[str, Any] = {"__name__": "readme_snippet"}
    exec(compile(snippet.code, snippet.name, "exec"), module)
    if snippet.run is None:
        return
    module.update(names)
    exec(compile(f"async def __run__():\n    {snippet.run}\n", snippet.name + " (run)", "exec"), module)
    run(module["__run__"](), 60)


def redis_url() -> Optional[str]:
    return os.environ.get("RATELANE_REDIS_URL")


__all__ = ["Snippet", "snippets", "run_snippet", "redis_url", "SDK_ONLY", "asyncio"]
