"""Run the `route serve` app under uvicorn: in the foreground for the CLI, or on a thread.

Binding beyond loopback requires a bearer token. Slow clients, huge heads and connection floods
are cut off by ServerLimits (router/server/http_guard.py). On SIGINT/SIGTERM uvicorn stops accepting,
lets in-flight requests (streams included) finish for up to `drain_timeout_s`, then the app's
shutdown closes backend connections and flushes the request log.
"""

from __future__ import annotations

import gc
import ipaddress
import os
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING

from backends.errors import UsageError
from backends.threaded_server import ThreadedServer
from router.server.limits import ServerLimits

if TYPE_CHECKING:
    from router.ports import RouterService

__all__ = ["RouteServer", "api_key_from_env", "is_loopback", "serve"]

DEFAULT_PORT = 4000
DEFAULT_DRAIN_S = 30.0
# The cyclic collector's first threshold for a serving process (CPython's default: 700). Each
# proxied request allocates a few thousand container objects (httpx, h11, asyncio), so by
# default a young-generation collection ran every few requests and the older ones often:
# 10-15% of `route serve`'s CPU per request (issue 13). Cycles are still collected, less often.
SERVE_GC_THRESHOLD = (50_000, 20, 100)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it could resolve anywhere


def api_key_from_env(host: str, env_name: str | None) -> str | None:
    """The bearer token `route serve` demands, from the environment variable `env_name`.
    Binding beyond loopback without one is refused."""
    if env_name is None:
        if not is_loopback(host):
            raise UsageError(
                f"--host {host} would expose the router beyond this machine without authentication; "
                "put a long random token in an environment variable and pass its name, e.g. "
                "`export ROUTE_API_KEY=$(openssl rand -hex 32)` and `route serve --host "
                f"{host} --api-key-env ROUTE_API_KEY`, or keep the default --host 127.0.0.1.")
        return None
    key = os.environ.get(env_name, "")
    if not key.strip():
        raise UsageError(f"--api-key-env names {env_name}, but that environment variable is not set or empty; "
                         f"export {env_name} with the token clients must send as `Authorization: Bearer ...`.")
    if len(key) < 16:
        raise UsageError(f"the token in {env_name} is shorter than 16 characters; use a long random one, "
                         "e.g. `openssl rand -hex 32`.")
    return key


def _options(drain_timeout_s: float, log_level: str, limits: ServerLimits, proxies: list[str]) -> dict:
    import uvicorn

    from router.server.http_guard import guarded_protocol

    return {
        # X-Forwarded-For only from the proxies the operator names (server.forwarded_allow_ips): a
        # client address anyone may claim would let a stranger dodge the wrong-key throttle or
        # aim it at a chosen tenant.
        "proxy_headers": bool(proxies),
        "forwarded_allow_ips": proxies or None,
        "log_config": None if log_level == "warning" else uvicorn.config.LOGGING_CONFIG,
        "log_level": log_level,
        "timeout_graceful_shutdown": drain_timeout_s,
        "timeout_keep_alive": 30,  # editors keep one connection open between requests
        "http": guarded_protocol(limits),  # head timeout and size, connection limit, JSON errors
    }


def _app(router: RouterService, api_key: str | None, body_limit_bytes: int | None, limits: ServerLimits,
         api_keys: Mapping[str, str] | None = None):
    from router.server.app import DEFAULT_BODY_LIMIT, create_app

    return create_app(router, api_key=api_key, body_limit_bytes=body_limit_bytes or DEFAULT_BODY_LIMIT,
                      body_timeout_s=limits.body_timeout_s, api_keys=api_keys)


def serve(router: RouterService, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, api_key: str | None = None,
          body_limit_bytes: int | None = None, drain_timeout_s: float = DEFAULT_DRAIN_S,
          limits: ServerLimits | None = None, api_keys: Mapping[str, str] | None = None,
          sock: socket.socket | None = None, access_log: bool = True) -> None:
    """Serve until interrupted (blocking). `api_key` is the token itself (see api_key_from_env);
    `api_keys` maps names to tokens (router/server/keys.py). `sock`, bound already, is served
    instead of binding host:port. `access_log`: one line per request on stderr."""
    if api_key is None and not api_keys and not is_loopback(host):
        raise UsageError(f"refusing to bind {host} without an API key; see `route serve --help` (--api-key-env)")
    limits = limits or ServerLimits()
    app = _app(router, api_key, body_limit_bytes, limits, api_keys)
    proxies = router.view.config.server.forwarded_allow_ips
    server = ThreadedServer(app, host=host, port=port, name="route-server",
                            **_options(drain_timeout_s, "info", limits, proxies))
    if sock is not None:
        server.adopt(sock)
    if access_log:
        _log_requests()
    _tune_gc()
    server.run()


def _log_requests() -> None:
    """The endpoint's `route.access` lines to stderr, in uvicorn's own format."""
    import logging

    from router.server.endpoint import AccessLines

    access = logging.getLogger("route.access")
    if not access.handlers:
        access.addHandler(AccessLines())
    access.setLevel(logging.INFO)
    access.propagate = False


def _tune_gc() -> None:
    """For a process that only serves (`route serve` and its workers; never a host process that
    embeds RouteServer): what was loaded to start is kept out of every later collection
    (gc.freeze), and collections run less often (SERVE_GC_THRESHOLD)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVE_GC_THRESHOLD)


class RouteServer(ThreadedServer):
    """The app on a loopback port (0 = any free port), served by uvicorn on a thread.

        with RouteServer(router) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="unused")
    """

    def __init__(self, router: RouterService, *, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None,
                 body_limit_bytes: int | None = None, drain_timeout_s: float = 5.0, limits: ServerLimits | None = None,
                 api_keys: Mapping[str, str] | None = None):
        limits = limits or ServerLimits()
        app = _app(router, api_key, body_limit_bytes, limits, api_keys)
        super().__init__(app, host=host, port=port, name="route-server",
                         **_options(drain_timeout_s, "warning", limits,
                                    router.view.config.server.forwarded_allow_ips))
