"""A transport whose writes made in one turn of the event loop leave as one send.

uvicorn writes a response's head and every body part with a `transport.write` each, and each
is a send syscall at once: on loopback the sender pays for waking the reader, so the head of a
plain answer alone took 13% of `route serve`'s CPU per streamed request (py-spy, issue 13).
Here writes are held until the loop has run what is ready now, then sent together: a plain
answer's head and body in one send, a stream's head with its first text, its last text with
the [DONE] tail. Nothing waits on a timer; a busier loop gathers more into each send.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["CoalescedWrites"]


class CoalescedWrites:
    """Wraps a connection's transport for the protocol that writes to it; everything but
    writing is the wrapped transport's."""

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(bytes(data))

    def writelines(self, parts: Any) -> None:
        for part in parts:
            self.write(part)

    def flush(self) -> None:
        held, self._held = self._held, []
        if held and not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()  # what was written goes out before the close, as it would have unheld
        self._transport.close()

    def abort(self) -> None:
        self._held = []
        self._transport.abort()

    def is_closing(self) -> bool:
        # Asked once per response: spelled out, as a miss that reaches __getattr__ first raises
        # and catches an AttributeError.
        return self._transport.is_closing()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._held))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
