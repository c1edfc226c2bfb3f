"""One `route serve` process: a router served on a socket it is given.

`route serve` in one process builds its router (router/serving.py) and calls `run_server`
directly. Under `--workers N` each worker is `python -m router.serving`: the parent writes a
ServeSpec as one JSON line to its stdin and passes the listening socket's descriptor; the pipe
then stays open, and its end (the parent gone, even by SIGKILL) drains and stops the worker. A
second pipe tells the parent the worker is ready; the ServeSpec names the table of limits and
breakers the workers share (router/state/group.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router.ports import RouterService

__all__ = ["ServeSpec", "run_server", "stop_when_parent_goes", "tell_ready"]


@dataclass(frozen=True, slots=True)
class ServeSpec:
    """What a worker needs to serve as the parent would: plain values, sent as JSON. The bearer
    token is not among them: each worker reads it from the environment variable named."""

    config: str  # the config file the parent loaded, so every worker reads the same one
    host: str = "127.0.0.1"
    api_key_env: str | None = None
    keep_log: bool = True
    max_body: int = 16 * 1024 * 1024
    drain_s: float = 30.0
    limits: dict[str, Any] = field(default_factory=dict)  # ServerLimits' fields
    quiet: bool = False  # no line per request on stderr
    fd: int = -1  # the listening socket, inherited
    group_state: str | None = None  # the supervisor's table of shared limits and breakers (router/state/group.py)
    ready_fd: int = -1  # a pipe to the supervisor: one byte once the router is built and serving starts

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


def run_server(router: RouterService, spec: ServeSpec, sock: socket.socket) -> None:
    """Serve `router` on `sock` until SIGINT/SIGTERM (drain, then stop)."""
    from router.server.keys import server_keys
    from router.server.limits import ServerLimits
    from router.server.runner import serve

    keys = server_keys(router.view.loaded, spec.host, spec.api_key_env)  # each worker reads them from its environment
    serve(router, host=spec.host, api_keys=keys, body_limit_bytes=spec.max_body, drain_timeout_s=spec.drain_s,
          limits=ServerLimits(**spec.limits), sock=sock, access_log=not spec.quiet)


def tell_ready(fd: int) -> None:
    """The supervisor replaces a worker that dies after this, and gives up on one that dies
    before it (its config or its start is broken: a replacement would die the same way)."""
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.write(fd, b"1")
            os.close(fd)


def stop_when_parent_goes() -> None:
    sys.stdin.buffer.read()  # returns at EOF: the parent closed the pipe or died
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's own handler: drain, then stop
