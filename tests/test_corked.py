"""backends/corked.py: a request's head and body leave in one write; idle hang-ups are seen."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import httpcore

from backends.corked import CorkedStream
from backends.http_clients import ClientSet


@contextlib.asynccontextmanager
async def _served(serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
                  ) -> AsyncIterator[tuple[str, ClientSet]]:
    """A raw HTTP/1.1 server on a free loopback port, and a one-shard ClientSet to call it with."""
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    clients = ClientSet(shards=1)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", clients
    finally:
        await clients.aclose()
        server.close()
        await server.wait_closed()


class _Recording(httpcore.AsyncNetworkStream):
    """A network stream that records writes and answers reads from a script."""

    def __init__(self, sock: socket.socket | None = None, fail_writes: bool = False):
        self.writes: list[bytes] = []
        self.closed = False
        self._sock = sock
        self._fail = fail_writes

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return b"HTTP/1.1 204 No Content\r\n\r\n"

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._fail:
            raise httpcore.WriteError("peer went away")
        self.writes.append(buffer)

    async def aclose(self) -> None:
        self.closed = True

    def get_extra_info(self, info: str):
        return self._sock if info == "socket" else None


async def test_writes_are_held_until_the_next_read_and_leave_as_one():
    inner = _Recording()
    stream = CorkedStream(inner)
    await stream.write(b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n")
    await stream.write(b"")
    await stream.write(b"{}")
    assert inner.writes == []
    assert await stream.read(100) == b"HTTP/1.1 204 No Content\r\n\r\n"
    assert inner.writes == [b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"]
    await stream.read(100)
    assert len(inner.writes) == 1  # nothing held: nothing written again


async def test_a_failed_flush_is_ignored_like_httpcore_ignores_a_failed_request_write():
    stream = CorkedStream(_Recording(fail_writes=True))
    await stream.write(b"GET / HTTP/1.1\r\n\r\n")
    assert await stream.read(100) == b"HTTP/1.1 204 No Content\r\n\r\n"  # an early answer is still read


async def test_an_idle_socket_is_readable_only_once_the_peer_hung_up():
    ours, theirs = socket.socketpair()
    try:
        stream = CorkedStream(_Recording(sock=ours))
        assert stream.get_extra_info("is_readable") is False
        assert stream.get_extra_info("is_readable") is False
        theirs.close()
        assert stream.get_extra_info("is_readable") is True
        ours.close()
        assert stream.get_extra_info("is_readable") is True  # gone: treated as hung up
    finally:
        ours.close()


async def test_a_client_set_request_reaches_the_server_whole_and_reuses_its_connection():
    """Through ClientSet's real transport: head and body arrive, the connection is reused."""
    first_reads: list[bytes] = []
    connections = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        while True:
            data = await reader.read(65536)
            if not data:
                break
            first_reads.append(data)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        writer.close()

    async with _served(serve) as (url, clients):
        for _ in range(2):  # the second reuses the pooled connection
            async with clients.lease() as client:
                response = await client.post(f"{url}/v1/x", json={"a": 1})
            assert response.text == "ok"
    assert len(first_reads) == 2 and len(connections) == 1
    for data in first_reads:
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"POST /v1/x HTTP/1.1") and body == b'{"a":1}'


async def test_a_set_cookie_is_still_kept_by_the_client():
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        writer.write(b"HTTP/1.1 200 OK\r\nSet-Cookie: lb=7; Path=/\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    async with _served(serve) as (url, clients), clients.lease() as client:
        await client.get(f"{url}/")
        assert client.cookies.get("lb") == "7"
