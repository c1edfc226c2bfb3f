"""A per-backend latency model: decayed quantiles of time-to-first-unit and time-per-unit.

A *unit* is what a backend's time grows by: a token for an autoregressive model, a whole canvas
(`canvas_length` token slots denoised together) for a diffusion model. So

    autoregressive:  total = first token + (tokens - 1)   * seconds per token
    diffusion:       total = first canvas + (canvases - 1) * seconds per canvas

and a 20-token diffusion answer costs as much time as a 256-token one. Each quantity is a
log-binned histogram whose weights decay by half every `half_life` samples, so p50/p95 follow
drift (a backend that slows down mid-run is noticed within tens of requests; LiteLLM's window of
ten frozen samples never notices). Pure: no I/O; the caller hands in wall-clock times (`now`), so
tests need no clock.

Priors from config are optional: they only start the estimate sooner. Uncertainty is part of
every prediction, so one sample is not trusted like thirty:

    nothing measured, no prior   known=False: the p95 is a generic guess that must not be trusted,
                                 and `optimistic_s` is 0 (it might meet any deadline: try it)
    prior only                   p95 = prior x 1.5; optimistic = the prior's p50
    n samples' worth of evidence p95 = estimate x (1 + 0.5/sqrt(n)), optimistic = estimate / that
                                 (one sample: x1.5; a saturated history, ~29 samples: x1.09)

`p95_s` is what a deadline is checked against (the cautious side); `optimistic_s` is the best the
backend could plausibly do, which decides whether it is worth trying at all: a backend is ruled
out only once its measurements show it cannot make the deadline, never for lack of them.

State is a JSON-able dict (`to_dict` / `from_dict`); `merged` replays one model's fresh samples
onto another's state, which is how several processes share one store without clobbering.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Literal

__all__ = ["DecayedHistogram", "LatencyModel", "Prediction", "Prior", "QueueState", "answer_tokens"]

Decoding = Literal["autoregressive", "diffusion"]

_BINS_PER_DECADE = 24  # ~10% wide bins: finer than the noise of any network call
_FLOOR = 1e-6  # smallest value a bin can hold (seconds per token on a fast GPU is ~1e-3)
_PRUNE = 1e-9  # weights below this are dropped so state stays small
# A histogram's stored weights are brought back to scale once its decay factor falls below
# this: about every 200 samples at a half-life of 20.
_RESCALE_BELOW = 1e-3
_PRIOR_SPREAD = 1.5  # prior p95 = prior p50 x this: an honest "we do not know yet"
# Evidence-based widening of a measured p95: x (1 + _WIDEN / sqrt(n)) for n samples' worth.
_WIDEN = 0.5
# This many failures in a row and then an answer: an outage that ended, not a failure rate.
_OUTAGE_FAILURES = 3
# A call abandoned before its first content is learned as this many times the time it ran.
_CENSORED_FACTOR = 2.0
_STATE_VERSION = 1
# Answer length when neither max_tokens nor a measured answer length is known: (p50, p95) tokens.
_DEFAULT_ANSWER = (200, 500)


def _bin(x: float) -> int:
    return max(0, math.floor(math.log10(max(x, _FLOOR) / _FLOOR) * _BINS_PER_DECADE))


def _edge(index: int) -> float:
    return _FLOOR * 10 ** (index / _BINS_PER_DECADE)


class DecayedHistogram:
    """Log-binned histogram; every new sample first multiplies older weights by `keep`.

    `weight` is the decayed sample mass (it saturates at 1/(1-keep), ~29 for a half-life of 20);
    `count` is how many samples were ever added, used to replay fresh samples onto other state.

    The decay is kept as one factor rather than applied to every bin: the stored weights times
    `_scale` are the weights (`bins`), so a sample costs a multiplication, not a pass over the
    bins (every request adds eight). They are brought back to scale, and those too small to
    matter dropped, when the factor gets small or `bins` is read. Quantiles do not need it:
    they are ratios of weights, the same at any scale, read from a cumulative table made once
    per change (every decision asks for four)."""

    __slots__ = ("keep", "_stored", "_scale", "weight", "total", "count", "_cdf")

    def __init__(self, half_life: float = 20.0):
        self.keep = 0.5 ** (1.0 / half_life)
        self._stored: dict[int, float] = {}
        self._scale = 1.0
        self.weight = 0.0
        self.total = 0.0  # decayed sum of values, for the mean
        self.count = 0
        # (bin indexes in order, their running sums in that order, the sum of the weights), or None
        self._cdf: tuple[list[int], list[float], float] | None = None

    @property
    def bins(self) -> dict[int, float]:
        """Bin index -> decayed weight."""
        if self._scale != 1.0:
            self._rescale()
        return self._stored

    @bins.setter
    def bins(self, bins: dict[int, float]) -> None:
        self._stored, self._scale, self._cdf = bins, 1.0, None

    def _rescale(self) -> None:
        scale = self._scale
        self._stored = {i: kept for i, w in self._stored.items() if (kept := w * scale) > _PRUNE}
        self._scale = 1.0
        self._cdf = None

    def add(self, value: float) -> None:
        stored = self._stored
        if stored:
            keep = self.keep
            self._scale *= keep
            self.weight *= keep
            self.total *= keep
            if self._scale < _RESCALE_BELOW:
                self._rescale()
                stored = self._stored
        index = max(0, math.floor(math.log10(max(value, _FLOOR) / _FLOOR) * _BINS_PER_DECADE))  # _bin(value)
        stored[index] = stored.get(index, 0.0) + 1.0 / self._scale
        self.weight += 1.0
        self.total += value
        self.count += 1
        self._cdf = None

    def decay(self, samples: int) -> None:
        """Age the weights as if `samples` newer samples had arrived."""
        if samples <= 0 or not self._stored:
            return
        factor = self.keep**samples
        self._scale *= factor
        self._rescale()
        self.weight *= factor
        self.total *= factor

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0..1), interpolated geometrically inside its bin; None when empty."""
        if self.weight <= _PRUNE:
            return None
        cdf = self._cdf
        stored = self._stored
        if cdf is None:
            order = sorted(stored)
            # Running sums added in the order a walk up the bins adds them.
            cdf = self._cdf = (order, list(accumulate(map(stored.__getitem__, order))), sum(stored.values()))
        order, running_sums, total = cdf
        target = q * total
        at = bisect_left(running_sums, target)  # the first bin whose running sum reaches the target
        if at == len(order):
            return _edge(max(stored) + 1)
        index, running = order[at], running_sums[at - 1] if at else 0.0
        w = stored[index]
        fraction = (target - running) / w if w else 0.5
        low, high = _edge(index), _edge(index + 1)
        return low * (high / low) ** fraction

    def mean(self) -> float | None:
        return self.total / self.weight if self.weight > _PRUNE else None

    def merged(self, fresh: DecayedHistogram) -> DecayedHistogram:
        """This state with `fresh`'s samples replayed on top, as if added here one by one."""
        out = self.copy()
        out.decay(fresh.count)
        for index, w in fresh.bins.items():
            out.bins[index] = out.bins.get(index, 0.0) + w
        out.weight += fresh.weight
        out.total += fresh.total
        out.count += fresh.count
        out._cdf = None
        return out

    def copy(self) -> DecayedHistogram:
        out = DecayedHistogram.__new__(DecayedHistogram)
        out.keep, out._stored, out._scale, out.count = self.keep, dict(self._stored), self._scale, self.count
        out.weight, out.total, out._cdf = self.weight, self.total, self._cdf
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"bins": {str(i): w for i, w in self.bins.items()}, "weight": self.weight,
                "total": self.total, "count": self.count}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], half_life: float = 20.0) -> DecayedHistogram:
        out = cls(half_life)
        out.bins = {int(i): float(w) for i, w in (data.get("bins") or {}).items()}
        out.weight = float(data.get("weight", sum(out.bins.values())))
        out.total = float(data.get("total", 0.0))
        out.count = int(data.get("count", 0))
        return out


