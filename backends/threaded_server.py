"""An ASGI app under uvicorn on a daemon thread, or in the foreground.

The simulator, `route serve` and `route engine serve` all run this way. The socket is bound
before uvicorn starts, so port 0 resolves to a real port at once and a busy port fails early
with a clear message instead of inside uvicorn's thread.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from backends.errors import UsageError

__all__ = ["ThreadedServer", "bind_socket"]

_DEFAULTS: dict[str, Any] = {
    "log_config": None,  # a library must not reconfigure the host program's logging
    "log_level": "warning",
    "access_log": False,  # a log line per request costs more than most requests
    "lifespan": "on",
    # uvicorn trusts X-Forwarded-For from loopback unless told otherwise: anyone on this machine
    # could then claim any address. A server that sits behind a proxy names it (runner.py).
    "proxy_headers": False,
}


def bind_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A TCP socket bound to host:port (0: any free port), not yet listening. `reuse_port` lets
    several sockets share the port, each taking its share of connections (Linux balances them)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port} ({exc.strerror}); "
                         "pick another --port or stop what is using it") from None
    return sock


class ThreadedServer:
    """`start()`/`stop()` (or `with`) for a thread; `run()` to serve in the foreground.

    `options` go to `uvicorn.Config` over quiet defaults (no access log, warnings only)."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0, name: str = "server", **options: Any):
        self.app = app
        self.host = host
        self.port = port
        self.name = name
        self._options = {**_DEFAULTS, **options}
        self._sock: socket.socket | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Server root, e.g. http://127.0.0.1:40123."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client or litellm's `api_base` wants: the root plus /v1."""
        return f"{self.url}/v1"

    def bind(self) -> ThreadedServer:
        """Claim the port now; idempotent."""
        if self._sock is None:
            self._sock = bind_socket(self.host, self.port)
            self.port = self._sock.getsockname()[1]
        return self

    def adopt(self, sock: socket.socket) -> ThreadedServer:
        """Serve on a socket bound elsewhere (a `route serve --workers` worker gets its parent's)."""
        self._sock = sock
        self.port = sock.getsockname()[1]
        return self

    def _uvicorn(self) -> Any:
        import uvicorn

        return uvicorn.Server(uvicorn.Config(self.app, host=self.host, port=self.port, **self._options))

    def run(self) -> None:
        """Serve in the foreground until interrupted (SIGINT/SIGTERM drain, then stop)."""
        self.bind()
        self._server = self._uvicorn()
        self._server.run(sockets=[self._sock])

    def start(self, timeout_s: float = 10.0) -> ThreadedServer:
        self.bind()
        self._server = self._uvicorn()
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name=self.name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._server.should_exit = True
                raise RuntimeError(f"{self.name} did not start on {self.url}")
            time.sleep(0.005)
        return self

    def begin_shutdown(self) -> None:
        """What SIGTERM does: stop accepting, let in-flight requests finish."""
        if self._server is not None:
            self._server.should_exit = True

    def stop(self, timeout_s: float = 10.0) -> None:
        self.begin_shutdown()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        self._server = self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
