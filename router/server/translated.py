"""One ASGI endpoint for every API that is translated to the router's call: Anthropic Messages,
OpenAI Responses. Each API is a `Dialect` (its protocol module): it parses a request body into a
`Translated` call, and writes answers, stream events and errors in its own shape; this module
does the rest once -- the body limit, model names and aliases, routing, the client watch, and
"wait for the first text before answering, so a total failure is still an HTTP error".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from backends.errors import RouteError, UsageError
from backends.types import Chunk, Completion, FinalChunk, Message, TextChunk
from router.server.chat import (
    _ClientGone,
    _ClientWatch,
    _decision_headers,
    _first_content,
    _usage_error,
    forward_text,
    read_body,
)
from router.server.wire import ApiError, error_for_failure

if TYPE_CHECKING:
    from router.core import Router
    from router.server.metrics import Metrics
    from router.server.models import ModelNames

__all__ = ["Dialect", "EventWriter", "Translated", "TranslatedEndpoint"]

_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


@dataclass(slots=True)
class Translated:
    """A request of some API in the router's terms. `echo` holds what the answer repeats back
    (the Responses API echoes instructions and tools)."""

    model: str
    messages: list[Message]
    stream: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    stop: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    echo: dict[str, Any] = field(default_factory=dict)

    def options(self, model: str) -> dict[str, Any]:
        return dict(model=model, max_tokens=self.max_tokens, temperature=self.temperature, stop=self.stop,
                    extra=self.extra)


class EventWriter(Protocol):
    """One stream's events, as bytes ready to send."""

    def start(self) -> bytes: ...
    def text(self, text: str) -> bytes: ...
    def finish(self, completion: Completion | None) -> bytes: ...
    def error(self, err: ApiError) -> bytes: ...


class Dialect(Protocol):
    """One API's wire format."""

    def parse(self, raw: bytes) -> Translated: ...
    def error_body(self, err: ApiError) -> bytes: ...
    def body(self, call: Translated, completion: Completion) -> bytes: ...
    def writer(self, call: Translated) -> EventWriter: ...


class TranslatedEndpoint:
    """The ASGI callable for one dialect."""

    def __init__(self, router: Router, metrics: Metrics, names: ModelNames, dialect: Dialect, *,
                 body_limit_bytes: int):
        self.router, self.metrics, self.names, self.dialect = router, metrics, names, dialect
        self.body_limit = body_limit_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        try:
            call = self.dialect.parse(await read_body(scope, receive, self.body_limit))
            model = self.names.resolve(call.model)
        except ApiError as err:
            await self._send_error(send, err)
            return
        except _ClientGone:
            return
        watch = _ClientWatch(receive)
        self.metrics.in_flight.inc()
        try:
            await (self._stream if call.stream else self._complete)(call, model, send, watch)
        except asyncio.CancelledError:
            if not watch.gone:
                raise  # the server is stopping, not the client leaving
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        finally:
            watch.close()
            self.metrics.in_flight.dec()

    async def _send_error(self, send: Any, err: ApiError) -> None:
        body = self.dialect.error_body(err)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers += [(k.encode(), v.encode()) for k, v in err.headers.items()]
        await send({"type": "http.response.start", "status": err.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _complete(self, call: Translated, model: str, send: Any, watch: _ClientWatch) -> None:
        try:
            result = await self.router.acomplete(call.messages, **call.options(model))
        except UsageError as exc:
            await self._send_error(send, _usage_error(exc))
            return
        except RouteError as exc:
            await self._send_error(send, error_for_failure(exc))
            return
        self.metrics.decided(result.decision)
        body = self.dialect.body(call, result.completion)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"x-route-answered-by", result.completion.backend.encode()), *_decision_headers(result.decision, result.downgrade)]
        watch.done = True
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _stream(self, call: Translated, model: str, send: Any, watch: _ClientWatch) -> None:
        await self.router.refresh()  # what other replicas learned, before the decision
        try:
            route_stream = self.router.astream(call.messages, **call.options(model))
        except UsageError as exc:
            await self._send_error(send, _usage_error(exc))
            return
        self.metrics.decided(route_stream.decision)
        async with contextlib.aclosing(route_stream.__aiter__()) as chunks:
            try:
                first = await _first_content(chunks)
            except RouteError as exc:
                await self._send_error(send, error_for_failure(exc))
                return
            headers = [*_SSE, *_decision_headers(route_stream.decision, route_stream.decision.downgrade)]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await self._pump(call, first, chunks, send, watch)

    async def _pump(self, call: Translated, first: TextChunk | FinalChunk | None, chunks: AsyncIterator[Chunk],
                    send: Any, watch: _ClientWatch) -> None:
        writer = self.dialect.writer(call)
        out = [writer.start()]
        final = first if isinstance(first, FinalChunk) else None
        if isinstance(first, TextChunk):
            out.append(writer.text(first.text))
        await send({"type": "http.response.body", "body": b"".join(out), "more_body": True})
        try:
            final = await forward_text(chunks, send, writer.text) or final
        except RouteError as exc:
            # Text already went out: the only honest signal left is the API's error event.
            watch.done = True
            await send({"type": "http.response.body", "body": writer.error(error_for_failure(exc))})
            return
        watch.done = True
        await send({"type": "http.response.body", "body": writer.finish(final.completion if final else None)})
