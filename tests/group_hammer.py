"""A process of tests/test_group_state.py that takes from a group's bucket as fast as it can
(a module of its own, so a spawned process imports only what it uses)."""

from __future__ import annotations

import asyncio
from typing import Any

from policies.rate_limit import RateLimits
from router.state.group import GroupRateLimiter
from router.state.group_table import GroupTable

NOW = 1_000.0


def hammer(path: str, rpm: int, go: Any, queue: Any) -> None:
    """Wait for `go` (a barrier), then try `rpm` times; put how many were admitted on `queue`.
    Every process has the same frozen clock: nothing refills, so the counts add up exactly."""
    limiter = GroupRateLimiter({("backend", "a"): RateLimits(rpm=rpm)}, GroupTable(path, [("backend", "a")]),
                               clock=lambda: NOW)

    async def run() -> int:
        return sum([await limiter.take("a", 0) is None for _ in range(rpm)])

    go.wait()
    queue.put(asyncio.run(run()))
