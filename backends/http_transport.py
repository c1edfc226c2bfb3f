"""The HTTP transport of the kinds that speak a provider's API over HTTP (openai, anthropic): one
POST, its error statuses and connection failures in our error tree, and an SSE body as the data
of its events. A backend kind on top of it only translates: its request body, its headers, and
the events it reads back (as httpx puts a transport behind its client).

Connections come from the per-loop pooled session of backends/http_session.py. A response's
connection goes back to the pool only when its body was read to the end, so a stream is read
past its last event (`_drain`); leaving early closes the connection, which is also how a
cancelled call stops the upstream generation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from backends.errors import BackendError, BackendUnavailable, MalformedResponse, Where
from backends.faults import error_for_status, failed_writing, scrub
from backends.http_errors import is_transport_error, translate_transport_error
from backends.http_session import Sessions, sse_data

if TYPE_CHECKING:
    import aiohttp

__all__ = ["HttpTransport", "Reply", "check_finished", "json_event", "json_events"]

_CONNECT_CAP_S = 10.0  # connecting alone never takes longer than this, whatever the deadline
_DRAIN_S = 0.05  # how long to read past the last event for the connection's sake


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
        """The `data:` payloads of the SSE events (backends/http_session.py `sse_data`), in
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
