"""The HTTP transport of the kinds that speak a provider's API over HTTP (openai, anthropic): one
POST, its error statuses and connection failures in our error tree, and an SSE body as the data
of its events. A backend kind on top of it only translates: its request body, its headers, and
the events it reads back (as httpx puts a transport behind its client).

Connections come from one pooled aiohttp session per event loop (`Sessions`). A response's
connection goes back to the pool only when its body was read to the end, so a stream is read
past its last event (`_drain`); leaving early closes the connection, which is also how a
cancelled call stops the upstream generation.

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
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from backends.errors import BackendError, BackendUnavailable, MalformedResponse, Where
from backends.faults import error_for_status, failed_writing, scrub
from backends.http_errors import is_transport_error, translate_transport_error

if TYPE_CHECKING:
    import aiohttp

__all__ = ["MAX_CONNECTIONS", "HttpTransport", "Reply", "Sessions", "check_finished", "json_event", "json_events",
           "new_session", "sse_data", "tls_context"]

_CONNECT_CAP_S = 10.0  # connecting alone never takes longer than this, whatever the deadline
_DRAIN_S = 0.05  # how long to read past the last event for the connection's sake

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


class Reply:
    """An upstream answer with a success status: its headers, and its body whole or as SSE data."""

    __slots__ = ("_response", "ended", "simulated", "whole")

    def __init__(self, response: aiohttp.ClientResponse):
        self._response = response
        self.ended = False  # the event that ends the stream was read: the body was not cut short
        # The project's simulator labels every answer; shown to users wherever it appears.
        self.simulated = response.headers.get("x-simulated") == "true"
        # A JSON body to a streamed request: a server that ignores `stream: true` answered with
        # the whole message, which is read as one (read as SSE it would be an empty answer).
        self.whole = response.content_type == "application/json"

    async def body(self) -> bytes:
        return await self._response.read()

    async def events(self, last: Callable[[bytes], bool]) -> AsyncIterator[list[bytes]]:
        """The `data:` payloads of the SSE events (`sse_data`), in
        order, a list per read of the body, up to the one `last` says ends the stream (not
        yielded); then the rest of the body is drained."""
        async with contextlib.aclosing(sse_data(self._response.content.iter_any())) as body:
            async for batch in body:
                # Scanned without a Python frame per event when `last` is a builtin (bytes.__eq__).
                ends = list(map(last, batch))
                if True in ends:
                    i = ends.index(True)
                    if i:
                        yield batch[:i]
                    self.ended = True
                    await _drain(body)
                    return
                yield batch


def check_finished(reply: Reply, finished: bool, markers: str, where: Where) -> None:
    """A stream that gave neither a finish reason nor its last event (`markers` names both):
    the connection closed mid-answer, and a client handed what came so far as the whole answer
    would act on half of it. A failure of the backend's, not an answer."""
    if not (finished or reply.ended):
        raise BackendUnavailable(f"the stream ended before the model finished ({markers}): the upstream closed it "
                                 "mid-answer", **where)


class HttpTransport:
    """POSTs JSON to one backend's upstream. `shown` is the URL as configured, for messages (a
    ${NAME} in it never shows its value); `where` is the error context of the backend."""

    def __init__(self, shown: str, where: Where):
        self.shown = shown
        self.where = where
        self._sessions = Sessions()

    def translate(self, exc: Exception) -> BackendError:
        """A failure of the connection in our error tree; other errors as unavailable."""
        if is_transport_error(exc):
            return translate_transport_error(exc, url=self.shown, **self.where)
        return BackendUnavailable(f"{type(exc).__name__}: {scrub(str(exc))}", **self.where)

    @contextlib.asynccontextmanager
    async def post(self, url: str, payload: Mapping[str, Any], headers: Mapping[str, str],
                   remaining_s: float | None, timeout_s: float) -> AsyncIterator[Reply]:
        """POST `payload` as JSON; an error status is raised as ours. The caller enforces the
        deadline (Backend._next); here only connecting is capped, by the time left."""
        limit = timeout_s if remaining_s is None else max(0.001, remaining_s)
        try:
            body = orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)  # YAML params may have int keys (logit_bias)
        except TypeError as exc:  # a value of the caller's that is not JSON: the request's, not the upstream's
            raise failed_writing(exc, self.where) from exc
        async with self._sessions.request("POST", url, data=body, headers={**headers, "Content-Type": "application/json"},
                                          connect_s=min(limit, _CONNECT_CAP_S)) as response:
            if response.status >= 400:
                text = (await response.read()).decode("utf-8", "replace")
                raise error_for_status(response.status, response.headers, text, **self.where)
            yield Reply(response)

    @contextlib.asynccontextmanager
    async def get(self, url: str, headers: Mapping[str, str], timeout_s: float) -> AsyncIterator[aiohttp.ClientResponse]:
        """A GET for health checks: the response as it is, whatever its status."""
        async with self._sessions.request("GET", url, headers=dict(headers), total_s=timeout_s) as response:
            yield response

    async def aclose(self) -> None:
        await self._sessions.aclose()


def json_event(data: bytes, where: Callable[[], Where]) -> dict[str, Any]:
    """One SSE event's data as the JSON object both providers send; MalformedResponse otherwise,
    with the error context `where()` gives (asked only then: this runs once per token)."""
    try:
        event = orjson.loads(data)
    except ValueError as exc:
        raise MalformedResponse(f"unparseable stream event: {data[:200]!r}", **where()) from exc
    if type(event) is not dict:
        raise MalformedResponse(f"unexpected stream event: {data[:200]!r}", **where())
    return event


def json_events(batch: list[bytes], where: Callable[[], Where]) -> list[dict[str, Any]]:
    """json_event of each of a read's events, parsed as one JSON array: one parser call per
    read rather than one per token. A read that does not come back as that many objects is
    parsed event by event, so the bad one is named as json_event names it."""
    try:
        events = orjson.loads(b"[" + b",".join(batch) + b"]")
    except ValueError:
        events = None
    if events is None or len(events) != len(batch) or set(map(type, events)) != {dict}:  # checked in C
        return [json_event(data, where) for data in batch]
    return events


async def _drain(body: AsyncIterator[list[bytes]]) -> None:
    """Read to the end of the body: only a fully read response puts its connection back in the
    pool; otherwise every stream would pay for a new connection."""
    try:
        async with asyncio.timeout(_DRAIN_S):
            async for _ in body:
                pass
    except Exception as exc:  # a server that keeps the body open after its end: give up reuse, keep the answer
        if not (isinstance(exc, TimeoutError) or is_transport_error(exc)):
            raise
