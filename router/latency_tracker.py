"""Wires the latency model to the Router: learns from every Attempt, persists to the store.

One LatencyModel per backend, seeded by `backends.<name>.latency` priors. The Router registers
`observe` as an attempt observer. With a Store attached, learned state is loaded at start and
flushed (at most every `flush_interval_s`, and on close) so consecutive CLI runs learn from each
other. Several processes may share the store: a flush replays only this process's new samples onto
whatever the store holds now, inside one write transaction, so no process clobbers another's.

Replicas on several machines share through a `LatencySink` instead (router/state/: Redis): the
same merge, asynchronous, and `adopt_states` takes in what the others merged meanwhile. A flush the
sink could not save (Redis down) keeps its samples for the next one, so nothing learned is lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from backends.errors import BackendTimeout, fault_of
from policies.latency import LatencyModel, Prior
from router.decision import Attempt, Decision
from router.queueing import queue_wait_s  # queue hook

if TYPE_CHECKING:
    from router.config import Config
    from router.store import LatencyStore

__all__ = ["LatencySink", "LatencyTracker"]

_LOG = logging.getLogger(__name__)


class LatencySink(Protocol):
    async def merge(self, fresh: Mapping[str, LatencyModel]) -> Mapping[str, Mapping[str, Any]] | None:
        """Replay `fresh` onto the shared state atomically; the merged state per backend, or None
        when it could not be saved (the caller keeps the samples and tries again next flush)."""
        ...


class LatencyTracker:
    """Live latency models for every backend of a config, optionally persisted in a Store."""

    def __init__(self, models: Mapping[str, LatencyModel], *, clock: Callable[[], float] = time.time,
                 half_life: float = 20.0, prior_weight: float = 3.0, flush_interval_s: float = 5.0,
                 identities: Mapping[str, str] | None = None):
        self.models: dict[str, LatencyModel] = dict(models)
        # name -> what the backend is (router/backend_table.py): the key its history is stored
        # under, so another config's backend of the same name never lends it its latency
        self._identities = dict(identities or {})
        self._fresh: dict[str, LatencyModel] = {}  # samples not yet written to the store
        self._clock = clock  # unix seconds
        self._half_life = half_life
        self._prior_weight = prior_weight
        self.flush_interval_s = flush_interval_s
        self.exploring: set[str] = set()  # backends an in-flight request is measuring
        self._store: LatencyStore | None = None
        self._sink: LatencySink | None = None
        self._flushing: dict[str, LatencyModel] = {}  # samples a sink is saving right now
        self._flush_task: asyncio.Task[None] | None = None
        self._last_flush = 0.0

    @classmethod
    def from_config(cls, config: Config, **kwargs: Any) -> LatencyTracker:
        settings = config.routing.latency
        half_life = settings.half_life_samples
        prior_weight = settings.prior_weight_samples
        models = {}
        for name, spec in config.backends.items():
            p = spec.latency
            prior = Prior(
                ttft_s=p.ttft_ms / 1000 if p and p.ttft_ms else None,
                tokens_per_s=p.tokens_per_s if p else None,
                canvas_s=p.canvas_ms / 1000 if p and p.canvas_ms else None,
            )
            models[name] = LatencyModel(spec.decoding, canvas_length=spec.canvas_length, prior=prior,
                                        half_life=half_life, prior_weight=prior_weight)
        return cls(models, half_life=half_life, prior_weight=prior_weight,
                   flush_interval_s=settings.flush_interval_ms / 1000, **kwargs)

    def identity(self, name: str) -> str:
        """The key `name`'s learned state is shared under."""
        return self._identities.get(name, name)

    def model(self, name: str) -> LatencyModel:
        """The model for `name`; a consortium or unknown backend gets generic priors."""
        model = self.models.get(name)
        if model is None:
            model = self.models[name] = LatencyModel(half_life=self._half_life, prior_weight=self._prior_weight)
        return model

    # -- learning -------------------------------------------------------------------------

    def observe(self, attempt: Attempt, decision: Decision | None = None) -> None:
        """The Router's attempt observer."""
        self.exploring.discard(attempt.backend)
        now = self._clock()
        for model in (self.model(attempt.backend), self._fresh_for(attempt.backend)):
            _learn(model, attempt, now)

    def _fresh_for(self, name: str) -> LatencyModel:
        fresh = self._fresh.get(name)
        if fresh is None:
            fresh = self._fresh[name] = self.model(name).fresh()
        return fresh

    def begin(self, decision: Decision) -> None:
        """A request is about to run `decision`: its explored backend is now being measured."""
        if decision.plan.explored:
            self.exploring.add(decision.plan.explored)

    def end(self, decision: Decision) -> None:
        if decision.plan.explored:
            self.exploring.discard(decision.plan.explored)
        saved = self._store is not None or self._sink is not None
        if saved and self._clock() - self._last_flush >= self.flush_interval_s:
            self._flush_in_background()

    # -- persistence ----------------------------------------------------------------------

    def attach_store(self, store: LatencyStore) -> None:
        """Load what earlier runs learned and save to `store` from now on."""
        self._store = store
        stored = store.load_latency()
        for name, model in self.models.items():
            state = stored.get(self.identity(name))
            if state is not None:
                model.load_dict(state)
        self._last_flush = self._clock()

    def attach_sink(self, sink: LatencySink) -> None:
        """Share through `sink` from now on (what it holds arrives through `adopt_states`)."""
        self._sink = sink
        self._last_flush = self._clock()

    def flush(self) -> None:
        """Merge this process's new samples into the store and adopt the merged state."""
        fresh = self._take_fresh()
        if fresh and self._store is not None:
            self._adopt(_merge_into_store(self._store, fresh, self.models, self.identity))

    async def aflush(self) -> None:
        """`flush`, for a sink as well: waits for a flush in flight, then saves what is left."""
        if self._sink is None:
            self.flush()
            return
        loop = asyncio.get_running_loop()
        task = self._flush_task
        if task is not None and task.get_loop() is loop:
            await asyncio.shield(task)
        # As a task of its own, so a background flush started meanwhile waits for this one.
        self._flush_task = task = loop.create_task(self._flush_to_sink())
        await asyncio.shield(task)

    def adopt_states(self, states: Mapping[str, Mapping[str, Any]]) -> None:
        """Take shared state (what every replica merged) as this process's view, plus the samples
        it has not saved yet. State written for another setup (decoding changed) is ignored."""
        for name, state in states.items():
            live = self.models.get(name)
            if live is None:
                continue
            model = live.fresh()
            if not model.load_dict(state):
                continue
            for unsaved in (self._flushing.get(name), self._fresh.get(name)):
                if unsaved is not None:
                    model = model.merged(unsaved)
            model.failure_run = live.failure_run  # a run of failures in progress is this process's evidence
            self.models[name] = model

    def _take_fresh(self) -> dict[str, LatencyModel]:
        if (self._store is None and self._sink is None) or not self._fresh:
            return {}
        fresh, self._fresh = self._fresh, {}
        self._last_flush = self._clock()
        return {n: m for n, m in fresh.items() if n in self.models}

    def _adopt(self, merged: Mapping[str, LatencyModel]) -> None:
        """Take the store's merged state, plus whatever was learned while it was being written."""
        for name, model in merged.items():
            pending = self._fresh.get(name)
            self.models[name] = model.merged(pending) if pending is not None else model

    def _restore(self, fresh: Mapping[str, LatencyModel]) -> None:
        """Samples a flush could not save go back in front of those learned since."""
        for name, model in fresh.items():
            pending = self._fresh.get(name)
            self._fresh[name] = model.merged(pending) if pending is not None else model

    async def _flush_to_sink(self) -> None:
        assert self._sink is not None
        fresh = self._take_fresh()
        if not fresh:
            return
        self._flushing = fresh
        try:
            states = await self._sink.merge(fresh)
        except BaseException as exc:
            self._flushing = {}
            self._restore(fresh)
            if not isinstance(exc, Exception):
                raise
            _LOG.warning("could not share learned latency: %s", exc)
            return
        self._flushing = {}
        if states is None:
            self._restore(fresh)
        else:
            self.adopt_states(states)

    def _flush_in_background(self) -> None:
        """Inside an event loop the write (which may wait for another process's lock) runs on a
        worker thread, or as a task for a sink (one at a time); the merged state is adopted back
        on the loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._sink is not None:
            if self._flush_task is None or self._flush_task.done() or self._flush_task.get_loop() is not loop:
                self._flush_task = loop.create_task(self._flush_to_sink())
            return
        fresh = self._take_fresh()
        if not fresh or self._store is None:
            return
        future = loop.run_in_executor(None, _merge_into_store, self._store, fresh, dict(self.models), self.identity)

        def done(f: asyncio.Future) -> None:
            if f.cancelled() or f.exception() is not None:
                _LOG.warning("could not save learned latency: %s", f.exception() if not f.cancelled() else "cancelled")
                return
            self._adopt(f.result())

        future.add_done_callback(done)


def _learn(model: LatencyModel, attempt: Attempt, now: float) -> None:
    if attempt.error is not None and fault_of(attempt.error) in ("request", "credential"):
        return  # the request's fault or the key's: nothing about how fast or how well the backend answers
    completion = attempt.completion
    if completion is not None:
        timings = completion.timings
        # attempt.elapsed_s includes the backend's own retries; they belong in the estimate, and a
        # retry delays the first token as much as the total.
        retried = max(0.0, attempt.elapsed_s - timings.total_s)
        # queue hook: the wait is predicted from the queue, not learned (only an engine's answer has one)
        queued = queue_wait_s(completion) if "queue" in completion.metadata else 0.0
        first = max(0.0, timings.ttft_s + retried - queued) if timings.ttft_s is not None else None
        canvases = completion.diffusion.canvases if completion.diffusion is not None else None
        model.observe(max(attempt.elapsed_s, timings.total_s) - queued, first_s=first,
                      output_tokens=completion.usage.output_tokens, canvases=canvases,
                      truncated=completion.finish_reason == "length", now=now)
        return
    if attempt.cancelled or isinstance(attempt.error, BackendTimeout):
        # Slow, not broken (a lost hedge, or cut short by a tight overall deadline). Stopped after
        # its first content: that much was measured, the decode rate was not. Before it: the time
        # it ran is a lower bound on its time to first content, not a failure to count.
        if attempt.first_s is not None:
            model.observe_cut(attempt.elapsed_s, attempt.first_s, now=now)
        else:
            model.observe_censored(attempt.elapsed_s, now=now)
        return
    model.observe_failure(now=now)


def _merge_into_store(store: LatencyStore, fresh: Mapping[str, LatencyModel], live: Mapping[str, LatencyModel],
                      identity: Callable[[str], str]) -> dict[str, LatencyModel]:
    """Merge this process's fresh samples into what other processes stored, atomically."""
    merged: dict[str, LatencyModel] = {}

    def merge(stored: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, samples in fresh.items():
            base = live[name].fresh()
            key = identity(name)
            if key in stored and not base.load_dict(stored[key]):
                _LOG.info("discarding stored latency state of %s: written for another setup", name)
            merged[name] = base.merged(samples)
        return {identity(name): model.to_dict() for name, model in merged.items()}

    store.update_latency(merge)
    return merged
