"""Identity keys: which token a request is sent with, without keeping the token."""

from __future__ import annotations

import hashlib
from typing import Dict, Optional, Union

_cache: Dict[Union[str, bytes], str] = {}


def identity_of(authorization: Optional[Union[str, bytes]]) -> Optional[str]:
    """A short hash of an ``Authorization`` value (``None`` when there is none), so each
    token gets its own buckets and global limit; the token itself is never stored by the
    limiter. Cached: hashing costs more than a request's rate limiting."""
    if not authorization:
        return None
    key = _cache.get(authorization)
    if key is None:
        raw = authorization.encode() if isinstance(authorization, str) else authorization
        key = hashlib.blake2b(raw, digest_size=8).hexdigest()
        if len(_cache) > 1024:
            _cache.clear()
        _cache[authorization] = key
    return key
