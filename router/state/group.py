"""`route serve --workers N` without Redis: the workers are one process group with one state.

Rate-limit buckets and breaker verdicts live in the supervisor's table (router/state/group_table.py),
which every worker maps; learned latency stays in the local SQLite store, as for any process of
the machine. So `rpm: 60` admits 60 a minute whichever worker is asked, a backend one worker's
breaker opened is skipped by all of them, and once its cooldown ends one worker probes it for the
group -- as replicas do through Redis (router/state/shared_breakers.py), with a lock instead of
keys with expiry times. A worker that replaces a dead one joins the same table: the limits hold
across the replacement too.

`open_group(config, path)` is what a worker's router shares (router/serving.py builds it so). Times are `time.monotonic()`, one clock
for every process of the machine.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from policies.rate_limit import Buckets, Limited, RateLimits
from router.state.base import StateStatus
from router.state.group_table import GroupTable, GroupUnavailable, Slot
from router.state.local import LocalState
from router.state.rate_limits import Kind, RateLimiter, limits_from_config

if TYPE_CHECKING:
    from policies.breaker import BreakerBoard, State
    from router.config import Config
    from router.latency_tracker import LatencyTracker

__all__ = ["GroupBreakers", "GroupRateLimiter", "GroupShare", "GroupState", "group_slots", "open_group"]

_LOG = logging.getLogger(__name__)
_NAN = math.nan


def group_slots(config: Config) -> list[Slot]:
    """The table's slots for a config: every limit, then every backend's breaker."""
    limits: list[Slot] = sorted(limits_from_config(config))
    return [*limits, *(("breaker", name) for name in sorted(config.backends))]


class GroupRateLimiter(RateLimiter):
    """Buckets in the group's table: each take reads the bucket, takes and writes it back under
    the table's lock, so every worker draws from one bucket per backend (and per API key)."""

    def __init__(self, limits: Mapping[tuple[Kind, str], RateLimits], table: GroupTable, *,
                 clock: Callable[[], float] | None = None):
        super().__init__(limits, clock=clock)
        self.table = table

    def _load(self, kind: Kind, name: str, now: float) -> Buckets | None:
        buckets = self._bucket(kind, name)
        if buckets is None:
            return None
        rpm_level, rpm_at, tpm_level, tpm_at = self.table.read((kind, name))
        for bucket, level, at in ((buckets.rpm, rpm_level, rpm_at), (buckets.tpm, tpm_level, tpm_at)):
            if bucket is not None:
                bucket.level, bucket.at = (bucket.limit, now) if math.isnan(level) else (level, at)
        return buckets

    def _store(self, kind: Kind, name: str, buckets: Buckets) -> None:
        rpm, tpm = buckets.rpm, buckets.tpm
        self.table.write((kind, name), (rpm.level if rpm else _NAN, rpm.at if rpm else _NAN,
                                        tpm.level if tpm else _NAN, tpm.at if tpm else _NAN))

    def peek(self, name: str, tokens: int, kind: Kind = "backend") -> Limited | None:
        now = self._now()
        with self.table.locked():
            buckets = self._load(kind, name, now)
        return None if buckets is None else buckets.peek(tokens, now)

    def _take_here(self, kind: Kind, name: str, tokens: int) -> Limited | None:
        now = self._now()
        with self.table.locked():
            buckets = self._load(kind, name, now)
            if buckets is None:
                return None
            refused = buckets.take(tokens, now)
            if refused is None:
                self._store(kind, name, buckets)
        return refused

    async def settle(self, name: str, charged: int, used: int, kind: Kind = "backend") -> None:
        now = self._now()
        with self.table.locked():
            buckets = self._load(kind, name, now)
            if buckets is not None and buckets.correction(charged, used):
                buckets.settle(charged, used, now)
                self._store(kind, name, buckets)


