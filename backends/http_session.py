"""The pooled HTTP client of the openai and anthropic kinds: one aiohttp session per event loop.

Why aiohttp rather than httpx: the upstream call is most of what `route serve` does per request,
and aiohttp parses HTTP in C. Measured against the simulator at 64 concurrent requests, from
one process, an httpx AsyncClient spent 1.9-2.0 ms of CPU per request and an aiohttp session
0.43-0.45 ms (issue 13); httpx and httpcore were 35-40% of the serving loop (py-spy).

aiohttp is imported when the first session is made, not with this module: it builds its TLS
contexts at import (~0.15 s), which `route --help` and `route --explain` must not pay.

Settings, each chosen for a proxy in front of other people's requests:
- no cookie jar: a cookie one client's request brought back is never sent with another's;
- proxies from the environment (HTTP(S)_PROXY, NO_PROXY, a proxy's login in ~/.netrc), as httpx
  and curl honour them, looked up once per upstream origin (`Sessions._proxy`): aiohttp's own
  `trust_env` looks them up on every request, in a worker thread, twice (12% of `route serve`'s
  CPU per request, py-spy);
- certificates from the system store, or certifi's bundle when the system has none (the
  python.org macOS build ships without one);
- one pool of up to `MAX_CONNECTIONS`; an idle connection is kept `KEEPALIVE_S`, less than the
  5 s of uvicorn (vLLM's server), so that we drop it before the server does: aiohttp never
  resends a POST that met a connection the server had just closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import ssl
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiohttp

__all__ = ["MAX_CONNECTIONS", "Sessions", "new_session", "sse_data", "tls_context"]

MAX_CONNECTIONS = 256
KEEPALIVE_S = 4.0

_certifi: ssl.SSLContext | None = None


def tls_context() -> ssl.SSLContext | bool:
    """True for aiohttp's own verifying context (the system's certificates, SSL_CERT_FILE and
    SSL_CERT_DIR included), or one on certifi's bundle where the system has none; built once,
    since reading a bundle takes ~0.08 s."""
    global _certifi
    paths = ssl.get_default_verify_paths()
    if (paths.cafile and os.path.exists(paths.cafile)) or (paths.capath and os.path.isdir(paths.capath)
                                                            and any(os.scandir(paths.capath))):
        return True
    if _certifi is None:
        import certifi

        _certifi = ssl.create_default_context(cafile=certifi.where())
    return _certifi


def new_session() -> aiohttp.ClientSession:
    """A session for the running event loop (aiohttp binds it to the loop it was made on)."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, limit_per_host=0, keepalive_timeout=KEEPALIVE_S,
                                     ssl=tls_context())
    return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
                                 auto_decompress=True, raise_for_status=False)


class Sessions:
    """One session per running event loop, made on first use (the sync API, the servers and
    tests each run loops of their own). Sessions of loops that have since closed are closed as
    new ones are made; once its loop is gone a session's close needs no loop of its own.

    aiohttp logs every session collected unclosed as an error; httpx, which this replaced, did
    not, so an owner that never calls `aclose()` (agent code, a script's last router) would
    have printed errors at exit. Sessions left open when this object goes are closed then."""

    def __init__(self) -> None:
        self.by_loop: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        self._proxies: dict[str, tuple[Any, Any]] = {}  # origin -> (proxy URL, proxy login) or (None, None)
        weakref.finalize(self, _abandon, self.by_loop)

    def _proxy(self, url: str) -> tuple[Any, Any]:
        """(proxy, proxy_auth) for `url` from the environment, as aiohttp's `trust_env` would
        find them; read once per origin, so a proxy variable changed later is not seen."""
        origin = "/".join(url.split("/", 3)[:3])
        found = self._proxies.get(origin)
        if found is None:
            from aiohttp.helpers import get_env_proxy_for_url
            from yarl import URL

            try:
                found = get_env_proxy_for_url(URL(origin))
            except LookupError:  # none set, or NO_PROXY exempts this host
                found = (None, None)
            self._proxies[origin] = found
        return found

    async def get(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self.by_loop.get(loop)
        if session is None:
            for stale in [other for other in self.by_loop if other.is_closed()]:
                await self.by_loop.pop(stale).close()
            session = self.by_loop[loop] = new_session()
        return session

    @contextlib.asynccontextmanager
    async def request(self, method: str, url: str, *, total_s: float | None = None, connect_s: float | None = None,
                      **kwargs: Any) -> AsyncIterator[aiohttp.ClientResponse]:
        """One request on this loop's session, through the environment's proxy for `url`."""
        proxy, proxy_auth = self._proxy(url)
        timeout = _timeout(total_s, connect_s)
        async with (await self.get()).request(method, url, proxy=proxy, proxy_auth=proxy_auth, timeout=timeout,
                                              **kwargs) as response:
            yield response

    async def aclose(self) -> None:
        """Close this loop's session and those of closed loops; a session of another loop that
        still runs can only be closed there, and is left to it."""
        loop = asyncio.get_running_loop()
        for other in [other for other in self.by_loop if other is loop or other.is_closed()]:
            await self.by_loop.pop(other).close()


@functools.lru_cache(maxsize=64)
def _timeout(total_s: float | None, connect_s: float | None) -> aiohttp.ClientTimeout:
    """aiohttp's timeout of these two limits: frozen, and nearly always the same pair (the
    connect cap, no total), so made once rather than per request."""
    import aiohttp

    return aiohttp.ClientTimeout(total=total_s, sock_connect=connect_s)


def _abandon(sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession]) -> None:
    for session in sessions.values():
        connector = session.connector
        if connector is not None and not connector.closed:
            connector._close()  # aiohttp's one synchronous close: it closes the sockets, awaits nothing
        session.detach()  # marks the session closed; the connector was closed just above
    sessions.clear()


async def sse_data(chunks: AsyncIterator[bytes]) -> AsyncGenerator[list[bytes], None]:
    """The `data:` payloads of an SSE body (bytes, line ends and the blanks after `data:`
    removed), a list per read, however the bytes were cut: a line may span reads, and one read
    may hold many events. A list per read, not an event at a time, because a provider that
    writes faster than we read (or a busy machine) packs hundreds of events into one read, and
    every layer above then handles one batch instead of one event per token. Event names,
    comments and keep-alives are skipped: every API here repeats the event's type inside its
    data. Payloads are left undecoded: the JSON parser reads UTF-8 bytes itself."""
    rest = b""
    async for chunk in chunks:
        lines = (rest + chunk if rest else chunk).split(b"\n")
        rest = lines.pop()  # a line still arriving (or b""): kept for the next read
        # A comprehension over split lines: half a microsecond an event, where an anchored
        # multi-line regex took ten.
        found = [line[5:].strip() for line in lines if line[:5] == b"data:"]
        if found:
            yield found
    if rest[:5] == b"data:":
        yield [rest[5:].strip()]
