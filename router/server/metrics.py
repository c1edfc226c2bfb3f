"""What `route serve` counts of the requests it serves: the watch each routed request is handed
(`Served`), and the Prometheus metrics it feeds, in a registry of the app's own (several apps can
share a process, as in tests).

The endpoint hands each routed request a watch (`Served.watch`), which the router's request
scope calls with every upstream attempt made for it and with its outcome (router/decision.py
`Watch`); the watch passes them on to the metrics, the web view's live view, each client key's
token usage, and the count the heap trimmer waits on. So the server registers nothing on the
router it is given: a router shared with the Python API, a test or a second app is counted by
each app for the requests that app served, once each.

The metrics:

    route_requests_total{model,backend,status}      status: ok | error | cancelled
    route_request_duration_seconds{backend}         whole request, fallbacks included
    route_time_to_first_token_seconds{backend}
    route_tokens_total{backend,direction}           direction: input | output
    route_cost_usd_total{backend}
    route_routing_decisions_total{backend,tier}     the router's first choice (tier "forced" by name)
    route_in_flight_requests
    route_breaker_state{backend,state}              1 for the breaker's current state
    route_state_shared_up{backend}                  1 while shared state (Redis) answers; 0 while this
                                                    replica runs on its own state (state.backend: redis)
    route_state_shared_outages_total{backend}       times shared state went from answering to not
    route_worker_requests{pid}                      requests each worker process finished
    route_rate_limited_total{kind,name}             requests refused by a rate limit: kind backend (the
                                                    router passed it over) or key (a 429 to that client)
    route_learn_*                                   with routing.learn: the version in use, shadow judgements,
                                                    their spend and budget, refits (router/learning/metrics.py)

Under `route serve --workers N` (PROMETHEUS_MULTIPROC_DIR set by the parent) the counters,
histograms and the in-flight gauge are written to files there and summed over the workers at
scrape time, whichever worker answers; the breaker and learned-latency gauges are read from
the answering worker's router, and route_worker_requests keeps one series per worker.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from router.decision import Attempt, Decision, Outcome
from router.server.keys import record_key_usage

if TYPE_CHECKING:
    from router.ports import RouterService
    from router.server.ui.live import LiveView

__all__ = ["Metrics", "Served"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_BREAKER_STATES = ("closed", "half-open", "open")


class _StateCollector:
    """Reads the router's public state at scrape time: breakers and what latency it learned."""

    def __init__(self, router: RouterService):
        self._router = router

    def collect(self) -> Iterator[Metric]:
        breakers = GaugeMetricFamily("route_breaker_state", "Circuit breaker state per backend (1 = current)",
                                     labels=["backend", "state"])
        ttft = GaugeMetricFamily("route_learned_ttft_seconds", "Learned time to first content (a canvas, for "
                                 "diffusion backends)", labels=["backend", "quantile"])
        samples = GaugeMetricFamily("route_learned_latency_samples", "Calls the latency model has measured",
                                    labels=["backend"])
        for backend, state in sorted(self._router.view.state().items()):
            for name in _BREAKER_STATES:
                breakers.add_metric([backend, name], 1.0 if state["breaker"] == name else 0.0)
            latency = state["latency"]
            ttft.add_metric([backend, "0.5"], latency["ttft_p50_s"])
            ttft.add_metric([backend, "0.95"], latency["ttft_p95_s"])
            samples.add_metric([backend], latency["samples"])
        yield from (breakers, ttft, samples)
        yield from _shared_state(self._router)


def _shared_state(router: RouterService) -> Iterator[Metric]:
    status = router.view.shared.status()
    if status.kind != "redis":
        return
    up = GaugeMetricFamily("route_state_shared_up", "1 while shared state answers; 0 while this replica runs "
                           "on its own learned state", labels=["backend"])
    up.add_metric([status.kind], 1.0 if status.shared else 0.0)
    outages = CounterMetricFamily("route_state_shared_outages", "Times shared state went from answering to not",
                                  labels=["backend"])
    outages.add_metric([status.kind], status.outages)
    yield from (up, outages)


