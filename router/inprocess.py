"""The real `openai` SDK, answered by a Router in this process: no socket, no server to start.

    client = router.async_openai_client()          # or router.openai_client() for sync code
    stream = await client.chat.completions.create(model="auto", messages=[...], stream=True)

Requests go through the same ASGI app `route serve` runs (router/server/app.py), over an httpx
transport that calls it directly. httpx's own `ASGITransport` collects the whole response body
before returning it, so a stream would arrive in one burst at the end; this transport hands each
piece of the body to the client as the app sends it, and closing the response early tells the
app the client went away (`http.disconnect`), which stops the upstream call as a hung-up HTTP
client would. Any framework that takes an OpenAI client (LangChain's ChatOpenAI, pydantic-ai's
OpenAIProvider, the Agents SDK's OpenAIChatCompletionsModel) can use it.

The sync client runs the app on an event loop of its own, in a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

__all__ = ["AsyncStreamingASGITransport", "StreamingASGITransport", "async_openai_client", "openai_client"]

_BASE_URL = "http://route.in-process/v1"
_API_KEY = "in-process"  # the app has no auth unless given a key; the SDK insists on one


def async_openai_client(app: Any, **kwargs: Any) -> Any:
    """An `openai.AsyncOpenAI` whose every request the ASGI `app` (a router's server app)
    answers in process. Keyword arguments go to the client (`max_retries`, `timeout`, ...)."""
    import openai

    kwargs.setdefault("max_retries", 0)  # the router retries and falls back itself
    # openai 1.x and 2.x take an httpx client; 3.x types it as httpx2's but takes httpx's too.
    http: Any = httpx.AsyncClient(transport=AsyncStreamingASGITransport(app), base_url=_BASE_URL)
    return openai.AsyncOpenAI(base_url=_BASE_URL, api_key=_API_KEY, http_client=http, **kwargs)


def openai_client(app: Any, **kwargs: Any) -> Any:
    """An `openai.OpenAI` whose every request the ASGI `app` answers in process (on a loop of its own)."""
    import openai

    kwargs.setdefault("max_retries", 0)
    http: Any = httpx.Client(transport=StreamingASGITransport(app), base_url=_BASE_URL)
    return openai.OpenAI(base_url=_BASE_URL, api_key=_API_KEY, http_client=http, **kwargs)


class _Exchange:
    """One request to the app: its body in, the response's head and body pieces out."""

    def __init__(self, app: Any, request: httpx.Request, body: bytes):
        self.head: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = asyncio.get_running_loop().create_future()
        self.pieces: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
        self.gone = asyncio.Event()  # the client closed the response
        self._body: bytes | None = body
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
            "scheme": request.url.scheme, "path": request.url.path, "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query, "root_path": "", "server": ("route.in-process", 80),
            "client": ("127.0.0.1", 0), "headers": [(k.lower(), v) for k, v in request.headers.raw],
        }
        self.task = asyncio.create_task(self._run(app, scope), name="route-inprocess")

    async def _receive(self) -> dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.gone.wait()  # the app waits here for a disconnect while it answers
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            if not self.head.done():
                self.head.set_result((message["status"], list(message.get("headers") or [])))
        elif message["type"] == "http.response.body":
            if message.get("body"):
                self.pieces.put_nowait(message["body"])
            if not message.get("more_body"):
                self.pieces.put_nowait(None)

    async def _run(self, app: Any, scope: dict[str, Any]) -> None:
        try:
            await app(scope, self._receive, self._send)
        except BaseException as exc:  # the client hears of it (the app already logged it)
            if not self.head.done():
                self.head.set_exception(exc if isinstance(exc, Exception) else RuntimeError("the app was stopped"))
            self.pieces.put_nowait(exc)
            if not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise
        finally:
            self.pieces.put_nowait(None)

    async def body(self) -> AsyncIterator[bytes]:
        while True:
            piece = await self.pieces.get()
            if piece is None:
                return
            if isinstance(piece, BaseException):
                raise httpx.ReadError(f"the in-process app failed: {type(piece).__name__}") from piece
            yield piece

    async def close(self) -> None:
        """The client is done: tell the app (it stops the upstream call when it still runs)."""
        self.gone.set()
        with contextlib.suppress(BaseException):
            await self.task


class _AsyncBody(httpx.AsyncByteStream):
    def __init__(self, exchange: _Exchange):
        self._exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._exchange.body():
            yield piece

    async def aclose(self) -> None:
        await self._exchange.close()


class AsyncStreamingASGITransport(httpx.AsyncBaseTransport):
    """Calls an ASGI app in this process, returning once its response starts; the body follows
    piece by piece as the app sends it."""

    def __init__(self, app: Any):
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        exchange = _Exchange(self.app, request, await request.aread())
        try:
            status, headers = await exchange.head
        except BaseException:
            await exchange.close()
            raise
        return httpx.Response(status, headers=headers, stream=_AsyncBody(exchange), request=request)


class _LoopThread:
    """An event loop running in a daemon thread, for the sync client."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="route-inprocess-loop", daemon=True)
        self._thread.start()

    def run(self, awaitable: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(awaitable, self.loop).result()

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)


class _SyncBody(httpx.SyncByteStream):
    def __init__(self, loop: _LoopThread, body: httpx.AsyncByteStream):
        self._loop = loop
        self._body = body
        self._pieces: AsyncIterator[bytes] | None = None

    def __iter__(self) -> Iterator[bytes]:
        pieces = self._body.__aiter__()
        while True:
            try:
                yield self._loop.run(_next(pieces))
            except StopAsyncIteration:
                return

    def close(self) -> None:
        self._loop.run(self._body.aclose())


async def _next(pieces: AsyncIterator[bytes]) -> bytes:
    return await anext(pieces)


class StreamingASGITransport(httpx.BaseTransport):
    """The sync counterpart: the app runs on a loop of its own in a daemon thread."""

    def __init__(self, app: Any):
        self._async = AsyncStreamingASGITransport(app)
        self._loop = _LoopThread()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        async_request = httpx.Request(request.method, request.url, headers=request.headers, content=body)
        response = self._loop.run(self._async.handle_async_request(async_request))
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_SyncBody(self._loop, response.stream), request=request)

    def close(self) -> None:
        self._loop.close()
