"""What the web view remembers of recent traffic: bounded, in this process's memory.

The server's watch of each request it serves (router/server/metrics.py `Served`) hands it here:
`LiveView.observe` adds every finished request to spend buckets of 10 s for the hour and, while a
page is open (polled within WATCH_S), keeps one `LiveRequest` for it -- who sent it and over which
protocol, the decision's parts, what came of it, a consortium's trace without its texts;
`LiveView.attempt` keeps,
while a page is open, each backend's recent calls (time to first token, decode rate, failures)
for the observed side of the backends panel. Observing stores references and a few numbers;
turning them into JSON (router/server/ui/render.py) waits until a page asks. With no page open
a request costs a few additions: the view records only while someone looks (what came before is
in the request log).

Nothing here is written anywhere: prompts and answers are not kept (the request detail reads
them from the request log, which decides whether content is stored at all).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from backends.types import Price, Usage

if TYPE_CHECKING:
    from policies.ladder import Crossing
    from policies.selection import Plan
    from router.decision import Attempt, Decision, Outcome
    from router.ports import RouterService

__all__ = ["BUCKET_S", "HOUR_S", "WATCH_S", "LiveRequest", "LiveView", "Sample", "slim_trace"]

HOUR_S = 3600
BUCKET_S = 10  # spend is kept per 10 s, so a chart of the last few minutes has bars to show too
_REQUESTS = 500  # requests kept for the live list (the page shows the newest 200)
# Requests that keep their conversation's texts, for what their detail says was set aside; older
# ones keep their decision without them, so memory does not grow with 500 agents' conversations
# (the prompt and answer of any request come from the request log).
_CONVERSATIONS = 32
_TRACES = 40  # consortium runs kept for the timelines
_SAMPLES = 200  # calls kept per backend for the observed latency
# A page polls about once a second while visible; this long after its last poll, the requests
# are no longer kept one by one (only counted): a closed page costs no LiveRequest per request.
WATCH_S = 30.0
_MESSAGE_CHARS = 300
_TEXT_FIELDS = frozenset({"text", "reply", "answer"})  # a trace's texts: not needed to draw it


@dataclass(slots=True)
class LiveRequest:
    """One finished request as the view shows it. Seconds, dollars; `ts` when it began (unix).
    Not frozen: one is built for every request the server answers, and a frozen dataclass's
    constructor costs several times a plain one's; nothing changes it once built."""

    seq: int
    ts: float
    protocol: str
    key: str | None
    status: str  # ok | error | cancelled
    backend: str | None
    elapsed_s: float
    decision: Decision
    model: str | None = None
    ttft_s: float | None = None
    total_s: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    hosted_cost_usd: float | None = None  # the same tokens at the top tier's price
    failures: tuple[tuple[str, str, str], ...] = ()  # (backend, error type, message), in order
    error: str | None = None
    downgrade: dict[str, Any] | None = None
    degraded: tuple[str, ...] = ()
    trace: dict[str, Any] | None = None  # a consortium's, texts left out
    trace_id: str | None = None
    simulated: bool = False

    @property
    def plan(self) -> Plan:
        return self.decision.plan

    @property
    def crossings(self) -> tuple[Crossing, ...]:
        return self.decision.crossings


@dataclass(slots=True)
class Sample:
    """One call to one backend (routed, consortium member or arbiter). Not frozen, as
    LiveRequest: one is built per call, and nothing changes it once built."""

    ts: float
    ok: bool
    ttft_s: float | None
    total_s: float
    decode_tps: float | None


@dataclass(slots=True)
class _Bucket:
    requests: int = 0
    cost: float = 0.0
    hosted: float = 0.0
    backends: dict[str, list[float]] = field(default_factory=dict)  # name -> [requests, dollars]
    keys: dict[str, list[float]] = field(default_factory=dict)


