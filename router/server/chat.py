"""POST /v1/chat/completions as a raw ASGI app: the proxy's hot path.

No Request/Response objects here: the body is read with a size and a time limit, validated
against the API's schema (router/server/protocol.py, via parse.py), routed, and the answer is
written as pre-encoded SSE chunks. A watcher task
listens for the client going away and cancels the handler, which closes the upstream stream
(the backend's `aclosing` context shuts its HTTP response), so an abandoned request stops
costing tokens at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from backends.errors import RouteError, Unsupported, UsageError
from backends.types import Chunk, DraftChunk, FinalChunk, TextChunk
from router.decision import Decision, Downgrade
from router.server.models import ModelNames
from router.server.parse import ChatCall, parse_chat
from router.server.wire import (
    DONE,
    ApiError,
    ChunkWriter,
    completion_body,
    degraded_header,
    error_for_failure,
    route_facts,
)

if TYPE_CHECKING:
    from router.core import Router
    from router.server.metrics import Metrics

__all__ = ["ChatCompletions", "read_body", "send_error"]

_JSON = (b"content-type", b"application/json")
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


async def read_body(scope: dict, receive, limit: int, timeout_s: float | None = None) -> bytes:
    """The whole request body: 413 as soon as it is known to exceed `limit` bytes, 408 when it
    has not all arrived `timeout_s` seconds after the head (a slow client holds no more)."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise _too_large(limit)
    try:
        async with asyncio.timeout(timeout_s):
            return await _read(receive, limit)
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {timeout_s:g} s (route serve --body-timeout)",
                       code="request_timeout", headers={"connection": "close"}) from None


async def _read(receive, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone  # nobody to answer
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        parts.append(chunk)
        if not message.get("more_body"):
            return b"".join(parts)


class _ClientGone(Exception):
    """The client disconnected before its request body arrived."""


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than the server's limit of {limit} bytes; "
                         "send less context, or start `route serve` with a larger --max-body",
                    code="request_too_large")


