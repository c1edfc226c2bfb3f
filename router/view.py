"""A router seen from outside, read-only: what the server, its web view and `route models` read
of the parts router/wiring.py built (its config, breakers, learned latency, stores), and nothing
they could call to change them. Each property reads the part as it is now: the routing model
after learning installed a new version, the shared state after `persist` attached one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backends.base import Backend
    from policies.breaker import BreakerBoard
    from policies.ladder import Tier
    from policies.routing_model import RoutingModel
    from router.config import Config
    from router.config_loader import LoadedConfig
    from router.latency_tracker import LatencyTracker
    from router.learning.learner import Learner
    from router.redaction import Redactor
    from router.sessions import Sessions
    from router.state.base import SharedState
    from router.state.rate_limits import RateLimiter
    from router.store.request_log import RequestLog
    from router.wiring import Parts

__all__ = ["RouterView"]


class RouterView:
    __slots__ = ("_parts",)

    def __init__(self, parts: Parts):
        self._parts = parts

    @property
    def config(self) -> Config:
        return self._parts.config

    @property
    def loaded(self) -> LoadedConfig:
        return self._parts.loaded

    @property
    def redactor(self) -> Redactor:
        """For scrubbing what is shown (errors, logged text) of the secrets the router holds."""
        return self._parts.redactor

    @property
    def rate_limits(self) -> RateLimiter:
        return self._parts.rate_limits

    @property
    def breakers(self) -> BreakerBoard:
        return self._parts.breakers

    @property
    def latency(self) -> LatencyTracker:
        return self._parts.latency

    @property
    def sessions(self) -> Sessions | None:
        return self._parts.sessions

    @property
    def request_log(self) -> RequestLog | None:
        return self._parts.request_log

    @property
    def learner(self) -> Learner | None:
        return self._parts.learner

    @property
    def shared(self) -> SharedState:
        """How learned state is shared (router/state/): in memory unless the Router was built with `persist=`."""
        return self._parts.shared

    @property
    def model(self) -> RoutingModel:
        """The routing model deciding now (scorer, tiers, boundaries; its `version`)."""
        return self._parts.model.current

    @property
    def tiers(self) -> tuple[Tier, ...]:
        return self._parts.model.current.tiers

    def state(self) -> dict[str, dict[str, Any]]:
        """Per backend: what the latency model learned and the breaker's state."""
        parts = self._parts
        return {name: {"latency": parts.latency.model(name).summary(), "breaker": parts.breakers[name].state}
                for name in parts.config.backends}

    def names(self) -> list[str]:
        """Every name usable as `model`: backends, then consortia."""
        return self._parts.backends.names()

    def backend(self, name: str) -> Backend:
        """The backend (or consortium) called `name`, built on first use (its capabilities, its
        endpoint for scrubbing)."""
        return self._parts.backends.built[name]
