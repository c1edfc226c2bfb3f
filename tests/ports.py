"""Loopback ports for tests: a free one for a server about to start, one that refuses
connections, and waiting for a `route serve` process to answer on its port. Tests never use a
fixed port; the suite runs in parallel (pytest-xdist)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator

import httpx

__all__ = ["free_port", "refusing_port", "wait_until_serving"]


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


def wait_until_serving(proc: subprocess.Popen, url: str, limit_s: float = 60.0) -> None:
    """Until `url`/healthz answers 200, polling; fails the test when the process exits first or
    the limit passes (the limit only ends a failing test)."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, f"route serve exited ({proc.returncode}) before serving"
        assert time.monotonic() < deadline, f"route serve did not answer at {url} within {limit_s:.0f} s"
        time.sleep(0.05)