async def send_error(send, err: ApiError) -> None:
    body = err.body()
    headers = [_JSON, (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in err.headers.items()]
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _ClientWatch:
    """Cancels the handler's task when the client disconnects before the answer is complete."""

    __slots__ = ("gone", "done", "_task", "_watcher")

    def __init__(self, receive):
        self.gone = False
        self.done = False  # set before the last send: a disconnect after it is the normal end
        task = asyncio.current_task()
        assert task is not None  # constructed inside the request handler's task
        self._task = task
        self._watcher = asyncio.get_running_loop().create_task(self._watch(receive))

    async def _watch(self, receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        if not self.done:
            self.gone = True
            self._task.cancel()

    def close(self) -> None:
        self.done = True
        self._watcher.cancel()


def _decision_headers(decision: Decision, downgrade: Downgrade | None) -> list[tuple[bytes, bytes]]:
    """`downgrade`: what answered, for a plain call; for a stream (headers go out with the first
    text) the planned one."""
    headers = [(b"x-route-backend", decision.chosen.encode()),
               (b"x-route-tier", (decision.tier or ("forced" if decision.forced else "-")).encode()),
               (b"x-route-candidates", ",".join(decision.candidates).encode())]
    if decision.score is not None:
        headers.append((b"x-route-score", f"{decision.score.value:.4f}".encode()))
    if downgrade is not None:  # a weaker tier than the prompt's answers: never silently
        headers.append((b"x-route-downgraded", downgrade.header().encode()))
    return headers


async def _first_content(chunks) -> TextChunk | FinalChunk | None:
    """The first text (or the final chunk of an empty answer); diffusion drafts are skipped."""
    async for chunk in chunks:
        if not isinstance(chunk, DraftChunk):
            return chunk
    return None


class ChatCompletions:
    """The ASGI callable. `router.source` should be "server" so the request log says so."""

    def __init__(self, router: Router, metrics: Metrics, *, body_limit_bytes: int,
                 body_timeout_s: float | None = None):
        self.router = router
        self.metrics = metrics
        self.body_limit = body_limit_bytes
        self.body_timeout_s = body_timeout_s
        self._models = ModelNames(router)  # names, and the config's aliases

    async def __call__(self, scope: dict, receive, send) -> None:
        try:
            call = parse_chat(await read_body(scope, receive, self.body_limit, self.body_timeout_s))
            model = self._model_for(call)
        except ApiError as err:
            await send_error(send, err)
            return
        except RouteError as exc:  # e.g. a backend that cannot be built from its config
            await send_error(send, ApiError(400 if exc.exit_code == 2 else 502, str(exc),
                                            kind="invalid_request_error" if exc.exit_code == 2 else "server_error",
                                            code="invalid_request" if exc.exit_code == 2 else "upstream_error"))
            return
        except _ClientGone:
            return
        watch = _ClientWatch(receive)
        self.metrics.in_flight.inc()
        try:
            if call.stream:
                await self._stream(call, model, send, watch)
            else:
                await self._complete(call, model, send, watch)
        except asyncio.CancelledError:
            if not watch.gone:
                raise  # the server is stopping, not the client leaving
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        finally:
            watch.close()
            self.metrics.in_flight.dec()

    # -- choosing ---------------------------------------------------------------------------

    def _model_for(self, call: ChatCall) -> str:
        """The model to route with: 404 for unknown names. What the request needs (tools, images,
        context) the router checks itself when it decides."""
        return self._models.resolve(call.model)

    def _options(self, call: ChatCall, model: str) -> dict[str, Any]:
        return dict(model=model, max_tokens=call.max_tokens, temperature=call.temperature, stop=call.stop,
                    extra=call.extra)

    # -- answering --------------------------------------------------------------------------

    async def _complete(self, call: ChatCall, model: str, send, watch: _ClientWatch) -> None:
        try:
            result = await self.router.acomplete(call.messages, **self._options(call, model))
        except UsageError as exc:
            await send_error(send, _usage_error(exc))
            return
        except RouteError as exc:
            await send_error(send, error_for_failure(exc))
            return
        self.metrics.decided(result.decision)
        downgrade = result.downgrade
        route = {**({"downgraded": downgrade.as_dict()} if downgrade is not None else {}),
                 **(route_facts(result.completion) or {})}
        body = completion_body(call.model, result.completion, route or None)
        headers = [_JSON, (b"content-length", str(len(body)).encode()),
                   (b"x-route-answered-by", result.completion.backend.encode()),
                   *_decision_headers(result.decision, downgrade), *degraded_header(result.completion)]
        watch.done = True
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _stream(self, call: ChatCall, model: str, send, watch: _ClientWatch) -> None:
        await self.router.refresh()  # what other replicas learned, before the decision
        try:
            route_stream = self.router.astream(call.messages, **self._options(call, model))
        except UsageError as exc:
            await send_error(send, _usage_error(exc))
            return
        decision = route_stream.decision
        self.metrics.decided(decision)
        # A client that leaves cancels this task; RouteStream reports that outcome to the log itself.
        async with contextlib.aclosing(route_stream.__aiter__()) as chunks:
            await self._pump(call, decision, chunks, send, watch)

    async def _pump(self, call: ChatCall, decision: Decision, chunks, send, watch: _ClientWatch) -> None:
        writer = ChunkWriter(call.model)
        # Wait for the first content before answering: until then a failure of every backend can
        # still be a proper HTTP error status rather than an error event inside a 200 stream.
        try:
            first = await _first_content(chunks)
        except RouteError as exc:
            await send_error(send, error_for_failure(exc))
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*_SSE, *_decision_headers(decision, decision.downgrade)]})
        out = [writer.role()]
        final: FinalChunk | None = first if isinstance(first, FinalChunk) else None
        if isinstance(first, TextChunk):
            out.append(writer.content(first.text))
        await send({"type": "http.response.body", "body": b"".join(out), "more_body": True})
        try:
            final = await forward_text(chunks, send, writer.content) or final
        except RouteError as exc:
            # Text already went out: the only honest signal left is an error event (the openai SDK raises it).
            watch.done = True
            await send({"type": "http.response.body", "body": writer.error(error_for_failure(exc))})
            return
        await self._finish_stream(call, writer, final, send, watch)

    @staticmethod
    async def _finish_stream(call: ChatCall, writer: ChunkWriter, final: FinalChunk | None, send,
                             watch: _ClientWatch) -> None:
        tail = []
        reason = "stop"
        if final is not None:
            c = final.completion
            reason = c.finish_reason or "stop"
            if c.tool_calls:
                tail.append(writer.tool_calls(c.tool_calls))
                reason = c.finish_reason or "tool_calls"
        tail.append(writer.finish(reason, route_facts(final.completion) if final is not None else None))
        if call.include_usage and final is not None:
            tail.append(writer.usage(final.completion))
        tail.append(DONE)
        watch.done = True
        await send({"type": "http.response.body", "body": b"".join(tail)})


_NEED_PARAMS = {"tools": "tools", "vision": "messages", "context": "messages"}


def _usage_error(exc: UsageError) -> ApiError:
    """A 400 for what the caller asked: for a request no backend can take, which need and where."""
    if isinstance(exc, Unsupported):
        return ApiError(400, str(exc), code=f"{exc.need}_not_supported", param=_NEED_PARAMS.get(exc.need))
    return ApiError(400, str(exc), code="invalid_request")


async def forward_text(chunks: AsyncIterator[Chunk], send: Any, encode: Callable[[str], bytes]) -> FinalChunk | None:
    """Send each TextChunk as `encode` writes it for the wire, to the end of the stream; the
    FinalChunk. Read to the end even when the first chunk was already the final one (a stream
    that is only a tool call): the route stream logs its outcome when it ends, and one closed
    early is logged as the client going away. Every protocol's stream uses this."""
    final: FinalChunk | None = None
    async for chunk in chunks:
        if isinstance(chunk, TextChunk):
            await send({"type": "http.response.body", "body": encode(chunk.text), "more_body": True})
        elif isinstance(chunk, FinalChunk):
            final = chunk
    return final