@dataclass(frozen=True, slots=True)
class Prior:
    """What config says before anything is measured. Seconds; None = use a generic default."""

    ttft_s: float | None = None
    tokens_per_s: float | None = None
    canvas_s: float | None = None


@dataclass(frozen=True, slots=True)
class QueueState:
    """A backend's own line of requests (the in-process engine serves `max_batch` at a time):
    requests waiting, requests being generated, and how many one batch holds."""

    waiting: int = 0
    running: int = 0
    max_batch: int = 1

    @property
    def batches_ahead(self) -> int:
        """Whole generations a new request waits for: the batch in progress (a running batch
        cannot be joined), then the full batches formed by those already waiting."""
        return (1 if self.running else 0) + self.waiting // max(1, self.max_batch)


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Prediction:
    """Predicted wall time for one request on one backend. Seconds; queue wait included."""

    p50_s: float
    p95_s: float
    first_p50_s: float  # to the first token (autoregressive) or first canvas (diffusion)
    first_p95_s: float
    output_tokens: int  # the expected answer length used
    samples: int  # measured samples behind the estimate (0 = priors only)
    failure_rate: float
    # The p95 at the good end of what the evidence allows: 0.0 when nothing is known.
    optimistic_s: float = 0.0
    known: bool = True  # False: neither a prior nor a sample; p95_s is a placeholder guess
    queue_s: float = 0.0  # of p50_s, the expected wait behind other requests (0: none queued)
    queue: QueueState | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"p50_s": round(self.p50_s, 4), "p95_s": round(self.p95_s, 4),
                               "optimistic_p95_s": round(self.optimistic_s, 4), "first_p95_s": round(self.first_p95_s, 4),
                               "output_tokens": self.output_tokens, "samples": self.samples, "known": self.known,
                               "failure_rate": round(self.failure_rate, 3)}
        if self.queue is not None:
            out["queue"] = {"waiting": self.queue.waiting, "running": self.queue.running,
                            "max_batch": self.queue.max_batch, "wait_p50_s": round(self.queue_s, 4)}
        return out


