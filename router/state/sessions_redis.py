"""Sessions shared by every replica through Redis (`state: backend: redis`): one key per
session, `<prefix>session:<id>`, holding its state as JSON, expiring with the session.

A replica reads a session's state before deciding a call of it (`load`, one GET, only when
the call names a session) and writes it back after the answer (`save`, one SET, in a task of its
own: the client never waits for it). So the next call of a session lands on the same backend
whichever replica takes it. While Redis is down each replica keeps its own table (RedisLink's
rule: no request fails), and the states merge again as calls write them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from router.sessions import SessionState, SessionTable

if TYPE_CHECKING:
    from router.state.redis_link import RedisLink

__all__ = ["SharedSessions"]


class SharedSessions:
    """Session states in Redis, mirrored into this replica's `table`."""

    def __init__(self, link: RedisLink, table: SessionTable):
        self.link, self.table = link, table
        self._writes: set[asyncio.Task[Any]] = set()  # strong references until each is done

    async def load(self, key: str) -> None:
        """Adopt the fleet's state of session `key` when it has seen more of it than this replica."""
        raw = await self.link.call(lambda r: r.get(self.link.key("session", key)), None)
        shared = SessionState.from_json(raw) if raw else None
        if shared is None:
            return
        local = self.table.get(key)
        if local is None or shared.calls > local.calls or (shared.calls == local.calls and shared.tier > local.tier):
            self.table.put(key, shared)

    def save(self, key: str, state: SessionState) -> None:
        """Write `state` for the fleet, in the background."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a sync caller without a loop: the next call of the session writes it
            return
        payload, ttl = state.to_json(), max(1, int(self.table.ttl_s))
        task = loop.create_task(self.link.call(lambda r: r.set(self.link.key("session", key), payload, ex=ttl), None))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def aclose(self) -> None:
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
