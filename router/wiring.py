"""The composition root: the parts of a router, built from one config and wired together here.

    model       the routing model (scorer, tiers, boundaries), behind one slot (policies/routing_model.py)
    backends    each backend and consortium, built on first use (router/backend_table.py)
    calls       the one call path: retries, breakers, budget, redaction, rate limits (router/calls.py)
    latency     what each backend's latency has been measured to be (router/latency_tracker.py)
    sessions    agents' tasks (router/sessions.py), shared through Redis with Redis state
    log, spend, feedback, learning   the stores and the learner, each only when the config asks

Each part receives what it uses -- the model slot, the call path, a way to observe finished
requests -- never the Router, which is the Python API over these parts (router/core.py). Nothing
here makes a request; the stores open their files lazily.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from backends.base import Backend
from backends.errors import ConfigError
from policies.breaker import BreakerBoard, BreakerSettings
from policies.ladder import Ladder, Tier
from policies.retry import RetryBudget, RetryBudgetSettings
from policies.routing_model import ModelSlot, RoutingModel
from policies.scoring import Scorer, build_scorer
from policies.template import Templates
from router.backend_table import BackendTable, backend_identity
from router.calls import AttemptObserver, CallPath
from router.config import ScorerConfig
from router.config_loader import LoadedConfig
from router.decision import Outcome
from router.latency_tracker import LatencyTracker
from router.redaction import Redactor
from router.scope import RequestScope
from router.sessions import Sessions, SessionTable
from router.state.base import SharedState
from router.state.rate_limits import RateLimiter, rate_limiter_for

if TYPE_CHECKING:
    from backends.types import Price
    from router.learning.learner import Learner
    from router.store.feedback import Feedback
    from router.store.request_log import RequestLog
    from router.store.spend import SpendCap

__all__ = ["Parts", "build_model", "share", "wire"]

RequestObserver = Callable[[Outcome], None]


@dataclass(eq=False)
class Parts:
    """What a router is made of (see the module docstring)."""

    loaded: LoadedConfig
    source: str  # who is asking, for the request log: cli | api | server
    model: ModelSlot
    backends: BackendTable
    breakers: BreakerBoard
    redactor: Redactor
    rate_limits: RateLimiter
    calls: CallPath
    latency: LatencyTracker
    sessions: Sessions | None
    prices: dict[str, Price]
    request_observers: list[RequestObserver] = field(default_factory=list)
    shared: SharedState = field(default_factory=SharedState)  # in memory unless built with `persist=` (`state:`)
    random: random.Random = field(default_factory=random.Random)  # exploration rolls; tests may seed it
    request_log: RequestLog | None = None
    spend_cap: SpendCap | None = None
    learner: Learner | None = None
    templates: Templates = field(default_factory=Templates)  # each client's template, from its traffic
    persist_problem: str | None = None  # why learned state is not shared as asked (wire's `persist`)
    _feedback: Feedback | None = None

    def feedback(self) -> Feedback:
        """Verdicts on logged requests and who may give them (router/store/feedback.py), made on
        first use: without a request log it refuses every verdict and opens nothing."""
        if self._feedback is None:
            from router.store.feedback import Feedback

            self._feedback = Feedback(self.loaded, self.request_log)
        return self._feedback

    config: Any = field(init=False)  # the loaded config's, read on every request: a field, not a property

    def __post_init__(self) -> None:
        self.config = self.loaded.config

    def observe_requests(self, observer: RequestObserver) -> None:
        self.request_observers.append(observer)


def wire(loaded: LoadedConfig, *, backends: Mapping[str, Backend] | None = None, source: str = "api",
         log: bool | None = None, rate_limits: RateLimiter | None = None, secret_variables: Iterable[str] = (),
         clients_retry: bool = False, observers: Iterable[AttemptObserver] = (),
         request_observers: Iterable[RequestObserver] = (), persist: bool | SharedState = False) -> RequestScope:
    """Every part of a router for `loaded`, in dependency order, and the request scope every
    entry point goes through (router/scope.py). `backends` replaces built backends by name
    (tests, the engine's server); `source` labels its requests in the log (cli | api | server);
    `log` overrides `log.enabled` (the CLI's --no-log: no file opened, so nothing learned
    either); `rate_limits` replaces the config's limiter (a `--workers` group's,
    router/state/group.py); `secret_variables` are redacted besides the config's own (a
    server's client keys); `clients_retry`: the callers retry on their own (`route serve`'s
    clients), so a backend not yet heard answering is not retried (router/calls.py);
    `observers` hear of every attempt and `request_observers` of every request's outcome,
    after the router's own (latency; log, spend, learning); `persist` shares learned state as
    `state:` says, or through the SharedState given (`share`), last, once every part exists."""
    config = loaded.config
    settings = config.routing.breaker
    breakers = BreakerBoard(time.monotonic, BreakerSettings(settings.failures, settings.cooldown_ms / 1000,
                                                            settings.probe_ms / 1000, settings.probe_max_ms / 1000))
    # every string that leaves the process is scrubbed of secrets
    redactor = Redactor.for_config(config, also=secret_variables)
    rate_limits = rate_limits or _rate_limits(loaded)
    budget = config.routing.retry_budget
    # Learned latency is keyed by what each backend is, so configs sharing a store do not mix it up.
    latency = LatencyTracker.from_config(config, identities={n: backend_identity(config, n) for n in config.backends})
    # The table builds consortia, which call through the call path; the call path finds backends
    # in the table: the table makes it, handing it its lookup.
    table = BackendTable(config, lambda resolve: CallPath(
        resolve, breakers=breakers, max_concurrency=config.routing.max_concurrency,
        retry_per_class={str(k): v for k, v in config.routing.retries.items()}, redactor=redactor, limits=rate_limits,
        retry_unheard=not clients_retry, retry_budget=RetryBudget(RetryBudgetSettings(budget.tokens, budget.ratio)),
        observers=(latency.observe, *observers)), backends)  # every attempt anywhere: routed, member or arbiter
    parts = Parts(loaded, source, ModelSlot(build_model(loaded)), table, breakers, redactor, rate_limits, table.calls,
                  latency, _sessions(config, rate_limits, latency.identity),
                  {n: s.settings(n).price for n, s in config.backends.items()})
    if config.log.enabled if log is None else log:
        _attach_stores(parts)
    if config.routing.learn is not None and log is not False:
        from router.learning import attach_learning

        parts.learner = attach_learning(config, parts.model, table.calls, breakers, parts.observe_requests)
    parts.request_observers.extend(request_observers)
    if persist is not False:
        parts.persist_problem = share(parts, state=None if persist is True else persist)
    return RequestScope(parts)


def _attach_stores(parts: Parts) -> None:
    from router.store.feedback import attach_consortium_preferences
    from router.store.request_log import attach_request_log
    from router.store.spend import spend_cap_for

    parts.request_log = attach_request_log(parts.loaded, parts.observe_requests)
    if parts.config.consortia:  # only a consortium's rounds rank members against each other
        attach_consortium_preferences(parts.loaded, parts.observe_requests)
    parts.spend_cap = spend_cap_for(parts.loaded, parts.request_log, parts.observe_requests)


def _sessions(config: Any, rate_limits: RateLimiter, identity: Callable[[str], str]) -> Sessions | None:
    settings = config.routing.sessions
    if not settings.enabled:
        return None
    sessions = Sessions(SessionTable(max_entries=settings.max_entries, ttl_s=settings.ttl_s),
                        cache_ttl_s=settings.cache_ttl_s, identity=identity)
    if rate_limits.link is not None:  # state in Redis: sessions too, over the same link
        from router.state.sessions_redis import SharedSessions

        sessions.shared = SharedSessions(rate_limits.link, sessions.table)
    return sessions


def _rate_limits(loaded: LoadedConfig) -> RateLimiter:
    """Shared by every replica through Redis with `state: backend: redis` (its link is the one
    `persist` hands the Redis state too), else buckets in this process."""
    config = loaded.config
    link = None
    if config.state.backend == "redis":
        from router.state.redis_link import RedisLink

        link = RedisLink.from_config(config.state, path=loaded.path, line=loaded.line_of("state", "url"))
    return rate_limiter_for(config, link)


def share(parts: Parts, *, state: SharedState | None = None) -> str | None:
    """Share learned state as `state:` says (or through `state`): the local store or Redis. The
    reason when it cannot be used (routing then runs on config priors and what this process
    learns); Redis being down is no such reason (router/state/redis_state.py)."""
    from router.state.base import state_for

    try:
        # One Redis connection pool per process: rate limits already hold a link to `state.url`.
        shared = state or state_for(parts.config, link=parts.rate_limits.link)
        problem = shared.attach(parts.latency, parts.breakers)
    except ConfigError as exc:
        return str(exc)
    if problem is None:
        parts.shared = shared
        link = getattr(shared, "link", None)
        if link is not None and parts.sessions is not None and parts.sessions.shared is not None:
            parts.sessions.shared.link = link  # one link per state: one outage, one warning
    return problem


# -- the routing model ------------------------------------------------------------------------

def build_model(loaded: LoadedConfig) -> RoutingModel:
    """The routing model the config describes (version 0): its scorer, and its tiers with each
    boundary's head and threshold."""
    config = loaded.config
    scorer = _scorer(loaded, config.routing.scorer, ("routing", "scorer"))
    tiers, heads = [], []
    for index, tier in enumerate(config.routing.tiers):
        at = ("routing", "tiers", index)
        head = _scorer(loaded, tier.scorer, (*at, "scorer")) if tier.scorer is not None else None
        heads.append((f"{head.name} head", head) if head is not None else None)
        below = tier.below
        if below == "calibrated":
            below = getattr(head or scorer, "threshold", None)
            if below is None:
                where = "this tier's scorer.weights" if head else "routing.scorer.weights"
                raise ConfigError(
                    f"tier {tier.name!r} says `below: calibrated` but the scorer has no calibrated threshold; "
                    "run `route calibrate DATA.jsonl --hosted-share 0.3 --out weights.json` and point "
                    f"{where} at the file, or give a number.",
                    path=loaded.path, line=loaded.line_of(*at, "below"),
                )
        tiers.append(Tier(tier.name, below, tuple(tier.backends), tier.deadline_ms, tier.on_deadline_risk))
    return RoutingModel(scorer, Ladder(tuple(tiers), tuple(heads[:-1])))


def _scorer(loaded: LoadedConfig, spec: ScorerConfig, at: tuple) -> Scorer:
    try:
        return build_scorer(spec.kind, **spec.options)
    except (ValueError, TypeError, OSError) as exc:
        raise ConfigError(f"{'.'.join(map(str, at))} is invalid: {exc}", path=loaded.path,
                          line=loaded.line_of(*at)) from None
