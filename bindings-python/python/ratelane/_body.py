"""The keys of a request's JSON body, which the core's profile reads to tell a request the
server limits apart from the rest of its route (a Discord channel's name/topic edit)."""

from __future__ import annotations

import json
from typing import List, Optional, Union

# Larger bodies are not parsed: the sub-limited edits are small, and a body of this size is
# not one of them (it then counts as a request of the route's main class).
MAX_BODY = 65536


def json_body_keys(content_type: Optional[str], body: Union[str, bytes, None]) -> Optional[List[str]]:
    """The top-level keys of ``body`` when ``content_type`` is JSON and it is an object of at
    most 64 KiB; otherwise ``None``."""
    if body is None or not content_type or len(body) > MAX_BODY:
        return None
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        return None
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return list(parsed) if isinstance(parsed, dict) else None
