"""An httpcore network backend whose streams send a request head and body in one write.

httpcore writes a request's head and its body separately, and each write on loopback or a LAN
wakes the upstream server for half a request: two send syscalls and two wake-ups per call,
the largest single cost left in `route serve`'s upstream call (py-spy, issue 13). These
streams hold what is written until the next read (a request is always followed by reading its
response) and send it then, as one write.

httpcore ignores a write error while sending a request, so that a server that answered early
and closed can still be read from; a held write that fails when flushed is ignored the same
way, and the read that follows reports what happened.

The streams also keep their socket: httpcore asks every idle pooled connection whether its
socket is readable (a hang-up) on every request, and anyio builds a dict of attribute getters
to find the socket each time it is asked (4% of the server's CPU, py-spy, issue 13).
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
from httpcore import AsyncNetworkBackend, AsyncNetworkStream

__all__ = ["CorkedBackend", "CorkedStream"]


class CorkedStream(AsyncNetworkStream):
    __slots__ = ("_inner", "_held", "_timeout", "_socket", "_poll")

    def __init__(self, inner: AsyncNetworkStream):
        self._inner = inner
        self._held: list[bytes] = []
        self._timeout: float | None = None
        self._socket: socket.socket | None = inner.get_extra_info("socket")
        self._poll: select.poll | None = None  # registered with the socket once, when first asked

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._held.append(buffer)
            self._timeout = timeout

    async def _flush(self) -> None:
        held, self._held = self._held, []
        try:
            await self._inner.write(held[0] if len(held) == 1 else b"".join(held), self._timeout)
        except httpcore.WriteError:
            pass  # as httpcore does: the read that follows says what became of the request

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._held:
            await self._flush()
        return await self._inner.read(max_bytes, timeout)

    async def aclose(self) -> None:
        self._held = []  # a request never read from is abandoned anyway
        await self._inner.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> AsyncNetworkStream:
        if self._held:
            await self._flush()
        return CorkedStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def _readable(self) -> bool:
        """httpcore's test for an idle connection the server closed (httpcore/_utils.py): readable
        means the next read returns b"" (or the socket is gone)."""
        sock = self._socket
        if sock is None or sock.fileno() < 0:
            return True
        if self._poll is None:
            self._poll = select.poll()
            self._poll.register(sock, select.POLLIN)
        return bool(self._poll.poll(0))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return self._readable()
        if info == "socket":
            return self._socket
        return self._inner.get_extra_info(info)


class CorkedBackend(AsyncNetworkBackend):
    """httpcore's default (auto-detected) backend, with CorkedStream connections."""

    def __init__(self, inner: AsyncNetworkBackend | None = None):
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> AsyncNetworkStream:
        return CorkedStream(await self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> AsyncNetworkStream:
        return CorkedStream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
