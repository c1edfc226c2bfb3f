"""The shared-state interface: where a Router's learned latency and breaker verdicts live beyond
the Router itself, chosen by `state.backend` when the Router is made with `persist=True`.

    SharedState   in memory, this Router only (the Python API's `Router(...)`): nothing to do
    LocalState    the SQLite store of this machine (router/state/local.py): latency is shared by
                  the processes that use it; breakers stay per process
    RedisState    Redis (router/state/redis_state.py): latency and breakers shared by every
                  replica; this process's own state while Redis is unreachable

The Router calls `refresh` before a decision (to adopt what others learned) and `aclose` at the
end; `status` feeds /metrics and `route doctor`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from policies.breaker import BreakerBoard
    from router.config import Config
    from router.latency_tracker import LatencyTracker
    from router.state.redis_link import RedisLink

__all__ = ["SharedState", "StateStatus", "state_for"]


@dataclass(frozen=True, slots=True)
class StateStatus:
    kind: str  # memory | local | redis
    shared: bool  # whether other processes' state reaches this one now
    target: str | None = None  # where (host:port for Redis; never a password)
    outages: int = 0  # times the shared store went from answering to not


class SharedState:
    """State kept in this Router's memory: nothing shared, nothing to refresh."""

    kind = "memory"
    # Whether `refresh` does anything: a kind that overrides it does. The Router reads this
    # before every decision, and calls nothing for the kinds that keep state here.
    refreshes: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.refreshes = cls.refresh is not SharedState.refresh

    def attach(self, latency: LatencyTracker, breakers: BreakerBoard) -> str | None:
        """Start sharing `latency` and `breakers`; why that is impossible, or None."""
        return None

    async def refresh(self, *, force: bool = False) -> None:
        """Adopt what other processes learned (at most every `state.refresh_ms` unless `force`)."""

    async def flush(self) -> None:
        """Write what this process learned and has not shared yet, and wait for it."""

    def status(self) -> StateStatus:
        return StateStatus(self.kind, shared=False)

    async def aclose(self) -> None:
        """Flush, then let go of connections."""
        await self.flush()


def state_for(config: Config, *, link: RedisLink | None = None) -> SharedState:
    """The state backend `config.state` names; `link`: an open link to `state.url` to reuse."""
    if config.state.backend == "redis":
        from router.state.redis_state import RedisState

        if link is not None:
            return RedisState(link, refresh_s=config.state.refresh_ms / 1000)
        return RedisState.from_config(config.state)
    from router.state.local import LocalState

    return LocalState(config)
