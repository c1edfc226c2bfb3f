"""Routing that learns from its own traffic, and never learns itself worse (docs/guide/learning.md).

    store.py     the labels, versions and spend in the local SQLite store (all its SQL)
    fleet.py     the same in Redis, for a replica fleet (`state: backend: redis`)
    labels.py    labels from shadow judgements, feedback verdicts and consortium rankings
    shadow.py    one shadow judgement: the other tier answers, the judge compares both ways
    learner.py   the Router's learner: sampling, budget, refits, the version in use
    versions.py  installing a version's weights in a Router, boundary by boundary
    status.py    `route learn status | history | rollback` as plain data (the web view's too)

`routing.learn` in the config turns it on; the composition root (router/wiring.py) attaches a
`Learner` as a request observer. Fitting (policies/complexity/training/adapt.py) is imported only when a refit runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policies.breaker import BreakerBoard
    from policies.routing_model import ModelSlot
    from router.calls import CallPath
    from router.config import Config
    from router.decision import Outcome
    from router.learning.labels import LabelStore
    from router.learning.learner import Learner

__all__ = ["attach_learning", "learn_status", "open_store"]

_LOG = logging.getLogger("route")


def open_store(config: Config) -> LabelStore:
    """The learning store `config` points at: Redis for a fleet, else the local SQLite file."""
    if config.state.backend == "redis":
        from router.learning.fleet import RedisLearningStore

        return RedisLearningStore.from_config(config.state)
    from router.learning.store import LearningStore
    from router.store.choice import local_path

    return LearningStore(local_path(config))


def store_label(config: Config) -> str:
    """Where open_store's labels are, in words."""
    from router.store.choice import local_path

    return "Redis (state.url)" if config.state.backend == "redis" else str(local_path(config))


def attach_learning(config: Config, model: ModelSlot, calls: CallPath, breakers: BreakerBoard,
                    observe: Callable[[Callable[[Outcome], None]], None]) -> Learner | None:
    """A learner for `config`'s `routing.learn` (None without one), registered with `observe` as
    a request observer: it judges through `calls`, reads the breakers to find the other tier,
    and installs versions in `model`, deciding with the version in use from the first request
    on (the configured weights when the store cannot be read)."""
    settings = config.routing.learn
    if settings is None:
        return None
    from router.learning.config import default_judge
    from router.learning.learner import Learner
    from router.learning.shadow import ShadowJudge

    judge = None
    name = settings.judge or default_judge(config)
    if settings.shadow_rate > 0 and name is not None:
        prices = {n: spec.settings(n).price for n, spec in config.backends.items()}
        context = config.backends[name].context_window if name in config.backends else None
        judge = ShadowJudge(calls, settings, name, prices, context)
    learner = Learner(config, settings, open_store(config), judge, model, breakers)
    observe(learner.observe)
    try:
        learner.store.changed()  # the stamp as it is now: what the read below sees
        current, _ = learner.store.current()
        if current:
            learner.use_now(current)
    except Exception as exc:  # an unreadable store must not stop the router
        _LOG.warning("route: the learning store could not be read (%r); routing on the configured weights", exc)
    model.watch = learner.check
    return learner


def learn_status(config: Config) -> dict:
    """`route learn status` as a plain dict (see status.py)."""
    from router.learning.status import status

    return status(config)
