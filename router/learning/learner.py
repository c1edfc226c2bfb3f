"""The learner of one Router: shadow judging, refits, and the version in use.

It hears of requests only as the Router's request observer (`Router.add_request_observer`),
after the client has its answer. Observing does no I/O and no waiting: it rolls the dice,
checks the budget it already knows and, for a sampled request, starts a task on the event
loop. Everything else -- reading and writing the store, the shadow calls, fitting -- happens
in that task, in a worker thread, or in the next observation's refresh.

Budget: a judgement starts only when its worst-case cost (the other tier's answer at
`max_tokens`, two judge calls at theirs) fits in what today's budget has left, counting
judgements already under way; its real cost is recorded when it ends. With the budget spent,
nothing runs. In-flight judgements are capped at `max_in_flight`; more are skipped.

Refits (`auto`): when a boundary has `refit_every` labels more than its last refit (claimed in
the store, so one process of a machine or fleet does it), its labels are refitted from the
configured weights in a worker process (refit.py, policies/complexity/training/adapt.py) and the result is
adopted only when it beats the version in use on labels that version was not fitted on, by a
margin that grows with each refit since the last adoption (`online_z`). The refit is handed
the boundary's threshold, so the labels also place the boundary (a bad verdict on the lower
tier's answer moves its kind of prompt above it; adapt.py, placement.py). Before it adopts,
the traffic the new version would move is measured on the last `moved_window` logged requests
(moves.py); a version fitted on labels that are not all the operator's own verdicts (shadow
judgements, consortium rankings, non-admin keys) that moves more than `max_moved` of them
waits for `route learn adopt`. Every refit's outcome -- kept, adopted or waiting, with its
figures -- is noted in the store for `route learn status` and the web view.

A version adopted or rolled back to by any process applies from the next decision: the model
slot asks `check` before each read, which costs one stat of the store's stamp file (a query
only when it changed; a fleet's Redis store is watched by a thread, store-side). Every process
also looks for a newer version every `refresh_ms` after a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from backends.types import last_user_text
from router.learning.labels import import_feedback
from router.learning.refit import Refitter
from router.learning.shadow import Pair, ShadowJudge, pair_of
from router.learning.store import utc_day
from router.learning.versions import Configured, install, weights_of

if TYPE_CHECKING:
    from policies.breaker import BreakerBoard
    from policies.complexity import Weights
    from policies.routing_model import ModelSlot
    from router.config import Config, LearnConfig
    from router.decision import Outcome
    from router.learning.labels import LabelStore
    from router.learning.store import LabelRow

__all__ = ["MAX_LABELS", "Learner", "id_ranges", "online_z", "usable"]

_LOG = logging.getLogger("route")
MAX_LABELS = 3000  # a refit reads a boundary's most recent labels, at most this many (bounded work)


def online_z(attempt: int) -> float:
    """How many standard errors the `attempt`-th refit since the last adoption must gain by.

    A one-off calibration takes a gain beyond `ADOPT_Z` standard errors (one set of labels in
    ten that say nothing passes). Refitting every N labels asks again and again, and every
    asking is another chance for noise to pass; the bar rises as sqrt(2 ln(attempt + 1)), a
    boundary whose false passes stay few however long the router runs, while a real gain's
    t grows with the square root of the labels and still clears it."""
    from policies.complexity.training.gate import ADOPT_Z

    return max(ADOPT_Z, math.sqrt(2.0 * math.log(attempt + 1)))


@dataclass
class _Counts:
    """What this process did, for /metrics and status."""

    shadow: Counter[str] = field(default_factory=Counter)  # judged | no-verdict | failed | skipped-<why>
    spent_usd: float = 0.0  # by this process, all days
    refits: Counter[str] = field(default_factory=Counter)  # adopted | kept | waiting
    last_refit: dict[int, dict[str, Any]] = field(default_factory=dict)


class Learner:
    def __init__(self, config: Config, settings: LearnConfig, store: LabelStore, judge: ShadowJudge | None,
                 model: ModelSlot, breakers: BreakerBoard):
        self.config = config
        self.settings = settings
        self.store = store
        self.judge = judge
        self.model = model  # the slot versions are installed in; read for the tiers of each judgement
        self.breakers = breakers
        self.configured = Configured.of(model.current, config)
        self.version = 0
        self.counts = _Counts()
        self.random = random.Random()  # the shadow dice; tests may seed it
        self._tasks: set[asyncio.Task[None]] = set()
        self._reserved = 0.0  # worst-case dollars of judgements under way in this process
        self._today: tuple[str, float] = ("", 0.0)  # (UTC day, dollars spent that day, last read)
        self._refreshed = -1e18
        self._refitting: set[int] = set()
        self._feedback_seen = -1
        self._warned: set[str] = set()
        self.refitter = Refitter()
        if hasattr(store, "watch_s"):  # a fleet's store reads the version in a thread of its own
            store.watch_s = max(0.05, settings.refresh_ms / 1000)

    # -- the request observer ------------------------------------------------------------

    def observe(self, outcome: Outcome) -> None:
        """After every routed request: maybe look for a new version, maybe judge this one."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        now = time.monotonic()
        if now - self._refreshed >= self.settings.refresh_ms / 1000:
            self._refreshed = now
            self._spawn(loop, self.refresh())
        if self.judge is None or outcome.source == "cli" or self.settings.shadow_rate <= 0:
            return  # a one-shot CLI run ends before a judgement could
        pair = pair_of(self.model.current.tiers, outcome)
        if pair is None or self.random.random() >= self.settings.shadow_rate:
            return
        self._start(loop, outcome, pair)

    def _start(self, loop: asyncio.AbstractEventLoop, outcome: Outcome, pair: Pair) -> None:
        if sum(1 for t in self._tasks if t.get_name() == "shadow") >= self.settings.max_in_flight:
            self.counts.shadow["skipped-busy"] += 1
            return
        other = self._other_backend(pair)
        if other is None:
            self.counts.shadow["skipped-unavailable"] += 1
            return
        assert outcome.result is not None and self.judge is not None
        answered = outcome.result.completion.text
        estimate = self.judge.worst_case_usd(outcome.messages, other, len(answered))
        day, spent = self._today
        if day != utc_day():
            spent = 0.0
        if spent + self._reserved + estimate > self.settings.budget_usd_per_day:
            self.counts.shadow["skipped-budget"] += 1
            return
        self._reserved += estimate
        self._spawn(loop, self._shadow(list(outcome.messages), answered, pair, other, estimate), name="shadow")

    def _other_backend(self, pair: Pair) -> str | None:
        """The first backend of the other tier whose breaker lets a call through."""
        for name in self.model.current.tiers[pair.other].backends:
            if self.breakers[name].would_allow():  # a consortium's breaker never opens
                return name
        return None

    def _spawn(self, loop: asyncio.AbstractEventLoop, coro: Any, name: str = "learn") -> None:
        task = loop.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- one shadow judgement ------------------------------------------------------------

    async def _shadow(self, messages: list, answered: str, pair: Pair, other: str, estimate: float) -> None:
        assert self.judge is not None
        spent: list[float] = []
        try:
            today = await self._spent_today()
            if today + self._reserved > self.settings.budget_usd_per_day:  # another process spent it
                self.counts.shadow["skipped-budget"] += 1
                return
            judged = await self.judge.judge(messages, answered, pair, other, spent, allowance=estimate)
            if judged.label is None:
                self.counts.shadow["failed" if judged.error else "no-verdict"] += 1
                if judged.error:
                    self._warn_once("shadow", f"route: a shadow judgement failed ({judged.error}); requests are "
                                    "not affected")
                return
            local, hosted = judged.label
            prompt = last_user_text(messages)  # one label per prompt and boundary: a repeat adds nothing
            ref = f"shadow:{pair.boundary}:{hashlib.sha256(prompt.encode('utf-8', 'replace')).hexdigest()[:24]}"
            await asyncio.to_thread(self.store.add_labels, [(pair.boundary, "shadow", ref, prompt, local, hosted)])
            self.counts.shadow["judged"] += 1
            self._maybe_refit(pair.boundary)
        except asyncio.CancelledError:
            self._record_spend(spent)  # the router is closing: keep what the calls made so far cost
            spent = []
            raise
        except Exception as exc:  # the learner must never take a request down; say so once
            self.counts.shadow["failed"] += 1
            self._warn_once("shadow-bug", f"route: shadow judging failed ({exc!r}); requests are not affected")
        finally:
            self._reserved -= estimate
            if spent:
                await asyncio.to_thread(self._record_spend, spent)

    def _record_spend(self, spent: list[float]) -> None:
        if not spent:
            return
        usd = sum(spent)
        self.store.add_spend(usd, len(spent))
        self.counts.spent_usd += usd
        day, today = self._today
        self._today = (day, today + usd) if day == utc_day() else (utc_day(), usd)

    def spent_today(self) -> float:
        """Dollars spent today (UTC) as last read from the store, plus this process's since."""
        day, usd = self._today
        return usd if day == utc_day() else 0.0

    async def _spent_today(self) -> float:
        usd, _ = await asyncio.to_thread(self.store.spend)
        self._today = (utc_day(), usd)
        return usd

    # -- versions and refits -------------------------------------------------------------

    async def refresh(self) -> None:
        """Install the version the store says is current; with `auto`, import feedback and
        start the refits that are due."""
        try:
            current, _ = await asyncio.to_thread(self.store.current)
            if current != self.version:
                await self.use(current)
            await self._spent_today()
            if self.settings.auto:
                await self._import_feedback()
                counts = await asyncio.to_thread(self.store.usable_counts, self.settings.max_labels_per_key)
                for boundary, usable in counts.items():
                    self._maybe_refit(boundary, usable)
        except Exception as exc:  # a store that cannot be read leaves the version in use as it is
            self._warn_once("refresh", f"route: the learning store could not be read ({exc!r}); routing stays on "
                            f"version {self.version}")

    async def use(self, version: int) -> None:
        """Decide with `version`'s weights (0: the configured ones)."""
        self._install(version, *await asyncio.to_thread(self._load, version))

    def use_now(self, version: int) -> None:
        """`use`, blocking (when the Router is made, before any request)."""
        self._install(version, *self._load(version))

    def _load(self, version: int) -> tuple[dict[int, int], dict[int, Weights]]:
        row = self.store.version(version) if version else None
        heads = row.heads if row is not None else {}
        return heads, weights_of(self.store, self.configured, heads)

    def _install(self, version: int, heads: dict[int, int], weights: dict[int, Weights]) -> None:
        install(self.model, self.configured, weights, version)
        self.version = version

    async def _import_feedback(self) -> None:
        config = self.config
        count = await asyncio.to_thread(_feedback_count, config)
        if count != self._feedback_seen:
            self._feedback_seen = count
            await asyncio.to_thread(import_feedback, self.store, config)

    def _maybe_refit(self, boundary: int, labels: int | None = None) -> None:
        if not self.settings.auto or boundary in self._refitting:
            return
        with contextlib.suppress(RuntimeError):
            self._spawn(asyncio.get_running_loop(), self._refit(boundary, labels), name="refit")

    async def _refit(self, boundary: int, labels: int | None) -> None:
        self._refitting.add(boundary)
        try:
            if labels is None:
                usable = await asyncio.to_thread(self.store.usable_counts, self.settings.max_labels_per_key)
                labels = usable.get(boundary, 0)
            attempt = await asyncio.to_thread(self.store.claim_refit, boundary, labels, self.settings.refit_every)
            if attempt:
                await self._fit_and_adopt(boundary, attempt)
        except Exception as exc:
            self._warn_once("refit", f"route: refitting boundary {boundary} failed ({exc!r}); routing stays on "
                            f"version {self.version}")
        finally:
            self._refitting.discard(boundary)

    async def _fit_and_adopt(self, boundary: int, attempt: int) -> None:
        job = await asyncio.to_thread(self._job, boundary)
        if job is None:
            return
        current, heads, rows, _, _ = job
        weights, found, summary = await self._fit(boundary, attempt, job)
        outcome = self._outcome(found, rows, summary.get("moved"))
        record: dict[str, Any] = {"ts": time.time(), "boundary": boundary, "outcome": outcome, **summary}
        self.counts.last_refit[boundary] = record
        self.counts.refits[outcome] += 1
        if outcome != "adopted":
            if outcome == "waiting":
                record = {**record, "pending": {"parent": current, "weights": weights, "seen": rows[-1].id}}
                _LOG.warning("route: a refit of boundary %d waits for `route learn adopt`: it would move %s of the "
                             "last logged requests, beyond learn.max_moved", boundary, summary["moved"]["share"])
            await asyncio.to_thread(self.store.note_refit, boundary, record)
            return
        version = await asyncio.to_thread(self.store.adopt, current, boundary, weights, rows[-1].id, heads, summary)
        await asyncio.to_thread(self.store.note_refit, boundary, {**record, "version": version} if version else
                                {**record, "outcome": "kept", "reason": "another process adopted or rolled back first"})
        if version is not None:
            _LOG.info("route: adopted learned weights version %d for boundary %d (%s)", version, boundary,
                      found["reason"])
            await self.use(version)

    async def _fit(self, boundary: int, attempt: int, job: tuple[int, dict[int, int], list[LabelRow], Weights, int]
                   ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(the fitted weights, what the refitter found, the refit's summary): the summary says how
        much traffic the weights would move when the refitter would adopt them."""
        current, heads, rows, incumbent, seen = job
        base = self.configured.base[boundary]
        z = online_z(attempt)
        threshold = self.model.current.tiers[boundary].below  # what the boundary compares its score with now
        weights, found = await self.refitter.adapt(
            base.to_json(), [r.record() for r in rows], None if incumbent is base else incumbent.to_json(),
            {r.ref for r in rows if r.id <= seen}, z, threshold)
        summary = _summary(found, rows, attempt, z)
        if found["adopted"]:
            summary["moved"] = await asyncio.to_thread(self._moved, current, heads, boundary, weights, rows)
        return weights, found, summary

    def _outcome(self, found: dict[str, Any], rows: list[LabelRow], moved: dict[str, Any] | None) -> str:
        """kept | adopted | waiting: a version fitted on labels beyond the operator's own verdicts
        waits for `route learn adopt` when it moves more than `max_moved` of the logged traffic."""
        if not found["adopted"]:
            return "kept"
        own = all(r.source == "feedback" and r.trusted for r in rows)
        if own or moved is None or moved["share"] <= self.settings.max_moved:
            return "adopted"
        return "waiting"

    def _moved(self, current: int, heads: dict[int, int], boundary: int, weights: dict[str, Any],
               rows: list[LabelRow]) -> dict[str, Any]:
        """The traffic adopting `weights` for `boundary` would move (moves.py): the last logged
        requests, or without a request log to read, the labels' own prompts (shadow judging
        samples the traffic)."""
        from policies.complexity import Weights
        from router.learning.moves import moved, recent_prompts
        from router.learning.versions import model_of

        now = weights_of(self.store, self.configured, heads)
        before = model_of(self.configured, now, current)
        after = model_of(self.configured, {**now, boundary: Weights.from_json(weights, "a refit")}, current + 1)
        window = self.settings.moved_window
        logged = recent_prompts(self.config, window)
        if logged is not None:
            return moved(before, after, logged, window)
        return {**moved(before, after, [(r.prompt, r.giver) for r in rows[-window:]], window), "of": "labels"}

    def check(self) -> None:
        """Before a decision (the model slot's watch): install the version in use when a process
        changed it since the last look -- one stat of the store's stamp, a query only then."""
        try:
            if not self.store.changed():
                return
            current, _ = self.store.current()
            if current != self.version:
                self.use_now(current)
        except Exception as exc:  # a store that cannot be read leaves the version in use as it is
            self._warn_once("check", f"route: the learning store could not be read ({exc!r}); routing stays on "
                            f"version {self.version}")

    def _job(self, boundary: int) -> tuple[int, dict[int, int], list[LabelRow], Weights, int] | None:
        """What a refit of `boundary` starts from: (the version in use, its heads, the labels, the
        weights the boundary uses now, the last label id they were fitted on); None while a
        rollback pins the version or there are no labels."""
        rows = usable(self.store.labels(boundary), self.store.quarantined(),
                      self.settings.max_labels_per_key)[-MAX_LABELS:]
        current, pinned = self.store.current()
        if pinned or not rows:
            return None
        row = self.store.version(current) if current else None
        heads = dict(row.heads) if row is not None else {}
        incumbent, seen = self._incumbent(boundary, heads)
        return current, heads, rows, incumbent, seen

    def _incumbent(self, boundary: int, heads: dict[int, int]) -> tuple[Weights, int]:
        """(the weights boundary `boundary` uses now, the last label id they were fitted on)."""
        version = heads.get(boundary, 0)
        row = self.store.version(version) if version else None
        weights = weights_of(self.store, self.configured, {boundary: version})[boundary]
        return weights, row.seen if row is not None else 0

    # -- the end -------------------------------------------------------------------------

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            _LOG.warning("%s", message)

    async def aclose(self) -> None:
        """Cancel judgements and refits under way (their spend so far is recorded)."""
        tasks = [t for t in self._tasks if not t.done() and t.get_loop() is asyncio.get_running_loop()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        self.refitter.close()
        self.store.close()

    async def drain(self) -> None:
        """Wait for every judgement and refit under way (tests and benchmarks: no sleeps)."""
        while True:
            pending = [t for t in self._tasks if not t.done()]
            if not pending:
                return
            await asyncio.gather(*pending, return_exceptions=True)


def _summary(found: dict[str, Any], rows: list[LabelRow], attempt: int, z: float) -> dict[str, Any]:
    """What a refit found, and what it was fitted on: every label by its id (as runs), how many
    of each source, how many from each client key not trusted (an adopted version names them)."""
    return {**found, "labels_used": len(rows), "sources": dict(Counter(r.source for r in rows)), "refit": attempt,
            "z": round(z, 3),
            "label_ids": id_ranges(r.id for r in rows),
            "givers": dict(Counter(r.giver or "-" for r in rows if not r.trusted))}


def usable(rows: list[LabelRow], quarantined: set[str], per_key: int) -> list[LabelRow]:
    """The labels a refit reads, oldest first: every trusted one (router-made, the operator's,
    an admin key's), at most `per_key` of each other client key's (its most recent), none of a
    quarantined key's. So no single key -- nor a few -- can outweigh what the router itself
    judged, however many verdicts it posts."""
    kept: list[LabelRow] = []
    taken: Counter[str | None] = Counter()
    for row in reversed(rows):
        if row.giver is not None and row.giver in quarantined:
            continue
        if not row.trusted:
            if taken[row.giver] >= per_key:
                continue
            taken[row.giver] += 1
        kept.append(row)
    kept.reverse()
    return kept


def id_ranges(ids: Iterable[int]) -> list[list[int]]:
    """Label ids as [first, last] runs: which labels a version was fitted on, compactly."""
    runs: list[list[int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs


def _feedback_count(config: Config) -> int:
    """How many verdicts and preferences the request log holds (0 when it cannot be read)."""
    from backends.errors import ConfigError
    from router.store import StoreError
    from router.store.choice import open_log

    try:
        log = open_log(config, check=False)
    except (StoreError, ConfigError):
        return 0
    try:
        return log.feedback_count()
    except StoreError:
        return 0
    finally:
        log.close()
