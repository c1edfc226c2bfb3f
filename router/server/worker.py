"""One `route serve` process: the router built from config, served on a socket it is given.

`route serve` in one process calls `serving_router` and `run_server` directly. Under
`--workers N` each worker is `python -m router.server.worker`: the parent writes a ServeSpec
as one JSON line to its stdin and passes the listening socket's descriptor; the pipe then
stays open, and its end (the parent gone, even by SIGKILL) drains and stops the worker. A
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
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router.config_loader import LoadedConfig
    from router.core import Router

__all__ = ["ServeSpec", "run_server", "serving_router"]


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


def serving_router(loaded: LoadedConfig, *, keep_log: bool, api_key_env: str | None,
                   group: str | None = None) -> Router:
    """The Router a server process serves. `group`: the table a `--workers` supervisor shares
    among its workers (limits and breakers), used unless Redis shares them already."""
    from router.core import Router

    router = Router(loaded, source="server", log=None if keep_log else False)
    for variable in [api_key_env, *(k.env for k in loaded.config.server.keys.values())]:
        if variable:
            router.redactor.add(variable)  # clients' keys: never echoed either
    redis = loaded.config.state.backend == "redis"
    if group is not None and not redis:
        from router.state.group import join_group

        join_group(router, group, latency=keep_log)
    elif keep_log or redis:  # Redis needs no local file
        # What earlier runs learned about latency; the app's shutdown (router.aclose) saves it back.
        router.persist()
    return router


def run_server(router: Router, spec: ServeSpec, sock: socket.socket) -> None:
    """Serve `router` on `sock` until SIGINT/SIGTERM (drain, then stop)."""
    from router.server.keys import server_keys
    from router.server.limits import ServerLimits
    from router.server.runner import serve

    keys = server_keys(router.loaded, spec.host, spec.api_key_env)  # each worker reads them from its environment
    serve(router, host=spec.host, api_keys=keys, body_limit_bytes=spec.max_body, drain_timeout_s=spec.drain_s,
          limits=ServerLimits(**spec.limits), sock=sock, access_log=not spec.quiet)


def _tell_ready(fd: int) -> None:
    """The supervisor replaces a worker that dies after this, and gives up on one that dies
    before it (its config or its start is broken: a replacement would die the same way)."""
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.write(fd, b"1")
            os.close(fd)


def _stop_when_parent_goes() -> None:
    sys.stdin.buffer.read()  # returns at EOF: the parent closed the pipe or died
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's own handler: drain, then stop


def main() -> int:
    from backends.errors import RouteError
    from router.config_loader import load_config

    spec = ServeSpec(**json.loads(sys.stdin.buffer.readline()))
    sock = socket.socket(fileno=spec.fd)
    threading.Thread(target=_stop_when_parent_goes, name="route-worker-parent", daemon=True).start()
    try:
        router = serving_router(load_config(spec.config), keep_log=spec.keep_log, api_key_env=spec.api_key_env,
                                group=spec.group_state)
        _tell_ready(spec.ready_fd)
        run_server(router, spec, sock)
    except RouteError as exc:
        print(f"route serve worker {os.getpid()}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # uvicorn re-raises the SIGINT that forced it to stop
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