def answer_tokens(max_tokens: int | None, learned: tuple[float, float] | None) -> tuple[int, int]:
    """(p50, p95) answer length: the learned natural length capped by max_tokens, else max_tokens,
    else a generic guess."""
    if learned is not None:
        p50, p95 = learned
    elif max_tokens is not None:
        return max_tokens, max_tokens
    else:
        p50, p95 = _DEFAULT_ANSWER
    if max_tokens is not None:
        p50, p95 = min(p50, max_tokens), min(p95, max_tokens)
    return max(1, round(p50)), max(1, round(p95))


class LatencyModel:
    """One backend's latency: learn with `observe`, ask with `predict`."""

    def __init__(self, decoding: Decoding = "autoregressive", *, canvas_length: int = 256,
                 prior: Prior | None = None, half_life: float = 20.0, prior_weight: float = 3.0,
                 retry_backoff_s: float = 0.25):
        self.decoding = decoding
        self.canvas_length = canvas_length
        self.prior = prior or Prior()
        self.half_life = half_life
        self.prior_weight = prior_weight  # how many measured samples the prior is worth
        self.retry_backoff_s = retry_backoff_s  # what one retry of a failed call costs on top
        self.first = DecayedHistogram(half_life)
        self.unit = DecayedHistogram(half_life)
        self.answer = DecayedHistogram(half_life)  # natural answer lengths (not cut by max_tokens), tokens
        self.failures = DecayedHistogram(half_life)  # 0/1 per attempt; its mean is the failure rate
        self.last_ts = 0.0  # unix seconds of the newest sample, for exploration of stale backends
        self.queue: QueueState | None = None  # the backend's line right now, set by whoever owns it
        self.failure_run = 0  # failed calls in a row, to tell an outage from intermittent failures

    # -- priors ---------------------------------------------------------------------------

    @property
    def has_prior(self) -> bool:
        """Whether config said anything about this backend's speed."""
        p = self.prior
        return p.ttft_s is not None or p.tokens_per_s is not None or p.canvas_s is not None

    def _prior_first(self) -> float:
        ttft = self.prior.ttft_s
        if self.decoding == "diffusion":
            return (ttft if ttft is not None else 0.05) + self._prior_unit()
        return ttft if ttft is not None else 1.0

    def _prior_unit(self) -> float:
        if self.decoding == "diffusion":
            return self.prior.canvas_s if self.prior.canvas_s is not None else 0.5
        return 1.0 / (self.prior.tokens_per_s or 50.0)

    def _prior_weight_now(self, hist: DecayedHistogram) -> float:
        """The prior counts as `prior_weight` samples at first and fades linearly to nothing once
        twice that many have been measured: a prior that is far off must not linger. No prior
        from config: nothing (the generic defaults are placeholders, not evidence)."""
        if not self.has_prior:
            return 0.0
        return self.prior_weight * max(0.0, 1.0 - hist.count / (2 * self.prior_weight or 1))

    def _estimate(self, hist: DecayedHistogram, prior: float, q: float) -> float:
        """Prior and measurement blended by weight."""
        prior_q = prior * (_PRIOR_SPREAD if q > 0.5 else 1.0)
        measured = hist.quantile(q)
        if measured is None:
            return prior_q
        prior_w = self._prior_weight_now(hist)
        return (prior_w * prior_q + hist.weight * measured) / (prior_w + hist.weight)

    def evidence(self) -> float:
        """How many samples' worth of evidence the estimate rests on: the decayed count of
        measured calls plus what is left of the prior's weight."""
        return self.first.weight + self._prior_weight_now(self.first)

    def spread(self) -> float:
        """The factor between the point estimate of the p95 and its cautious (x) and optimistic
        (/) ends: 1 + _WIDEN/sqrt(evidence) once something was measured; before that the
        prior's own spread (with a prior) or infinity (without: anything is possible)."""
        if self.first.weight <= _PRUNE:
            return _PRIOR_SPREAD if self.has_prior else math.inf
        return 1.0 + _WIDEN / math.sqrt(self.evidence())

    # -- prediction -----------------------------------------------------------------------

    @property
    def samples(self) -> int:
        """Calls measured: each answered or abandoned call adds one time-to-first-content sample."""
        return self.first.count

    def summary(self) -> dict[str, Any]:
        """What was learned, in seconds, for `route models` and /metrics: first content (first
        token, or first canvas for diffusion) and the per-unit time (per token, or per canvas)."""
        prediction = self.predict()
        unit50 = self._estimate(self.unit, self._prior_unit(), 0.5)
        out: dict[str, Any] = {"samples": self.samples, "ttft_p50_s": round(prediction.first_p50_s, 4),
                               "ttft_p95_s": round(prediction.first_p95_s, 4),
                               "failure_rate": round(prediction.failure_rate, 3)}
        if self.decoding == "diffusion":
            out["canvas_p50_s"] = round(unit50, 4)
        else:
            out["tokens_per_s"] = round(1.0 / unit50, 1) if unit50 > 0 else None
        return out

    def failure_rate(self) -> float:
        return self.failures.mean() or 0.0

    def learned_answer(self) -> tuple[float, float] | None:
        p50, p95 = self.answer.quantile(0.5), self.answer.quantile(0.95)
        if self.answer.weight < 1.0 or p50 is None or p95 is None:
            return None
        return p50, p95

    def _units(self, tokens: int) -> int:
        if self.decoding == "diffusion":
            return max(1, math.ceil(tokens / self.canvas_length))
        return max(1, tokens)

    def predict(self, max_tokens: int | None = None) -> Prediction:
        """Predicted time for a request asking for at most `max_tokens` (None = no cap)."""
        n50, n95 = answer_tokens(max_tokens, self.learned_answer())
        first50 = self._estimate(self.first, self._prior_first(), 0.5)
        first95 = max(first50, self._estimate(self.first, self._prior_first(), 0.95))
        unit50 = self._estimate(self.unit, self._prior_unit(), 0.5)
        unit95 = max(unit50, self._estimate(self.unit, self._prior_unit(), 0.95))
        p50 = first50 + (self._units(n50) - 1) * unit50
        p95 = first95 + (self._units(n95) - 1) * unit95
        spread = self.spread()
        measured = self.first.weight > _PRUNE
        # Prior only: the prior's p95 already carries its spread, and its p50 is the good end.
        optimistic = p95 / spread if measured else (p50 if self.has_prior else 0.0)
        if measured:
            p95 *= spread
        fail = self.failure_rate()
        # A failed call is retried: expected time grows by the chance of paying for it twice, and
        # once failures are common the slow tail is a retry.
        p50 += fail * (self.retry_backoff_s + p50)
        if fail > 0.05:
            p95 += self.retry_backoff_s + p50
        known = measured or self.has_prior
        # Behind other requests a new one waits whole generations, each about one answer long.
        ahead = self.queue.batches_ahead if self.queue is not None else 0
        wait50, wait95 = ahead * p50, ahead * p95
        return Prediction(p50 + wait50, p95 + wait95, first50 + wait50, first95 + wait95, n50, self.samples, fail,
                          optimistic + wait50, known, queue_s=wait50, queue=self.queue)

    # -- learning -------------------------------------------------------------------------

    def observe(self, total_s: float, *, first_s: float | None = None, output_tokens: int = 1,
                canvases: int | None = None, truncated: bool = False, now: float = 0.0) -> None:
        """Learn from one successful call. `first_s` is the measured time to first content (a
        stream), None when only the total is known; `truncated` means max_tokens cut the answer."""
        if self.failure_run >= _OUTAGE_FAILURES:
            # The first answer after a run of failures: an outage (the breaker's business) is
            # over, and its failures say nothing about the odds of failing from now on.
            self.failures = DecayedHistogram(self.half_life)
        self.failure_run = 0
        self.failures.add(0.0)
        self.last_ts = max(self.last_ts, now)
        if not truncated and output_tokens > 0:
            self.answer.add(float(output_tokens))
        units = canvases if (self.decoding == "diffusion" and canvases) else self._units(output_tokens)
        if first_s is not None:
            self.first.add(max(first_s, _FLOOR))
            if units > 1:
                self.unit.add(max((total_s - first_s) / (units - 1), _FLOOR))
            return
        if units <= 1:
            self.first.add(max(total_s, _FLOOR))
            return
        # Only the total is known: split it in the proportion the model currently expects, so a
        # backend that slows down moves both estimates.
        first50 = self._estimate(self.first, self._prior_first(), 0.5)
        unit50 = self._estimate(self.unit, self._prior_unit(), 0.5)
        scale = total_s / (first50 + (units - 1) * unit50)
        self.first.add(max(first50 * scale, _FLOOR))
        self.unit.add(max(unit50 * scale, _FLOOR))

    def observe_failure(self, now: float = 0.0) -> None:
        self.failure_run += 1
        self.failures.add(1.0)
        self.last_ts = max(self.last_ts, now)

    def observe_censored(self, elapsed_s: float, now: float = 0.0) -> None:
        """A call abandoned after `elapsed_s` with no first content yet (timed out, or lost a
        hedge race): the first-content time is at least that, so it is learned as a sample (at
        the current median when that is later; with nothing known, at `elapsed_s` itself)."""
        first50 = (self._estimate(self.first, self._prior_first(), 0.5)
                   if self.first.weight > _PRUNE or self.has_prior else 0.0)
        # Only a lower bound is known, and taking it at face value would leave a backend that
        # keeps losing hedge races (or timing out) looking just fast enough to keep being tried:
        # how much later it would have been is unknown, so assume as late again.
        value = max(elapsed_s * _CENSORED_FACTOR, first50, _FLOOR)
        self.first.add(value)
        if first50 > 0 and value > first50 and (self.unit.weight > _PRUNE or self.has_prior):
            # Late to start is taken as slow throughout (as a total-only sample is split): a
            # backend that slowed down must not keep its old decode rate in the estimate.
            self.unit.add(self._estimate(self.unit, self._prior_unit(), 0.5) * value / first50)
        self.last_ts = max(self.last_ts, now)

    def observe_cut(self, elapsed_s: float, first_s: float, now: float = 0.0) -> None:
        """A call stopped `elapsed_s` in, after its first content came at `first_s` (a hedge lost
        while decoding, a deadline mid-answer). The first-content time is a real sample; the rest
        of a typical answer took longer than what was left, so the per-unit time is more than that
        share (learned at the current median when that is larger)."""
        known = self.first.weight > _PRUNE or self.has_prior
        first50 = self._estimate(self.first, self._prior_first(), 0.5) if known else 0.0
        self.first.add(max(first_s, _FLOOR))
        self.last_ts = max(self.last_ts, now)
        learned = self.learned_answer()
        units = self._units(round(learned[0]) if learned else _DEFAULT_ANSWER[0])
        if units <= 1:
            return
        unit50 = (self._estimate(self.unit, self._prior_unit(), 0.5)
                  if self.unit.weight > _PRUNE or self.has_prior else 0.0)
        # As for a call stopped before its first content: as late again as it was seen to be, and
        # late to start is taken as slow throughout.
        slower = first_s / first50 if first50 > 0 and first_s > first50 else 1.0
        self.unit.add(max(_CENSORED_FACTOR * (elapsed_s - first_s) / (units - 1), unit50 * slower, _FLOOR))

    # -- state ----------------------------------------------------------------------------

    def _parts(self) -> dict[str, DecayedHistogram]:
        return {"first": self.first, "unit": self.unit, "answer": self.answer, "failures": self.failures}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"v": _STATE_VERSION, "decoding": self.decoding, "last_ts": self.last_ts}
        out.update({name: hist.to_dict() for name, hist in self._parts().items()})
        return out

    def load_dict(self, data: Mapping[str, Any]) -> bool:
        """Replace learned state with `data`; False (and nothing changed) when it is from another
        version or another kind of decoding, e.g. after the config changed the backend."""
        if data.get("v") != _STATE_VERSION or data.get("decoding") != self.decoding:
            return False
        for name in self._parts():
            setattr(self, name, DecayedHistogram.from_dict(data.get(name) or {}, self.half_life))
        self.last_ts = float(data.get("last_ts", 0.0))
        return True

    def fresh(self) -> LatencyModel:
        """An empty model with the same settings, to collect samples not yet saved."""
        return LatencyModel(self.decoding, canvas_length=self.canvas_length, prior=self.prior,
                            half_life=self.half_life, prior_weight=self.prior_weight,
                            retry_backoff_s=self.retry_backoff_s)

    def merged(self, fresh: LatencyModel) -> LatencyModel:
        """A copy of this model with `fresh`'s samples replayed on top."""
        out = self.fresh()
        for name, hist in self._parts().items():
            setattr(out, name, hist.merged(getattr(fresh, name)))
        out.last_ts = max(self.last_ts, fresh.last_ts)
        return out
