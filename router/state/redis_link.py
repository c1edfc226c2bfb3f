"""One replica's link to the shared Redis, and the rule that makes Redis optional at run time:
every shared read or write goes through `RedisLink.call`, which answers the caller's local
fallback instead of raising while Redis is unreachable, warns once per outage, counts outages,
and tries Redis again every `retry_s` until it answers.

The client (redis.asyncio) is bound to the event loop it first ran on, so there is one per loop.
`redis` is imported on first use: a config without `state: backend: redis` never loads it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from backends.errors import ConfigError
from backends.per_loop import PerLoop
from backends.secrets import MissingVariable, expand

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from router.config import StateConfig

__all__ = ["RedisLink", "describe_target"]

_LOG = logging.getLogger(__name__)
_FIRST_CONTACT_S = 1.0  # seconds: a first connection (TCP, handshake, scripts) on a machine still starting up
T = TypeVar("T")


class RedisLink:
    """`call(op, fallback)` runs `op(client)` against Redis, or returns `fallback` while Redis is down."""

    def __init__(self, url: str, *, prefix: str = "route:", timeout_s: float = 0.25, retry_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic, max_connections: int = 64):
        self._url = url  # may hold a password: never logged, never in an error message
        self.prefix = prefix
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.max_connections = max_connections  # per event loop
        self._clock = clock
        self._clients: PerLoop[Redis] = PerLoop(self._connect)
        self.up = True
        self.outages = 0  # times Redis went from answering to not (a metric and `route doctor` read it)
        self.last_error: str | None = None
        self._retry_at = 0.0
        self._answered = False  # whether Redis has answered once: until then calls may take _FIRST_CONTACT_S

    @classmethod
    def from_config(cls, state: StateConfig, *, path: str | None = None, line: int | None = None) -> RedisLink:
        """`path` and `line`: where `state.url` is written, for the error when its variable is unset."""
        assert state.url is not None  # the config's validator requires it for backend: redis
        try:
            url = expand(state.url)
        except MissingVariable as exc:
            raise ConfigError(f"state.url refers to ${{{exc.name}}}, which is not set: export {exc.name}="
                              "redis://HOST:6379/0 (with the password in it if Redis needs one), or set "
                              "`state: {backend: local}` to keep learned state on this machine",
                              path=path, line=line) from None
        return cls(url, prefix=state.prefix, timeout_s=state.timeout_ms / 1000, retry_s=state.retry_ms / 1000)

    def key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    @property
    def target(self) -> str:
        """host:port, for messages and metrics (never the password)."""
        return describe_target(self._url)

    async def ping(self) -> str | None:
        """Why Redis cannot be reached now, or None when it answers; leaves `up` and the outage
        count alone (for `route doctor`)."""
        client = self._clients.get()  # the import is no part of Redis's answer time
        try:
            async with asyncio.timeout(max(self.timeout_s, _FIRST_CONTACT_S)):
                await client.ping()
        except Exception as exc:
            if not _is_unreachable(exc):
                return f"answered with an error ({_describe(exc)})"  # e.g. a wrong password
            return f"unreachable ({_describe(exc)})"
        return None

    def _connect(self) -> Redis:
        from redis.asyncio import BlockingConnectionPool, Redis

        # A burst of calls waits for a pooled connection (within the call's timeout) rather than
        # failing: the default pool raises past its size, which would read as Redis being down.
        # Socket limits as long as a first contact's: `call` holds every call to its own limit.
        socket_s = max(self.timeout_s, _FIRST_CONTACT_S)
        pool = BlockingConnectionPool.from_url(
            self._url, max_connections=self.max_connections, timeout=self.timeout_s, socket_timeout=socket_s,
            socket_connect_timeout=socket_s, health_check_interval=0, retry_on_timeout=False)
        return Redis.from_pool(pool)

    @property
    def usable(self) -> bool:
        """Up, or down long enough that the next call should try Redis again."""
        return self.up or self._clock() >= self._retry_at

    async def call(self, op: Callable[[Redis], Awaitable[T]], fallback: T) -> T:
        if not self.usable:
            return fallback
        # Made before the clock starts: the first one imports redis (0.1-0.4 s on a busy machine,
        # which both workers of `route serve --workers 2` read as Redis being down at start-up).
        client = self._clients.get()
        # The first contact also connects and loads scripts: it gets longer than a call does.
        limit = self.timeout_s if self._answered else max(self.timeout_s, _FIRST_CONTACT_S)
        try:
            async with asyncio.timeout(limit):
                result = await op(client)
        except Exception as exc:  # any failure to reach Redis means: run on local state
            if not _is_unreachable(exc):
                raise
            self._went_down(exc)
            return fallback
        self._answered = True
        if not self.up:
            self.up = True
            _LOG.warning("route: shared state is back: Redis answers again; sharing latency, breakers and limits")
        return result

    def _went_down(self, exc: BaseException) -> None:
        self._retry_at = self._clock() + self.retry_s
        self.last_error = _describe(exc)
        if self.up:
            self.up = False
            self.outages += 1
            _LOG.warning("route: shared state unavailable (%s); running on this replica's local state and "
                         "trying Redis again every %.1f s. Requests are not affected.", self.last_error, self.retry_s)

    async def aclose(self) -> None:
        for loop, client in list(self._clients.by_loop.items()):
            if not loop.is_closed() and loop is asyncio.get_running_loop():
                await client.aclose()
        self._clients.by_loop.clear()


def _is_unreachable(exc: BaseException) -> bool:
    from redis.exceptions import BusyLoadingError, ConnectionError, TimeoutError

    return isinstance(exc, (ConnectionError, TimeoutError, BusyLoadingError, OSError, asyncio.TimeoutError))


def _describe(exc: BaseException) -> str:
    """What went wrong, without the URL (which may hold a password)."""
    if isinstance(exc, asyncio.TimeoutError):
        return "no answer in time"
    return type(exc).__name__


def describe_target(url: str) -> str:
    """host:port of a Redis URL, for messages: never the password."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 6379}" if parts.scheme != "unix" else parts.path