class GroupBreakers:
    """Breaker verdicts in the group's table. Failures are counted per worker; a verdict is
    shared. A backend's record: (open until, tripped, probing worker's pid, probe until).

    open until   set when a worker's breaker opens: every worker holds its own open until then
    tripped      1 from an opening until a probe succeeds: after `open until`, the backend is
                 half-open for the group, and one worker probes it
    probe        the worker that claimed the probe, until when: a claim nobody used (no request
                 went there) runs out after a cooldown, and another worker may claim it
    """

    def __init__(self, table: GroupTable, board: BreakerBoard, *, clock: Callable[[], float] = time.monotonic):
        self.table = table
        self.board = board
        self._clock = clock
        self.me = float(os.getpid())
        self.names = [name for kind, name in table.slots if kind == "breaker"]

    def changed(self, name: str, state: State) -> None:
        """The board's listener: this worker's calls opened or closed `name`'s breaker."""
        if ("breaker", name) not in self.table:
            return
        record = (0.0, 0.0, 0.0, 0.0)
        if state == "open":
            record = (self._clock() + self.board[name].remaining_s(), 1.0, 0.0, 0.0)
        with self.table.locked():
            self.table.write(("breaker", name), record)

    def reconcile(self) -> None:
        """Apply the group's verdicts to this worker's breakers (before a decision)."""
        now = self._clock()
        cooldown = self.board.settings.cooldown_s
        with self.table.locked():
            for name in self.names:
                open_until, tripped, owner, probe_until = self.table.read(("breaker", name))
                breaker = self.board[name]
                if open_until > now:
                    breaker.hold_open(open_until - now)
                elif not tripped:
                    if breaker.state != "closed":
                        breaker.reset()  # a probe elsewhere succeeded
                elif owner in (0.0, self.me) or probe_until <= now:
                    if owner != self.me or probe_until <= now:  # claim the probe for the group
                        self.table.write(("breaker", name), (open_until, tripped, self.me, now + cooldown))
                    if breaker.state != "half-open":  # (a probe in flight keeps its slot)
                        breaker.hold_open(0)  # half-open here: this worker's next call is the probe
                else:
                    breaker.hold_open(probe_until - now)  # another worker probes


class GroupState(LocalState):
    """`state: local` for a worker of the group: latency in the local store (when `latency`),
    breakers through the group's table."""

    def __init__(self, config: Config, table: GroupTable, *, latency: bool):
        super().__init__(config)
        self.table = table
        self._use_store = latency
        self.breakers: GroupBreakers | None = None

    def attach(self, latency: LatencyTracker, breakers: BreakerBoard) -> str | None:
        problem = super().attach(latency, breakers) if self._use_store else None
        if problem is not None:
            _LOG.warning("latency history unavailable (%s); routing on config priors", problem)
        self.breakers = GroupBreakers(self.table, breakers)
        breakers.on_change = self.breakers.changed
        return None  # limits and breakers are shared whatever became of the store

    async def refresh(self, *, force: bool = False) -> None:
        if self.breakers is not None:
            self.breakers.reconcile()

    def status(self) -> StateStatus:
        return StateStatus(self.kind, shared=True, target=self.table.path)

    async def aclose(self) -> None:
        try:
            await super().aclose()
        finally:
            self.table.close()


class GroupShare(NamedTuple):
    """What a worker shares with its group: its rate limiter and its state (breakers, latency)."""

    limiter: GroupRateLimiter
    state: GroupState


def open_group(config: Config, path: str, *, latency: bool) -> GroupShare | str:
    """The limits and breakers a worker built from `config` shares through the table at
    `path`; or why it cannot (logged: it then runs on its own state)."""
    try:
        table = GroupTable(path, group_slots(config))
    except OSError as exc:  # GroupUnavailable included
        why = str(exc) if isinstance(exc, GroupUnavailable) else f"{path}: {exc.strerror}"
        _LOG.warning("route serve: worker %d runs on its own rate limits and breakers (%s); the others "
                     "do not count its requests", os.getpid(), why)
        return why
    return GroupShare(GroupRateLimiter(limits_from_config(config), table), GroupState(config, table, latency=latency))
