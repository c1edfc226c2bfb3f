"""uvicorn's HTTP protocol with the limits a server facing real clients needs, and JSON errors.

uvicorn (0.54, httptools) has no request-head timeout, no head size limit, and answers a
malformed request with a plain-text 400. `route serve` runs this subclass instead:

- a connection beyond `max_connections` gets a 503 and is closed at once;
- a request head (request line and headers) must arrive within `header_timeout_s` of its
  first byte (or of the connection opening): else 408, closed. A slow-loris client holds a
  connection for that long, no longer;
- a head larger than `max_header_bytes` gets a 431 and is closed, before it is buffered whole;
- a request httptools cannot parse gets an OpenAI-shaped JSON 400 instead of plain text;
- what is written in one turn of the event loop leaves in one send (router/server/coalesced.py).

The body's own timeout is enforced where the body is read (router/server/endpoint.py), since only
the app knows when it wants the body. Every refusal here is `{"error": {...}}` with
`connection: close`.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from router.server.coalesced import CoalescedWrites
from router.server.errors import ASK_AGAIN_S, error_body
from router.server.limits import ServerLimits

__all__ = ["guarded_protocol"]


_HEAD_END = b"\r\n\r\n"
_LINGER_S = 2.0  # after a refusal, how long to keep draining a client that goes on sending


def _refusal(status: int, message: str, code: str) -> bytes:
    body = error_body(message, "invalid_request_error" if status < 500 else "server_error", code)
    # Every 503 says when to ask again (router/server/errors.py): a connection frees up any moment.
    wait = (f"retry-after: {math.ceil(ASK_AGAIN_S)}\r\nretry-after-ms: {round(ASK_AGAIN_S * 1000)}\r\n".encode()
            if status == 503 else b"")
    return b"".join([STATUS_LINE[status], b"content-type: application/json\r\n", wait,
                     b"content-length: " + str(len(body)).encode() + b"\r\n", b"connection: close\r\n\r\n", body])


def _hang_up(transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
    """Half-close after what was written; close for good when the client does, or after _LINGER_S."""
    if transport.can_write_eof():
        transport.write_eof()
        loop.call_later(_LINGER_S, transport.close)
    else:
        transport.close()


class _GuardedHttp(HttpToolsProtocol):
    limits: ServerLimits = ServerLimits()

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_since: float | None = None  # loop time the current head began; None between heads
        self._head_bytes = 0  # bytes of the current request head seen so far
        self._in_head = True  # between a request's first byte and its headers' end
        self._tail = b""  # the last bytes of the head so far, to find "\r\n\r\n" across reads
        self._discarding = False  # refused: what the client still sends is read and dropped

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.max_connections:
            self._discarding = True  # never joins `connections`; answered and closed like any refusal
            transport.write(_refusal(503, f"the server has {self.limits.max_connections} connections open, its "
                                          "limit (route serve --max-connections); retry shortly",
                                     "too_many_connections"))
            _hang_up(transport, self.loop)
            return
        # Writes of one loop turn leave in one send (router/server/coalesced.py).
        super().connection_made(CoalescedWrites(transport, self.loop))  # type: ignore[arg-type]
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        if self.transport is not None:  # None when refused in connection_made
            super().connection_lost(exc)

    # -- the request head -------------------------------------------------------------------

    # One timer per connection, not one per request: a head that ends only clears `_head_since`,
    # and the timer, when it fires, checks the head in progress (if any) and waits on for it.
    # On a keep-alive connection that is one timer every header_timeout_s rather than a timer
    # made and cancelled for every request.

    def _arm_head_timer(self) -> None:
        if self._head_since is None:  # a head already in progress (since the connection opened) keeps its start
            self._head_since = self.loop.time()
        if self._head_timer is None:
            self._head_timer = self.loop.call_at(self._head_since + self.limits.header_timeout_s, self._check_head)

    def _disarm_head_timer(self) -> None:
        self._head_since = None

    def _cancel_head_timer(self) -> None:
        self._head_since = None
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _check_head(self) -> None:
        self._head_timer = None
        if self._head_since is None:
            return  # between requests: the next head arms it again
        due = self._head_since + self.limits.header_timeout_s
        if self.loop.time() < due:
            self._head_timer = self.loop.call_at(due, self._check_head)
            return
        self._refuse(408, f"the request head did not arrive within {self.limits.header_timeout_s:g} s "
                          "(route serve --header-timeout)", "request_timeout")

    def _refuse(self, status: int, message: str, code: str) -> None:
        """Answer and hang up without losing the answer: closing a socket with unread input makes
        the kernel send a reset, which can destroy the reply in flight. So half-close after the
        reply, read and discard what the client still sends, and close when it does (or after
        _LINGER_S)."""
        if self.transport.is_closing() or self._discarding:
            return
        self._discarding = True
        self._cancel_head_timer()
        self.transport.write(_refusal(status, message, code))
        _hang_up(self.transport, self.loop)

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            return
        if self._in_head and self._head_too_large(data):
            self._refuse(431, f"the request head is larger than {self.limits.max_header_bytes} bytes "
                              "(route serve --max-header-bytes)", "request_header_too_large")
            return
        super().data_received(data)

    def _head_too_large(self, data: bytes) -> bool:
        """Counts head bytes; only the part of `data` before the head's end counts."""
        joined = self._tail + data
        end = joined.find(_HEAD_END)
        head_part = len(data) if end < 0 else max(0, end + len(_HEAD_END) - len(self._tail))
        self._head_bytes += head_part
        self._tail = joined[-3:]
        return self._head_bytes > self.limits.max_header_bytes

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._disarm_head_timer()
        self._in_head = False
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        # The next request on this keep-alive connection starts a new head.
        self._in_head, self._head_bytes, self._tail = True, 0, b""
        super().on_response_complete()

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, f"malformed HTTP request ({msg.rstrip('.')}); send a valid HTTP/1.1 request",
                     "invalid_http_request")


def guarded_protocol(limits: ServerLimits) -> type[HttpToolsProtocol]:
    """The protocol class to pass as uvicorn's `http`, bound to `limits`."""
    return type("GuardedHttp", (_GuardedHttp,), {"limits": limits})
