"""`state: backend: redis`: learned latency and breaker verdicts shared by every replica that
names the same Redis and prefix.

Before a decision (at most every `state.refresh_ms`) a replica reads, in one pipelined round trip,
every backend's latency state and breaker keys, and adopts them (plus its own samples not yet
saved); concurrent decisions share one read. Its fresh samples are merged in by a Lua script on
each flush (every `routing.latency.flush_interval_ms`, on a timer, so a replica that goes quiet
publishes too; router/state/latency_merge.py), its breaker verdicts as they happen
(router/state/shared_breakers.py).

With Redis unreachable nothing fails: every call falls back (router/state/redis_link.py), the
replica decides on its own learned state and breakers, and keeps the samples it could not save;
when Redis answers again the next flush merges them and the next refresh adopts the fleet's view.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from router.state.base import SharedState, StateStatus
from router.state.latency_merge import RedisLatency
from router.state.redis_link import RedisLink
from router.state.shared_breakers import SharedBreakers

if TYPE_CHECKING:
    from policies.breaker import BreakerBoard
    from router.config import StateConfig
    from router.latency_tracker import LatencyTracker

__all__ = ["RedisState"]


class RedisState(SharedState):
    kind = "redis"

    def __init__(self, link: RedisLink, *, refresh_s: float = 0.5, clock: Callable[[], float] = time.monotonic):
        self.link = link
        self.refresh_s = refresh_s
        self._clock = clock  # seconds, monotonic: when the last refresh began
        self.latency_sink = RedisLatency(link)
        self._latency: LatencyTracker | None = None
        self.breakers: SharedBreakers | None = None
        self._backends: list[str] = []
        self._refreshed_at = -math.inf
        self._refreshing: asyncio.Task[None] | None = None
        self._publisher: asyncio.Task[None] | None = None  # flushes learned latency on a timer

    @classmethod
    def from_config(cls, state: StateConfig) -> RedisState:
        return cls(RedisLink.from_config(state), refresh_s=state.refresh_ms / 1000)

    def attach(self, latency: LatencyTracker, breakers: BreakerBoard) -> str | None:
        self._latency = latency
        self._backends = list(latency.models)  # the configured backends (a consortium has no breaker)
        self.latency_sink.identity = latency.identity
        latency.attach_sink(self.latency_sink)
        self.breakers = SharedBreakers(self.link, breakers, refresh_s=self.refresh_s, identity=latency.identity)
        breakers.on_change = self.breakers.changed
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self._first_look())  # so `route models` and `--explain` show the fleet's view too
        return None

    async def _first_look(self) -> None:
        try:
            await self.refresh(force=True)
        finally:
            await self.link.aclose()  # this loop ends here, and its client with it

    async def refresh(self, *, force: bool = False) -> None:
        if self._latency is None:
            return
        loop = asyncio.get_running_loop()
        self._publish_on_a_timer(loop)
        task = self._refreshing
        if task is not None and not task.done() and task.get_loop() is loop:
            await asyncio.shield(task)  # one read serves every decision waiting for it
            if not force:
                return
        if not force and self._clock() - self._refreshed_at < self.refresh_s:
            return
        self._refreshed_at = self._clock()
        self._refreshing = task = loop.create_task(self._refresh())
        await asyncio.shield(task)

    async def _refresh(self) -> None:
        assert self._latency is not None and self.breakers is not None
        latency, breakers = self._latency, self.breakers
        names = list(latency.models)
        before = breakers.snapshot()

        async def read(r: Any) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.mget([self.latency_sink.key(name) for name in names])
            breakers.commands(pipe, self._backends)
            return await pipe.execute()

        replies = await self.link.call(read, None)
        if replies is None:
            return  # Redis is down: decide on this replica's own state
        latency.adopt_states(self.latency_sink.changed(names, replies[0]))
        await breakers.reconcile(self._backends, replies[1:], before)

    def _publish_on_a_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        """A request's end flushes what it taught once the flush interval has passed since the
        last flush; after a burst nothing comes to do so. This task flushes every interval on the
        loop that serves (started by the first decision on it), so what a replica learned reaches
        Redis however quiet it goes. A flush with nothing new makes no Redis call."""
        assert self._latency is not None
        interval = self._latency.flush_interval_s
        task = self._publisher
        if interval <= 0 or (task is not None and not task.done() and task.get_loop() is loop):
            return  # 0: every request's end flushes already
        self._publisher = loop.create_task(self._publish_every(interval), name="route-latency-publisher")

    async def _publish_every(self, interval_s: float) -> None:
        assert self._latency is not None
        while True:
            await asyncio.sleep(interval_s)
            await self._latency.aflush()  # Redis down: the samples are kept for the next one

    async def _stop_publishing(self) -> None:
        task, self._publisher = self._publisher, None
        if task is None or task.done():
            return
        task.cancel()
        if task.get_loop() is asyncio.get_running_loop():
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def flush(self) -> None:
        if self._latency is not None:
            await self._latency.aflush()
        if self.breakers is not None:
            await self.breakers.settle()

    def status(self) -> StateStatus:
        return StateStatus(self.kind, shared=self.link.up, target=self.link.target, outages=self.link.outages)

    async def aclose(self) -> None:
        try:
            await self._stop_publishing()
            await self.flush()
        finally:
            await self.link.aclose()
