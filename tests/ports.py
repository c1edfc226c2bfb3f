"""Loopback ports for tests: a free one for a server about to start, and one that refuses
connections. Tests never use a fixed port; the suite runs in parallel (pytest-xdist)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

__all__ = ["free_port", "refusing_port"]


def free_port() -> int:
    """A port nothing listens on now, for a server this test starts next (a subprocess that
    takes its port on the command line; servers in this process bind port 0 instead)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A port where connecting is refused: bound and never listening, for as long as the block
    runs, so no other test's server can take it meanwhile (a port merely closed could be)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
