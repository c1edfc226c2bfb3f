"""router/server/coalesced.py: writes of one loop turn leave in one send, in order, and nothing
written is lost to a close; writes of later turns go in later sends."""

from __future__ import annotations

import asyncio

import pytest

from router.server.coalesced import CoalescedWrites

pytestmark = pytest.mark.unit


class _Recording(asyncio.Transport):
    """A transport that records what reaches it (the socket's side of the wrapper)."""

    def __init__(self) -> None:
        super().__init__()
        self.sends: list[bytes] = []
        self.events: list[str] = []
        self.closing = False

    def write(self, data) -> None:
        self.sends.append(bytes(data))
        self.events.append("send")

    def write_eof(self) -> None:
        self.events.append("eof")

    def can_write_eof(self) -> bool:
        return True

    def close(self) -> None:
        self.closing = True
        self.events.append("close")

    def abort(self) -> None:
        self.closing = True
        self.events.append("abort")

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name, default=None):
        return {"peername": ("127.0.0.1", 1234)}.get(name, default)


async def _turn() -> None:
    await asyncio.sleep(0)  # the loop runs what is ready, the flush among it
    await asyncio.sleep(0)


async def test_writes_of_one_turn_leave_in_one_send_in_order():
    inner = _Recording()
    writes = CoalescedWrites(inner, asyncio.get_running_loop())
    writes.write(b"HTTP/1.1 200 OK\r\n\r\n")
    writes.write(bytearray(b"data: 1\n\n"))
    writes.writelines([b"data: 2\n\n", memoryview(b"data: [DONE]\n\n")])
    assert inner.sends == [] and writes.get_write_buffer_size() == 19 + 9 + 9 + 14
    await _turn()
    assert inner.sends == [b"HTTP/1.1 200 OK\r\n\r\ndata: 1\n\ndata: 2\n\ndata: [DONE]\n\n"]
    writes.write(b"next")
    await _turn()
    assert inner.sends[1:] == [b"next"]
    assert writes.get_extra_info("peername") == ("127.0.0.1", 1234)  # the rest is the transport's


async def test_close_and_eof_send_what_was_held_first_and_abort_drops_it():
    inner = _Recording()
    writes = CoalescedWrites(inner, asyncio.get_running_loop())
    writes.write(b"last words")
    writes.write_eof()
    writes.write(b"bye")
    writes.close()
    assert inner.sends == [b"last words", b"bye"] and inner.events == ["send", "eof", "send", "close"]
    await _turn()  # the flushes scheduled by those writes find nothing left, and a closed transport
    assert inner.sends == [b"last words", b"bye"]

    aborted = _Recording()
    writes = CoalescedWrites(aborted, asyncio.get_running_loop())
    writes.write(b"never")
    writes.abort()
    await _turn()
    assert aborted.sends == [] and aborted.events == ["abort"]