class Metrics:
    def __init__(self, router: RouterService):
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("route_requests", "Routed requests", ["model", "backend", "status"], registry=r)
        self.duration = Histogram("route_request_duration_seconds", "Whole-request wall time, fallbacks included",
                                  ["backend"], buckets=_LATENCY_BUCKETS, registry=r)
        self.ttft = Histogram("route_time_to_first_token_seconds", "Time to first content from the backend",
                              ["backend"], buckets=_LATENCY_BUCKETS, registry=r)
        self.tokens = Counter("route_tokens", "Tokens", ["backend", "direction"], registry=r)
        self.cost = Counter("route_cost_usd", "Cost in US dollars", ["backend"], registry=r)
        self.decisions = Counter("route_routing_decisions", "The router's first choice", ["backend", "tier"], registry=r)
        self.in_flight = Gauge("route_in_flight_requests", "Requests being answered now", registry=r,
                               multiprocess_mode="livesum")
        self.attempts = Counter("route_upstream_attempts", "Upstream attempts of every call (routed, consortium "
                                "member, arbiter), retries included", ["backend", "outcome"], registry=r)
        self.finished = Gauge("route_worker_requests", "Requests this process finished (a series per worker "
                              "under --workers)", registry=r, multiprocess_mode="all")
        self.rate_limited = Counter("route_rate_limited", "Requests refused by a rate limit (kind: backend, passed "
                                    "over; key: a 429 to that client)", ["kind", "name"], registry=r)
        r.register(_StateCollector(router))
        _register_learning(r, router)
        self._exposed = _multiprocess_registry(router) or r
        self._children: dict[tuple, Any] = {}  # labels() costs a lock and a dict lookup; cache the child

    def _child(self, metric, *labels: str):
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def attempt(self, attempt: Attempt, decision: Decision | None) -> None:
        """The attempt observer: one call per upstream attempt, anywhere in the router."""
        outcome = "cancelled" if attempt.cancelled else ("ok" if attempt.error is None else type(attempt.error).__name__)
        self._child(self.attempts, attempt.backend, outcome).inc()

    def refused(self, kind: str, name: str) -> None:
        self._child(self.rate_limited, kind, name).inc()

    def decided(self, decision: Decision) -> None:
        self._child(self.decisions, decision.chosen, decision.tier or ("forced" if decision.forced else "-")).inc()

    def observe(self, outcome: Outcome) -> None:
        """The request observer: one call per finished request."""
        decision = outcome.decision
        model = decision.chosen if decision.forced else "auto"
        if outcome.result is not None:
            c = outcome.result.completion
            backend, status = c.backend, "ok"
            if c.timings.ttft_s is not None:
                self._child(self.ttft, backend).observe(c.timings.ttft_s)
            self._child(self.tokens, backend, "input").inc(c.usage.input_tokens)
            self._child(self.tokens, backend, "output").inc(c.usage.output_tokens)
            if c.cost_usd:
                self._child(self.cost, backend).inc(c.cost_usd)
        else:
            failures = getattr(outcome.error, "exceptions", None) or ()
            failed = getattr(failures[-1], "backend", None) if failures else None
            backend = str(failed or decision.chosen)
            status = "cancelled" if isinstance(outcome.error, asyncio.CancelledError) else "error"
        self._child(self.requests, model, backend, status).inc()
        self._child(self.duration, backend).observe(outcome.elapsed_s)
        self.finished.inc()

    def render(self) -> bytes:
        return generate_latest(self._exposed)


def _multiprocess_registry(router: RouterService) -> CollectorRegistry | None:
    """Every worker's metrics from the shared directory, plus this worker's router state; None
    outside multiprocess mode."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not path:
        return None
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path)
    registry.register(_StateCollector(router))
    _register_learning(registry, router)
    return registry


def _register_learning(registry: CollectorRegistry, router: RouterService) -> None:
    """routing.learn's figures (router/learning/metrics.py), when the router learns."""
    if router.view.learner is not None:
        from router.learning.metrics import LearningCollector

        registry.register(LearningCollector(router.view.learner))


class Served:
    """Built once per app, before its endpoint. `key_usage`: the server has per-key token limits,
    so each request's usage is charged to its key (router/server/keys.py)."""

    __slots__ = ("count", "key_usage", "live", "metrics")

    def __init__(self, metrics: Metrics, live: LiveView | None = None, *, key_usage: bool = False):
        self.metrics = metrics
        self.live = live
        self.key_usage = key_usage
        self.count = 0  # requests finished: the heap trimmer trims after bursts of them (heap_trim.py)

    def watch(self, protocol: str, key: str | None) -> _RequestWatch:
        """The watch of one request, which came in by `protocol` with the client key named `key`."""
        return _RequestWatch(self, protocol, key)


class _RequestWatch:
    __slots__ = ("key", "protocol", "served")

    def __init__(self, served: Served, protocol: str, key: str | None):
        self.served, self.protocol, self.key = served, protocol, key

    def attempt(self, attempt: Attempt, decision: Decision | None) -> None:
        served = self.served
        served.metrics.attempt(attempt, decision)
        if served.live is not None:
            served.live.attempt(attempt, decision)

    def refused(self, backend: str) -> None:
        self.served.metrics.refused("backend", backend)

    def finished(self, outcome: Outcome) -> None:
        served = self.served
        served.count += 1
        served.metrics.observe(outcome)
        if served.live is not None:
            served.live.observe(outcome, self.protocol, self.key)
        if served.key_usage:
            record_key_usage(outcome)
