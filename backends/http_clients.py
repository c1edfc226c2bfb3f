"""Several small-pooled httpx clients for one upstream, each request on the least busy one.

httpcore's pool walks every pooled connection twice per request (on send and on close), and
polls each idle socket for a hang-up as it goes, so at 64 concurrent requests the scan took a
fifth of `route serve`'s CPU (py-spy, issue 13) and grew with concurrency. Spread over
`shards` clients of a few connections each, a scan covers only that client's connections:
the same totals (connections and keep-alive ones), an eighth of the walk.

Least busy, not round-robin: a lone caller keeps reusing the first client's one connection.
Clients are made as concurrency first needs them, and share one TLS context (building one
reads the CA bundle: about 0.1 s each). Their connections send each request in one write
(backends/corked.py).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpcore
import httpx

from backends.corked import CorkedBackend

__all__ = ["ClientSet"]

SHARDS = 8
MAX_CONNECTIONS = 256  # in all, as one pool had
MAX_KEEPALIVE = 64  # idle connections kept in all


class _Cookies(httpx.Cookies):
    """The client's cookie jar, which skips the jar's work for a response that sets no cookie:
    httpx hands every response to http.cookiejar through two adapter objects (2.5% of `route
    serve`'s CPU per request, py-spy, issue 13), which then finds no Set-Cookie header."""

    def extract_cookies(self, response: httpx.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            super().extract_cookies(response)


class _Client(httpx.AsyncClient):
    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._cookies = _Cookies(self._cookies)


class ClientSet:
    """`lease()` lends the least busy client for one exchange (request to closed response).
    A `transport` handed in (tests) is one pool already: then there is one client."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None, shards: int = SHARDS):
        if shards < 1:
            raise ValueError("shards must be at least 1")
        shards = 1 if transport is not None else shards
        self._transport = transport
        self._limits = httpx.Limits(max_connections=-(-MAX_CONNECTIONS // shards),
                                    max_keepalive_connections=-(-MAX_KEEPALIVE // shards))
        self._tls: ssl.SSLContext | None = None
        self.clients: list[httpx.AsyncClient | None] = [None] * shards
        self._busy = [0] * shards  # exchanges in flight per client

    def _make(self, i: int) -> httpx.AsyncClient:
        if self._tls is None:
            self._tls = httpx.create_ssl_context()
        transport = self._transport or self._corked(self._tls)
        client = self.clients[i] = _Client(transport=transport, limits=self._limits, timeout=None, verify=self._tls)
        return client

    def _corked(self, tls: ssl.SSLContext) -> httpx.AsyncHTTPTransport:
        """httpx's own transport, its pool built as httpx builds it but on CorkedBackend (httpx
        has no parameter for the network backend). Proxies from the environment are still
        httpx's own transports, mounted by the client."""
        transport = httpx.AsyncHTTPTransport(verify=tls, limits=self._limits)
        limits = self._limits
        transport._pool = httpcore.AsyncConnectionPool(
            ssl_context=tls, max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections, keepalive_expiry=limits.keepalive_expiry,
            http1=True, http2=False, retries=0, network_backend=CorkedBackend())
        return transport

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[httpx.AsyncClient]:
        busy = self._busy
        i = busy.index(min(busy))
        client = self.clients[i] or self._make(i)
        busy[i] += 1
        try:
            yield client
        finally:
            busy[i] -= 1

    async def aclose(self) -> None:
        for client in self.clients:
            if client is not None:
                await client.aclose()