def slim_trace(trace: dict[str, Any]) -> dict[str, Any]:
    """A consortium trace without the texts (answers, arbiter replies): what a timeline needs."""
    out: dict[str, Any] = {}
    for name, value in trace.items():
        if name in _TEXT_FIELDS:
            continue
        if isinstance(value, dict):
            out[name] = slim_trace(value)
        elif isinstance(value, list):
            out[name] = [slim_trace(v) if isinstance(v, dict) else v for v in value]
        else:
            out[name] = value
    return out


def _cut(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS - 1] + "…"


def _last_tried(outcome: Outcome) -> str:
    """A failed request's backend: the last one tried."""
    errors = getattr(outcome.error, "exceptions", None)
    return str(getattr(errors[-1], "backend", "") or "-") if errors else outcome.decision.chosen


def _failures(errors: Any) -> tuple[tuple[str, str, str], ...]:
    if not errors:  # most requests: no generator to start
        return ()
    return tuple((str(getattr(e, "backend", "") or "-"), type(e).__name__, _cut(str(e))) for e in errors)


class LiveView:
    """The bounded memory behind the page. `clock`: unix seconds (tests may pass their own)."""

    def __init__(self, router: RouterService, *, clock: Callable[[], float] = time.time):
        self.clock = clock
        self.started = clock()
        self.seq = 0  # requests observed so far; each LiveRequest carries its number
        self.requests: deque[LiveRequest] = deque(maxlen=_REQUESTS)
        self.traces: deque[LiveRequest] = deque(maxlen=_TRACES)
        self.samples: dict[str, deque[Sample]] = {}
        self.buckets: dict[int, _Bucket] = {}  # start (unix seconds // BUCKET_S) -> figures
        self.hosted = _hosted(router)
        self.watched_until = -float("inf")  # clock() time; see watch()
        self.recording_since: float | None = None  # when the open page began to be recorded for

    # -- observers ------------------------------------------------------------------------

    def watch(self) -> None:
        """A page asked for data: keep recording requests for WATCH_S more. After a time with
        no page open, what was kept before that time is dropped: the list has no gap in it."""
        now = self.clock()
        if now >= self.watched_until:
            self.recording_since = now
            self.requests.clear()
            self.traces.clear()
            self.samples.clear()
        self.watched_until = now + WATCH_S

    @property
    def watching(self) -> bool:
        return self.clock() < self.watched_until

    def observe(self, outcome: Outcome, protocol: str = "python", key: str | None = None) -> None:
        """A served request's outcome (router/server/metrics.py `Served`), which came in by `protocol` with
        the client key named `key`: every request counts towards the hour's spend; while a page
        is open, each is kept too, as a LiveRequest."""
        self.seq += 1
        if not self.watching:
            self._count_unwatched(outcome, key)
            return
        entry = self._entry(outcome, protocol, key)
        self.requests.append(entry)
        self._forget_conversation()
        if entry.trace is not None:
            self.traces.append(entry)
        self._count(entry.ts + entry.elapsed_s, entry.backend, entry.key, entry.cost_usd, entry.hosted_cost_usd)

    def attempt(self, attempt: Attempt, decision: Decision | None) -> None:
        """An upstream attempt of a served request: while a page is open, every call to every
        backend, for the observed latency."""
        if attempt.cancelled or not self.watching:
            return  # (a hedge that lost the race says nothing about the backend)
        c = attempt.completion
        timings = c.timings if c is not None else None
        sample = Sample(self.clock(), attempt.error is None, timings.ttft_s if timings else attempt.first_s,
                        timings.total_s if timings else attempt.elapsed_s, timings.decode_tps if timings else None)
        samples = self.samples.get(attempt.backend)
        if samples is None:
            samples = self.samples[attempt.backend] = deque(maxlen=_SAMPLES)
        samples.append(sample)

    # -- reading --------------------------------------------------------------------------

    def since(self, seq: int, limit: int, sees: Callable[[str | None], bool] | None = None) -> list[LiveRequest]:
        """Requests numbered above `seq`, newest first, at most `limit`; with `sees`, only those
        whose key it sees."""
        out: list[LiveRequest] = []
        for entry in reversed(self.requests):
            if entry.seq <= seq or len(out) >= limit:
                break
            if sees is None or sees(entry.key):
                out.append(entry)
        return out

    def find(self, seq: int) -> LiveRequest | None:
        return next((e for e in reversed(self.requests) if e.seq == seq), None)

    def last_hour(self) -> list[tuple[float, _Bucket]]:
        """(start in unix seconds, figures) of each bucket of the last hour that saw a request, oldest first."""
        now = int(self.clock() // BUCKET_S)
        return sorted((b * BUCKET_S, f) for b, f in self.buckets.items() if (now - b) * BUCKET_S < HOUR_S)

    def _forget_conversation(self) -> None:
        # Each entry passes this position once, on the way from the newest to the oldest.
        if len(self.requests) > _CONVERSATIONS:
            older = self.requests[-_CONVERSATIONS - 1]
            older.decision = older.decision.without_texts()

    # -- building -------------------------------------------------------------------------

    def _entry(self, outcome: Outcome, protocol: str, key: str | None) -> LiveRequest:
        decision, elapsed_s = outcome.decision, outcome.elapsed_s
        ts = self.clock() - elapsed_s
        result = outcome.result
        if result is None:
            error = outcome.error
            failures = _failures(getattr(error, "exceptions", None))
            status = "cancelled" if isinstance(error, asyncio.CancelledError) else "error"
            backend = _last_tried(outcome)
            message = str(error) or ("the client went away" if status == "cancelled" else type(error).__name__)
            return LiveRequest(self.seq, ts, protocol, key, status, backend, elapsed_s, decision, total_s=elapsed_s,
                               failures=failures, error=f"{type(error).__name__}: {_cut(message)}")
        c = result.completion
        metadata = c.metadata
        trace = metadata.get("trace")
        downgrade = result.downgrade
        return LiveRequest(
            self.seq, ts, protocol, key, "ok", c.backend, elapsed_s, decision, model=c.model,
            ttft_s=c.timings.ttft_s, total_s=c.timings.total_s, input_tokens=c.usage.input_tokens,
            output_tokens=c.usage.output_tokens, cost_usd=c.cost_usd, hosted_cost_usd=self._hosted_cost(c.usage),
            failures=_failures(result.failures),
            downgrade=downgrade.as_dict() if downgrade is not None else None,
            degraded=tuple(metadata.get("degraded") or ()),
            trace=slim_trace(trace) if isinstance(trace, dict) else None,
            trace_id=metadata.get("trace_id"), simulated=bool(metadata.get("simulated")))

    def _hosted_cost(self, usage: Usage) -> float | None:
        return None if self.hosted is None else self.hosted[1].cost(usage)

    def _count_unwatched(self, outcome: Outcome, key: str | None) -> None:
        result = outcome.result
        if result is None:
            self._count(self.clock(), _last_tried(outcome), key, 0.0, None)
            return
        c = result.completion
        self._count(self.clock(), c.backend, key, c.cost_usd, self._hosted_cost(c.usage))

    def _count(self, ended: float, backend: str | None, key: str | None, cost: float, hosted: float | None) -> None:
        index = int(ended // BUCKET_S)
        bucket = self.buckets.get(index)
        if bucket is None:
            bucket = self.buckets[index] = _Bucket()
            for old in [b for b in self.buckets if (index - b) * BUCKET_S >= HOUR_S]:
                del self.buckets[old]
        bucket.requests += 1
        bucket.cost += cost
        bucket.hosted += hosted or 0.0
        for table, name in ((bucket.backends, backend or "-"), (bucket.keys, key or "-")):
            figures = table.get(name)
            if figures is None:
                figures = table[name] = [0, 0.0]
            figures[0] += 1
            figures[1] += cost


def _hosted(router: RouterService) -> tuple[str, Price] | None:
    """The backend "always hosted" means: the first backend of the strongest tier, with its price."""
    tiers = router.view.config.routing.tiers
    for name in tiers[-1].backends if tiers else ():
        spec = router.view.config.backends.get(name)
        if spec is not None:
            return name, spec.settings(name).price
    return None
