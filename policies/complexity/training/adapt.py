"""Adapting the weights in use to a deployment's own labels, so that it never routes worse.

`route calibrate`, `route calibrate --from-log` and the router's online learning
(router/learning/) all come here. The adapted score is the current one plus two learned terms,
each a step away from it:

    s(x) = s0(x) + step_f * features(x) + step_w * words(x)        (each term standardised)

- `s0` is the current weights' logit: the prior everything is centred on. With both steps 0
  the adapted weights are the current ones, and a step is only taken as far as the labels
  support it: the steps are chosen by cross-validation inside the labels (`STEPS`), and a
  larger step must win on folds it was not fitted on.
- `features`: ridge regression of what `s0` leaves unexplained (the gain hosted - local, less
  its linear fit on `s0`) on the standardised hand-designed features; in the weights file it
  moves each feature's weight.
- `words`: the mean, over the prompt's hashed words and word pairs (`domain.py`), of each
  bucket's shrunken mean residual: the deployment's own vocabulary (subjects, task names),
  which carries most of what a scorer fitted in-domain gains (`benchmarks/routing_ceiling.py`).

Whether to adopt is judged by nested cross-validation: in each of `folds` folds (`repeats`
times over, folds drawn by hash), the steps are chosen on the other folds only, the terms
fitted on them, and the fold scored; APGR of those out-of-fold scores against the current
weights' APGR on the same prompts is the gain, its standard error bootstrapped over prompts.
The adapted weights are adopted only when the gain exceeds `z` standard errors. A few labels
give wide errors, so they move nothing; no label is ever scored by a model that saw it.

The adapted weights keep the current score scale (mean and spread of the logit over the
labelled prompts) and hosted share (the stored threshold moves to the same quantile), so
score bands in a config keep their meaning. Pure Python; deterministic for given records.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from policies.complexity.domain import tokens
from policies.complexity.features import FEATURES, extract
from policies.complexity.model import ComplexityScorer, Weights
from policies.complexity.training.learn import _solve
from policies.routing_eval import apgr, quality_curve

__all__ = ["STEPS", "AdaptOptions", "Adaptation", "Estimate", "Labelled", "adapt", "estimate", "prepare"]

# How far each learned term may move the score, in standard deviations of the current score.
STEPS: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)


@dataclass(frozen=True, slots=True)
class AdaptOptions:
    """`folds` x `repeats`: the nested cross-validation. `token_prior`: pseudo-prompts with no
    residual in every word's mean (a word seen in few prompts weighs little). `ridge`: the
    features' penalty per standardised unit, as a share of the prompts. `min_df`: a word must
    be in this many training prompts. `z`: the gain must exceed this many standard errors.
    `min_labels`: below this, nothing is fitted (the error would swamp any gain)."""

    folds: int = 5
    repeats: int = 3
    steps: tuple[float, ...] = STEPS
    token_prior: float = 8.0
    ridge: float = 0.3
    min_df: int = 2
    bootstrap: int = 300
    z: float = 1.0
    choose_se: float = 1.0
    choose_bootstrap: int = 60
    words: str = "mean"
    choose: str = "grid"
    floor: float = 0.05
    min_labels: int = 30
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Estimate:
    """An APGR (or a difference of two) and its bootstrap standard error."""

    value: float
    se: float

    def as_dict(self) -> dict[str, float]:
        return {"value": round(self.value, 4), "se": round(self.se, 4)}

    def __str__(self) -> str:
        return f"{self.value:.3f} ± {self.se:.3f}"


@dataclass(frozen=True, slots=True)
class Adaptation:
    """The verdict. `weights` is what to use: `candidate` when adopted, else the current weights."""

    weights: Weights
    candidate: Weights
    adopted: bool
    reason: str
    labels: int
    judged_on: int  # labels the current weights never saw, on which before and after are compared
    before: Estimate | None = None
    after: Estimate | None = None
    gain: Estimate | None = None
    steps: tuple[float, float] = (0.0, 0.0)  # (features, words) chosen on every label

    def as_dict(self) -> dict[str, Any]:
        return {
            "adopted": self.adopted, "reason": self.reason, "labels": self.labels, "judged_on": self.judged_on,
            "apgr_before": None if self.before is None else self.before.as_dict(),
            "apgr_after": None if self.after is None else self.after.as_dict(),
            "gain": None if self.gain is None else self.gain.as_dict(),
            "steps": {"features": self.steps[0], "words": self.steps[1]},
        }  # fmt: skip


@dataclass(slots=True)
class Labelled:
    """The labels as the fits read them, computed once: the current logit, the features, the
    hashed words and the gain (hosted - local) of each prompt."""

    ids: list[str]
    prompts: list[str]
    logit: list[float]  # the prior weights' (the centre of the adaptation)
    before: list[float]  # the incumbent's: the weights the adapted ones must beat
    x: list[list[float]]
    words: list[frozenset[int]]
    local: list[float]
    hosted: list[float]

    @property
    def gain(self) -> list[float]:
        return [h - lo for h, lo in zip(self.hosted, self.local)]


def prepare(prior: Weights, records: Sequence[dict[str, Any]], incumbent: Weights | None = None) -> Labelled:
    """Read each record's prompt once: its logit under the prior (and the incumbent, when they
    differ), feature values and hashed words."""
    scorer = ComplexityScorer(prior)
    other = ComplexityScorer(incumbent) if incumbent is not None and incumbent != prior else None
    n = len(FEATURES)
    out = Labelled([], [], [], [], [], [], [], [])
    for r in records:
        prompt = str(r["prompt"])
        values, _ = scorer.feature_values(prompt)
        out.ids.append(str(r["id"]))
        out.prompts.append(prompt)
        out.logit.append(_logit(scorer.score_text(prompt)))
        out.before.append(_logit(other.score_text(prompt)) if other is not None else out.logit[-1])
        out.x.append(values[:n])
        out.words.append(tokens(extract(prompt)[1]))
        out.local.append(float(r["local"]))
        out.hosted.append(float(r["hosted"]))
    return out


@dataclass(slots=True)
class _Fit:
    """The two learned terms fitted on some labels, and how to standardise them."""

    mu0: float
    sd0: float
    columns: list[int]  # feature indexes with spread in the training labels
    mu: list[float]
    sd: list[float]
    beta: list[float]  # per standardised column
    sd_f: float
    table: dict[int, float]  # bucket -> shrunken mean residual
    centre_w: float
    sd_w: float
    kernel: bool = False

    def parts(self, d: Labelled, i: int) -> tuple[float, float, float]:
        """(standardised s0, standardised features term, standardised words term) of prompt i."""
        s0 = (d.logit[i] - self.mu0) / self.sd0
        f = sum(b * (d.x[i][j] - m) / s for b, j, m, s in zip(self.beta, self.columns, self.mu, self.sd))
        w = _mean_weight(d.words[i], self.table, self.kernel)
        return s0, f / self.sd_f, (w - self.centre_w) / self.sd_w


def _mean_weight(buckets: frozenset[int], table: dict[int, float], kernel: bool = False) -> float:
    get = table.get
    if not buckets:
        return 0.0
    return sum(get(b, 0.0) for b in buckets) / (math.sqrt(len(buckets)) if kernel else len(buckets))


def _fit(d: Labelled, idx: Sequence[int], opts: AdaptOptions) -> _Fit:
    n = len(idx)
    logit = [d.logit[i] for i in idx]
    mu0 = sum(logit) / n
    sd0 = _sd(logit, mu0) or 1.0
    s0 = [(v - mu0) / sd0 for v in logit]
    gain = [d.hosted[i] - d.local[i] for i in idx]
    mean_g = sum(gain) / n
    # what the current score already explains (a slope it gets wrong is left for the terms)
    slope = max(0.0, sum((g - mean_g) * s for g, s in zip(gain, s0)) / n)
    resid = [g - mean_g - slope * s for g, s in zip(gain, s0)]
    columns, mu, sd, beta, fitted = _ridge(d, idx, resid, opts.ridge)
    table, loo = _words(d, idx, resid, opts)
    centre = sum(loo) / n
    return _Fit(mu0, sd0, columns, mu, sd, beta, _sd(fitted, 0.0) or 1.0, table, centre, _sd(loo, centre) or 1.0,
                opts.words == "kernel")


def _ridge(
    d: Labelled, idx: Sequence[int], resid: Sequence[float], ridge: float
) -> tuple[list[int], list[float], list[float], list[float], list[float]]:
    """Ridge regression of `resid` on the standardised features: (columns, means, std devs,
    coefficients, in-sample fitted values)."""
    n = len(idx)
    columns, mu, sd = [], [], []
    for j in range(len(FEATURES)):
        col = [d.x[i][j] for i in idx]
        m = sum(col) / n
        s = _sd(col, m)
        if s > 1e-9:
            columns.append(j)
            mu.append(m)
            sd.append(s)
    if not columns:
        return [], [], [], [], [0.0] * n
    rows = [[(d.x[i][j] - m) / s for j, m, s in zip(columns, mu, sd)] for i in idx]
    k = len(columns)
    gram = [[0.0] * k for _ in range(k)]
    rhs = [0.0] * k
    for row, r in zip(rows, resid):
        for a in range(k):
            xa = row[a]
            if xa:
                rhs[a] += xa * r
                g = gram[a]
                for b in range(a, k):
                    g[b] += xa * row[b]
    for a in range(k):
        for b in range(a):
            gram[a][b] = gram[b][a]
        gram[a][a] += ridge * n
    beta = _solve(gram, rhs)
    fitted = [sum(b * x for b, x in zip(beta, row)) for row in rows]
    return columns, mu, sd, beta, fitted


def _words(d: Labelled, idx: Sequence[int], resid: Sequence[float], opts: AdaptOptions) -> tuple[dict[int, float], list[float]]:
    """(bucket -> weight, each training prompt's words term with its own label left out: the
    spread a prompt the table never saw shows)."""
    if opts.words == "kernel":
        return _words_kernel(d, idx, resid, opts)
    total: dict[int, float] = defaultdict(float)
    count: dict[int, int] = defaultdict(int)
    for i, r in zip(idx, resid):
        for b in d.words[i]:
            total[b] += r
            count[b] += 1
    prior = opts.token_prior
    table = {b: total[b] / (c + prior) for b, c in count.items() if c >= opts.min_df}
    loo = []
    for i, r in zip(idx, resid):
        buckets = d.words[i]
        s = sum((total[b] - r) / (count[b] - 1 + prior) for b in buckets if count[b] > opts.min_df)
        loo.append(s / len(buckets) if buckets else 0.0)
    return table, loo


def _words_kernel(d: Labelled, idx: Sequence[int], resid: Sequence[float], opts: AdaptOptions) -> tuple[dict[int, float], list[float]]:
    count: dict[int, int] = defaultdict(int)
    for i in idx:
        for b in d.words[i]:
            count[b] += 1
    n = len(idx)
    idf2 = {b: (math.log((1 + n) / (1 + c)) + 1.0) ** 2 for b, c in count.items() if c >= opts.min_df}
    total: dict[int, float] = defaultdict(float)
    for i, r in zip(idx, resid):
        buckets = d.words[i]
        if buckets:
            x = r / math.sqrt(len(buckets))
            for b in buckets:
                total[b] += x
    table = {b: total[b] * w for b, w in idf2.items()}
    loo = []
    for i, r in zip(idx, resid):
        buckets = d.words[i]
        if not buckets:
            loo.append(0.0)
            continue
        own = r / math.sqrt(len(buckets))
        s = sum((total[b] - own) * idf2[b] for b in buckets if b in idf2 and count[b] > opts.min_df)
        loo.append(s / math.sqrt(len(buckets)))
    return table, loo


def _sd(values: Sequence[float], mean: float) -> float:
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) if values else 0.0


def _logit(p: float) -> float:
    p = min(1.0 - 1e-15, max(1e-15, p))
    return math.log(p / (1.0 - p))


def _apgr(scores: Sequence[float], local: Sequence[float], hosted: Sequence[float]) -> float:
    value = apgr(quality_curve(scores, local, hosted))
    return 0.5 if value is None else value


def _area(scores: Sequence[float], local: Sequence[float], hosted: Sequence[float]) -> float:
    """The area under the quality curve: APGR before its normalisation by the gap."""
    curve = quality_curve(scores, local, hosted)
    return sum((s1 - s0) * (q0 + q1) / 2 for (s0, q0), (s1, q1) in zip(curve, curve[1:]))


def _fold(record_id: str, folds: int, salt: str) -> int:
    digest = hashlib.sha256(f"{salt}:{record_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % folds


# -- choosing the steps -------------------------------------------------------------------


def _choose(d: Labelled, atoms: dict[int, list[int]], opts: AdaptOptions) -> tuple[float, float]:
    """The smallest steps whose APGR over the given folds (each scored by terms fitted on the
    others) is within one standard error of the best steps' (the one-standard-error rule:
    with few labels the error is wide and the steps stay small)."""
    if len(atoms) < 2:
        return 0.0, 0.0
    pooled: list[tuple[int, tuple[float, float, float]]] = []
    for a, held in atoms.items():
        fit = _fit(d, [i for b, rest in atoms.items() if b != a for i in rest], opts)
        pooled.extend((i, fit.parts(d, i)) for i in held)
    local = [d.local[i] for i, _ in pooled]
    hosted = [d.hosted[i] for i, _ in pooled]
    if opts.choose == "regress":
        return _regress_steps([p for _, p in pooled], [h - lo for h, lo in zip(hosted, local)], opts)
    grid = sorted(((sf, sw) for sf in opts.steps for sw in opts.steps), key=lambda s: (s[0] + s[1], s))
    found = {s: _apgr([p[0] + s[0] * p[1] + s[1] * p[2] for _, p in pooled], local, hosted) for s in grid}
    best = max(grid, key=lambda s: (found[s], -s[0] - s[1]))
    if best == (0.0, 0.0):
        return best
    se = _paired_se([p[0] + best[0] * p[1] + best[1] * p[2] for _, p in pooled], [p[0] for _, p in pooled],
                    local, hosted, opts)
    return next(s for s in grid if found[s] >= found[best] - opts.choose_se * se)


def _regress_steps(parts: Sequence[tuple[float, float, float]], gain: Sequence[float],
                   opts: AdaptOptions) -> tuple[float, float]:
    """Steps from the least-squares fit of the gain on the out-of-fold (s0, features, words):
    each term's coefficient over s0's (at least `floor`), clipped to [0, the largest step]."""
    n = len(gain)
    mg = sum(gain) / n
    sg = _sd(gain, mg) or 1.0
    y = [(g - mg) / sg for g in gain]
    cols = list(zip(*parts))
    means = [sum(c) / n for c in cols]
    x = [[v - m for v, m in zip(p, means)] for p in parts]
    gram = [[sum(r[a] * r[b] for r in x) + (1e-6 * n if a == b else 0.0) for b in range(3)] for a in range(3)]
    rhs = [sum(r[a] * t for r, t in zip(x, y)) for a in range(3)]
    b0, bf, bw = _solve(gram, rhs)
    top = max(opts.steps)
    base = max(b0, opts.floor)
    return min(top, max(0.0, bf / base)), min(top, max(0.0, bw / base))


def _paired_se(a: Sequence[float], b: Sequence[float], local: Sequence[float], hosted: Sequence[float],
               opts: AdaptOptions) -> float:
    """Bootstrap standard error of APGR(a) - APGR(b) on the same prompts (see `_judge`)."""
    rng = random.Random(opts.seed + 1)
    n = len(a)
    gap = (sum(hosted) - sum(local)) / n
    if gap <= 0:
        return math.inf
    diffs = []
    for _ in range(opts.choose_bootstrap):
        pick = [rng.randrange(n) for _ in range(n)]
        lo, hi = [local[p] for p in pick], [hosted[p] for p in pick]
        diffs.append(_area([a[p] for p in pick], lo, hi) - _area([b[p] for p in pick], lo, hi))
    return _sd(diffs, sum(diffs) / len(diffs)) / gap


def _score(fit: _Fit, d: Labelled, i: int, steps: tuple[float, float]) -> float:
    s0, f, w = fit.parts(d, i)
    return s0 + steps[0] * f + steps[1] * w


def _out_of_fold(d: Labelled, repeat: int, opts: AdaptOptions) -> list[float]:
    """Each prompt scored by terms (and steps) chosen and fitted without its fold."""
    atoms: dict[int, list[int]] = defaultdict(list)
    for i, rid in enumerate(d.ids):
        atoms[_fold(rid, opts.folds, f"adapt-{opts.seed}-{repeat}")].append(i)
    scores = [0.0] * len(d.ids)
    for f, held in atoms.items():
        inner = {a: rest for a, rest in atoms.items() if a != f}
        steps = _choose(d, inner, opts)
        fit = _fit(d, [i for rest in inner.values() for i in rest], opts)
        for i in held:
            scores[i] = _score(fit, d, i, steps)
    return scores


# -- judging ------------------------------------------------------------------------------


def _judge(d: Labelled, on: list[int], runs: list[list[float]], opts: AdaptOptions) -> tuple[Estimate, Estimate, Estimate]:
    """(before, after, gain) on the prompts `on`, each with its bootstrap standard error.

    The bootstrap resamples prompts and recomputes the areas under the quality curves; APGR is
    that area less the local quality, over the gap (hosted - local), and the gap of the labels
    at hand is the normaliser of every figure. (Resampling the normaliser too would let a
    resample with almost no gap swamp the error of a set whose gap is small.)"""
    local = [d.local[i] for i in on]
    hosted = [d.hosted[i] for i in on]
    base = [d.before[i] for i in on]
    after_runs = [[run[i] for i in on] for run in runs]
    n = len(on)
    gap = (sum(hosted) - sum(local)) / n

    def areas(pick: Sequence[int]) -> tuple[float, float]:
        lo, hi = [local[p] for p in pick], [hosted[p] for p in pick]
        q_local = sum(lo) / len(lo)
        before = _area([base[p] for p in pick], lo, hi) - q_local
        after = sum(_area([run[p] for p in pick], lo, hi) for run in after_runs) / len(after_runs) - q_local
        return before, after

    before, after = areas(range(n))
    rng = random.Random(opts.seed)
    samples = [areas([rng.randrange(n) for _ in on]) for _ in range(opts.bootstrap)]
    se_b = _sd([b for b, _ in samples], sum(b for b, _ in samples) / len(samples))
    se_a = _sd([a for _, a in samples], sum(a for _, a in samples) / len(samples))
    diffs = [a - b for b, a in samples]
    se_g = _sd(diffs, sum(diffs) / len(diffs))
    return Estimate(before / gap, se_b / gap), Estimate(after / gap, se_a / gap), Estimate((after - before) / gap, se_g / gap)


# -- the weights file ---------------------------------------------------------------------


def _weights(current: Weights, d: Labelled, fit: _Fit, steps: tuple[float, float], meta: dict[str, Any]) -> Weights:
    """`current` with the two terms added at `steps`, rescaled to the current score's mean and
    spread over the labelled prompts (order unchanged), the threshold at the same quantile."""
    sf, sw = steps
    scale_f = fit.sd0 * sf / fit.sd_f
    scale_w = fit.sd0 * sw / fit.sd_w
    weights = dict(current.weights)
    bias = current.bias - fit.sd0 * sw * fit.centre_w / fit.sd_w
    for b, j, m, s in zip(fit.beta, fit.columns, fit.mu, fit.sd):
        name = FEATURES[j]
        delta = scale_f * b / s
        weights[name] = weights.get(name, 0.0) + delta
        bias += delta * (current.means.get(name, 0.0) - m)  # the model centres on its own means
    domain = dict(current.domain)
    for bucket, value in fit.table.items():
        domain[bucket] = domain.get(bucket, 0.0) + scale_w * value
    raw = replace(current, bias=bias, weights=weights, domain=domain)
    new = [_logit(p) for p in map(ComplexityScorer(raw).score_text, d.prompts)]
    mu_old, mu_new = sum(d.logit) / len(d.logit), sum(new) / len(new)
    a = (_sd(d.logit, mu_old) or 1.0) / (_sd(new, mu_new) or 1.0)
    b = mu_old - a * mu_new
    pinned = replace(
        raw,
        bias=round(a * raw.bias + b, 6),
        weights={k: round(a * v, 6) for k, v in raw.weights.items()},
        vocabulary_cap=a * raw.vocabulary_cap,
        domain={k: round(a * v, 7) for k, v in domain.items() if abs(a * v) >= 1e-6},
        metadata={**current.metadata, "adapted": meta},
    )
    if current.threshold is None:
        return pinned
    share = sum(v >= _logit(current.threshold) for v in d.logit) / len(d.logit)
    from policies.complexity.training.fit import calibrate_threshold

    scores = list(map(ComplexityScorer(pinned).score_text, d.prompts))
    return replace(pinned, threshold=calibrate_threshold(scores, share))


# -- the entry point ----------------------------------------------------------------------


def adapt(
    current: Weights,
    records: Sequence[dict[str, Any]] | Labelled,
    *,
    incumbent: Weights | None = None,
    seen: Collection[str] = (),
    options: AdaptOptions = AdaptOptions(),
) -> Adaptation:
    """Adapt `current` to `records` ({"id", "prompt", "local", "hosted"}), adopting the result
    only when nested cross-validation shows a gain beyond `options.z` standard errors.

    `incumbent`: the weights in use, when they are not `current` itself (online learning refits
    from the configured weights each time and must beat the last adopted version); `seen`: ids
    of records the incumbent was fitted on. The comparison is made on the other records only,
    so weights are never judged on labels they were fitted on."""
    d = records if isinstance(records, Labelled) else prepare(current, records, incumbent)
    keep_weights = incumbent or current
    n = len(d.ids)
    on = [i for i, rid in enumerate(d.ids) if rid not in seen]
    keep = _Keep(keep_weights, n, len(on))
    if n < options.min_labels:
        return keep(f"{n} labels; adapting needs at least {options.min_labels}")
    if len(on) < options.min_labels:
        return keep(f"{len(on)} labels the current weights were not fitted on; judging needs {options.min_labels}")
    if sum(d.hosted) - sum(d.local) <= 1e-9 * n:
        return keep("the labels show no gain from the stronger tier, so no order of prompts routes better than another")
    runs = [_out_of_fold(d, r, options) for r in range(options.repeats)]
    before, after, gain = _judge(d, on, runs, options)
    atoms: dict[int, list[int]] = defaultdict(list)
    for i, rid in enumerate(d.ids):
        atoms[_fold(rid, options.folds, f"adapt-{options.seed}-0")].append(i)
    steps = _choose(d, atoms, options)
    meta = {"labels": n, "steps": {"features": steps[0], "words": steps[1]}, "apgr_before": before.as_dict(),
            "apgr_after": after.as_dict(), "gain": gain.as_dict()}  # fmt: skip
    candidate = _weights(current, d, _fit(d, range(n), options), steps, meta)
    figures = {"before": before, "after": after, "gain": gain, "steps": steps}
    if steps == (0.0, 0.0):
        return keep("cross-validation chose no step away from the current weights", candidate, **figures)
    if gain.value <= options.z * gain.se:
        why = (f"the cross-validated gain {gain.value:+.3f} is within {options.z:g} standard error ({gain.se:.3f}) "
               "of none; more labels narrow the error")  # fmt: skip
        return keep(why, candidate, **figures)
    return Adaptation(candidate, candidate, True, f"gain {gain} over the current weights", n, len(on), **figures)  # type: ignore[arg-type]


@dataclass(slots=True)
class _Keep:
    """Builds the verdict that keeps the current weights."""

    current: Weights
    labels: int
    judged_on: int

    def __call__(self, reason: str, candidate: Weights | None = None, **figures: Any) -> Adaptation:
        return Adaptation(self.current, candidate or self.current, False, reason, self.labels, self.judged_on, **figures)


def estimate(weights: Weights, records: Sequence[dict[str, Any]], *, bootstrap: int = 200, seed: int = 0) -> Estimate | None:
    """APGR of `weights` on `records`, with its bootstrap standard error (the gap of the records
    at hand as the normaliser, as in `adapt`); None without a gap to recover."""
    if not records:
        return None
    scorer = ComplexityScorer(weights)
    scores = [scorer.score_text(str(r["prompt"])) for r in records]
    local = [float(r["local"]) for r in records]
    hosted = [float(r["hosted"]) for r in records]
    n = len(records)
    gap = (sum(hosted) - sum(local)) / n
    if gap <= 1e-12:
        return None
    value = (_area(scores, local, hosted) - sum(local) / n) / gap
    rng = random.Random(seed)
    samples = []
    for _ in range(bootstrap):
        pick = [rng.randrange(n) for _ in range(n)]
        lo = [local[p] for p in pick]
        samples.append(_area([scores[p] for p in pick], lo, [hosted[p] for p in pick]) - sum(lo) / n)
    return Estimate(value, _sd(samples, sum(samples) / len(samples)) / gap)
