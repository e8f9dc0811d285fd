"""A requests adapter that rate-limits every request of a session, on the synchronous driver.

::

    import requests, ratelane.requests

    session = requests.Session()
    session.mount("https://api.github.com/", ratelane.requests.RateLimitedAdapter(profile="github"))
    response = session.get("https://api.github.com/repos/octocat/hello-world")

The adapter is requests' own ``HTTPAdapter`` (connection pools, TLS, proxies, its settings
``pool_connections``, ``pool_maxsize``, ``pool_block``) whose ``send`` goes through a
``ratelane.SyncRateLimiter``: the one given (shared between sessions and threads, left open),
or a new one from the settings given as keyword arguments (closed with the adapter, when the
session closes). It is thread-safe, as the driver is.

The route and major parameter come from the URL path; the ``Authorization`` header (hashed)
keys the token; the keys of a JSON object body tell the profile a request the server limits
apart. 429s and transport failures are retried inside ``send`` as ``SyncRateLimiter.run`` does
(a body that is a stream or a file cannot be re-sent after a 429). A request ratelane does not
complete reaches the caller as an answer (``refusal="respond"``, the default): the server's own
last answer when there was one, else a 429 whose JSON body names ratelane's code and whose
``Retry-After`` says when it could go, so ``response.raise_for_status()`` raises requests'
``HTTPError`` and clients that honour ``Retry-After`` (PyGithub's ``GithubRetry``) wait it out.
``refusal="raise"`` raises ratelane's ``RateLimitError`` subclasses from the call instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Mapping, Optional, Tuple, Union
from urllib.parse import urlsplit

import requests
from requests.adapters import DEFAULT_POOLBLOCK, DEFAULT_POOLSIZE, HTTPAdapter
from requests.structures import CaseInsensitiveDict

from ._sync import SyncRateLimiter
from ._transport import Estimate, Refusal, check_refusal, own_limiter, request_options, run_sync

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._settings import LimiterSettings

__all__ = ["RateLimitedAdapter"]


class RateLimitedAdapter(HTTPAdapter):
    """requests' ``HTTPAdapter``, rate-limited; mount it with ``session.mount(prefix, ...)``."""

    def __init__(
        self,
        limiter: Optional[SyncRateLimiter] = None,
        *,
        refusal: Refusal = "respond",
        estimate: Optional[Estimate] = None,
        pool_connections: int = DEFAULT_POOLSIZE,
        pool_maxsize: int = DEFAULT_POOLSIZE,
        pool_block: bool = DEFAULT_POOLBLOCK,
        **settings: Unpack[LimiterSettings],
    ) -> None:
        self.limiter: SyncRateLimiter
        self.limiter, self._owns_limiter = own_limiter(limiter, SyncRateLimiter, dict(settings), type(self).__name__)
        self._refusal = check_refusal(refusal)
        self._estimate = estimate
        super().__init__(pool_connections=pool_connections, pool_maxsize=pool_maxsize, pool_block=pool_block)

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: Union[None, float, Tuple[float, float], Tuple[float, None]] = None,
        verify: Union[bool, str] = True,
        cert: Union[None, bytes, str, Tuple[Union[bytes, str], Union[bytes, str]]] = None,
        proxies: Optional[Mapping[str, str]] = None,
    ) -> requests.Response:
        body = request.body if isinstance(request.body, (bytes, str)) else None
        send = super().send

        def make(status: int, headers: Dict[str, str], content: bytes) -> requests.Response:
            response = requests.Response()
            response.status_code = status
            response.reason = "Too Many Requests"
            response.headers = CaseInsensitiveDict(headers)
            response._content = content
            response.url = request.url or ""
            response.request = request
            response.encoding = "utf-8"
            return response

        response: requests.Response = run_sync(
            self.limiter,
            self._refusal,
            request.method or "GET",
            urlsplit(request.url or "").path or "/",
            lambda: send(request, stream=stream, timeout=timeout, verify=verify, cert=cert, proxies=proxies),
            request_options(request.method or "GET", request.headers, body, self._estimate),
            make,
        )
        return response

    def close(self) -> None:
        super().close()
        if self._owns_limiter:
            self.limiter.close()
