"""Breaker verdicts shared through Redis, so a backend one replica found broken is skipped by all.

Failures are counted per replica (a run of them is local evidence); the verdict is shared. Three
keys per backend:

    breaker:<name>:open      set when a breaker opens, with a TTL of the cooldown: while it
                             exists every replica holds its breaker open
    breaker:<name>:tripped   set with it, deleted when a probe succeeds: after the cooldown,
                             while it exists, the backend is half-open for everyone
    breaker:<name>:probe     the one replica allowed to probe a half-open backend (SET NX, with
                             a TTL of the cooldown): a backend that just came back gets one
                             probe from the fleet, not one per replica; if the winner never
                             probes (no request went there), the key expires and another wins

A replica reads them with its latency before a decision (`commands` joins that one pipeline) and
`reconcile` maps them onto its own breakers. A breaker held open by a verdict from elsewhere
stays open `refresh_s` past the key's TTL, so it never turns half-open (and probes) before the
replica has looked at Redis again and taken part in the probe contest.

Its own transitions (`changed`) are written at once, in the background; one that could not be
written (Redis down) is written when Redis answers again, since it is newer than what Redis holds.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from backends.per_loop import PerLoop
from policies.breaker import BreakerBoard, State

if TYPE_CHECKING:
    from router.state.redis_link import RedisLink

__all__ = ["SharedBreakers"]

_PER_BACKEND = 4  # replies per backend in the read pipeline (see `commands`)
_TRIPPED_COOLDOWNS = 20  # `tripped` outlives an abandoned fleet by this many cooldowns, then goes


class SharedBreakers:
    def __init__(self, link: RedisLink, board: BreakerBoard, *, refresh_s: float,
                 identity: Callable[[str], str] = str):
        self.link = link
        self.identity = identity  # backend name -> what it is: another config's namesake has its own breaker
        self.board = board
        self.refresh_s = refresh_s
        self.replica = uuid.uuid4().hex  # who holds a probe key
        self._unwritten: dict[str, State] = {}  # own verdicts Redis does not hold yet
        self._changes: dict[str, int] = {}  # own transitions per backend, to spot one made mid-read
        self._writes: set[asyncio.Task[None]] = set()
        self._lock = PerLoop(asyncio.Lock)  # own verdicts reach Redis in the order they were reached

    def _keys(self, name: str) -> tuple[str, str, str]:
        what = self.identity(name)
        return (self.link.key("breaker", what, "open"), self.link.key("breaker", what, "tripped"),
                self.link.key("breaker", what, "probe"))

    @property
    def _cooldown_ms(self) -> int:
        return max(1, round(self.board.settings.cooldown_s * 1000))

    # -- own verdicts ---------------------------------------------------------------------

    def changed(self, name: str, state: State) -> None:
        """The board's listener: this process's calls opened or closed `name`'s breaker."""
        self._changes[name] = self._changes.get(name, 0) + 1
        self._unwritten[name] = state
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # written by the next refresh
        task = loop.create_task(self._write(name))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, name: str) -> None:
        async with self._lock.get():
            state = self._unwritten.get(name)
            if state is None:
                return
            remaining_ms = max(1, round(self.board[name].remaining_s() * 1000))
            open_key, tripped, probe = self._keys(name)

            async def write(r: Any) -> bool:
                pipe = r.pipeline(transaction=True)
                if state == "open":
                    pipe.set(open_key, self.replica, px=remaining_ms)
                    pipe.set(tripped, self.replica, px=self._cooldown_ms * _TRIPPED_COOLDOWNS)
                    pipe.delete(probe)  # a new open period: the probe contest starts again after it
                else:
                    pipe.delete(open_key, tripped, probe)
                await pipe.execute()
                return True

            if await self.link.call(write, False) and self._unwritten.get(name) == state:
                del self._unwritten[name]

    async def settle(self) -> None:
        """Wait for own verdicts being written now."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    # -- others' verdicts -----------------------------------------------------------------

    def snapshot(self) -> dict[str, int]:
        """Taken just before the read: a breaker that changes here during it keeps its own verdict."""
        return dict(self._changes)

    def commands(self, pipe: Any, names: Sequence[str]) -> None:
        for name in names:
            open_key, tripped, probe = self._keys(name)
            pipe.pttl(open_key)
            pipe.exists(tripped)
            pipe.get(probe)
            pipe.pttl(probe)

    async def reconcile(self, names: Sequence[str], replies: Sequence[Any], before: dict[str, int]) -> None:
        contested = []
        for index, name in enumerate(names):
            if self._changes.get(name, 0) != before.get(name, 0):
                continue  # changed here while Redis was read: this process's verdict is newer
            if name in self._unwritten:
                self.changed(name, self._unwritten[name])  # Redis is back: write what it missed
                continue
            open_ms, tripped, owner, probe_ms = replies[index * _PER_BACKEND:(index + 1) * _PER_BACKEND]
            breaker = self.board[name]
            if open_ms > 0 or open_ms == -1:  # -1: no TTL (written by hand); hold it a cooldown
                breaker.hold_open((open_ms if open_ms > 0 else self._cooldown_ms) / 1000 + self.refresh_s)
            elif tripped:
                if owner is None:
                    contested.append(name)
                elif owner.decode() != self.replica:
                    breaker.hold_open(max(probe_ms, 0) / 1000 + self.refresh_s)  # another replica probes
                elif breaker.state == "open":
                    breaker.hold_open(0)  # this replica won the probe: let its next call through
            elif breaker.state != "closed":
                breaker.reset()  # a probe elsewhere succeeded
        if contested:
            await self._contest(contested)

    async def _contest(self, names: list[str]) -> None:
        """Half-open everywhere and nobody probing: whoever sets the probe key probes."""
        async def claim(r: Any) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for name in names:
                pipe.set(self._keys(name)[2], self.replica, nx=True, px=self._cooldown_ms)
            return await pipe.execute()

        won = await self.link.call(claim, None)
        if won is None:
            return  # Redis went away: local breakers go on by themselves
        for name, mine in zip(names, won):
            breaker = self.board[name]
            if mine:
                if breaker.state != "half-open":
                    breaker.hold_open(0)  # half-open here: the next call to it is the probe
            else:
                breaker.hold_open(self._cooldown_ms / 1000 + self.refresh_s)
