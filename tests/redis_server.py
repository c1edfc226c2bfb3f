"""A real, throwaway redis-server on a free loopback port, for the shared-state tests.

Locally a machine without redis-server skips those tests, naming the package to install; under
CI (the `CI` variable set) a missing binary fails them, so they can never silently not run.
`stop()` and `start()` let a test take Redis away mid-run and bring it back on the same port.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ports import free_port

__all__ = ["RedisServer", "redis_server", "require_binary"]

_START_TIMEOUT_S = 20.0


def require_binary(name: str, package: str) -> str:
    """The path of `name`, or skip (fail under CI) saying how to install it."""
    path = shutil.which(name) or next((str(p) for p in Path("/usr/lib/postgresql").glob(f"*/bin/{name}")), None)
    if path:
        return path
    message = f"needs {name}: apt-get install {package}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI must run these tests; .ci/run installs it)", pytrace=False)
    pytest.skip(message)



class RedisServer:
    def __init__(self, binary: str, workdir: Path):
        self.binary, self.workdir = binary, workdir
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        for _ in range(5):  # another process may take the free port between the probe and the bind
            self.process = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", str(self.workdir), "--protected-mode", "no", "--daemonize", "no"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_ready():
                return
            self.stop()
            self.port = free_port()
        raise RuntimeError("redis-server did not start")

    def _wait_ready(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh redis-server for one test: empty, on its own port, stopped afterwards."""
    binary = require_binary("redis-server", "redis-server")
    workdir = tmp_path / "redis"
    workdir.mkdir()
    server = RedisServer(binary, workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()
