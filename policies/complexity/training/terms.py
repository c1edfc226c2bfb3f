"""The two terms adaptation adds to the weights in use, and how far to step along them.

    s(x) = s0(x) + step_f * features(x) + step_w * words(x)        (each term standardised)

Both terms model what the current score `s0` leaves unexplained: the gain (hosted - local) less
its least-squares line on `s0` (a slope below zero is taken as zero, so a current score that
orders the labels backwards is left for the terms to correct).

- `features`: ridge regression of that residual on the standardised hand-designed features.
- `words`: each hashed word and word pair (`domain.py`) weighs the shrunken mean residual of
  the training prompts holding it, sum / (count + prior); a prompt's term is the mean weight
  of its buckets. Its spread is measured leaving each prompt's own label out (on a sample of
  the training prompts), the spread a prompt the table never saw shows.

The steps come from a least-squares fit of the gain on out-of-fold (s0, features, words): each
term's coefficient over s0's, clipped to [0, `max_step`]. s0's coefficient counts as at least
its own standard error (1 / sqrt(labels), all standardised): a current score that looks useless
on a few labels may only look so, and with few labels the steps stay small. A term that does not help on folds it was not fitted on
gets step 0. Pure Python, deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from policies.complexity.domain import tokens
from policies.complexity.features import FEATURES, extract
from policies.complexity.model import ComplexityScorer, Weights
from policies.complexity.training.learn import _solve

__all__ = ["Fit", "Labelled", "Stats", "TermOptions", "choose_steps", "fit", "logit", "prepare", "sd"]


@dataclass(frozen=True, slots=True)
class TermOptions:
    """`token_prior`: pseudo-prompts with no residual in every bucket's mean. `min_df`: a bucket
    must be in this many training prompts. `ridge`: the features' penalty per standardised
    unit, as a share of the prompts. `floor`: the least s0's coefficient counts as when steps
    are set. `max_step`: the furthest either term may move the score, in s0's standard
    deviations."""

    token_prior: float = 8.0
    min_df: int = 2
    ridge: float = 0.3
    floor: float = 0.05
    max_step: float = 4.0


@dataclass(slots=True)
class Labelled:
    """The labels as the fits read them, computed once per prompt."""

    ids: list[str]
    prompts: list[str]
    logit: list[float]  # the prior weights' (the centre of the adaptation)
    before: list[float]  # the incumbent's: the weights the adapted ones must beat
    x: list[list[float]]  # FEATURES as the model reads them
    words: list[frozenset[int]]
    local: list[float]
    hosted: list[float]


def logit(p: float) -> float:
    p = min(1.0 - 1e-15, max(1e-15, p))
    return math.log(p / (1.0 - p))


def sd(values: Sequence[float], mean: float) -> float:
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) if values else 0.0


def prepare(prior: Weights, records: Sequence[dict[str, Any]], incumbent: Weights | None = None) -> Labelled:
    """Read each prompt once: its logit under the prior (and the incumbent, when they differ),
    its feature values and its hashed words."""
    scorer = ComplexityScorer(prior)
    other = ComplexityScorer(incumbent) if incumbent is not None and incumbent != prior else None
    n = len(FEATURES)
    out = Labelled([], [], [], [], [], [], [], [])
    for r in records:
        prompt = str(r["prompt"])
        values, _ = scorer.feature_values(prompt)
        out.ids.append(str(r["id"]))
        out.prompts.append(prompt)
        out.logit.append(logit(scorer.score_text(prompt)))
        out.before.append(logit(other.score_text(prompt)) if other is not None else out.logit[-1])
        out.x.append(values[:n])
        out.words.append(tokens(extract(prompt)[1]))
        out.local.append(float(r["local"]))
        out.hosted.append(float(r["hosted"]))
    return out


@dataclass(slots=True)
class Stats:
    """Sums over a set of labels that every fit needs, additive over disjoint sets: a fit on
    the union of some folds adds the folds' sums instead of reading every prompt again."""

    n: int = 0
    g: float = 0.0  # sum of gains
    s: float = 0.0  # sum of prior logits
    ss: float = 0.0
    gs: float = 0.0
    x: list[float] = field(default_factory=lambda: [0.0] * len(FEATURES))
    xx: list[list[float]] = field(default_factory=lambda: [[0.0] * len(FEATURES) for _ in FEATURES])
    xg: list[float] = field(default_factory=lambda: [0.0] * len(FEATURES))
    xs: list[float] = field(default_factory=lambda: [0.0] * len(FEATURES))
    buckets: dict[int, tuple[float, float, float]] = field(default_factory=dict)  # bucket -> (prompts, sum gain, sum logit)

    @classmethod
    def of(cls, d: Labelled, idx: Sequence[int]) -> Stats:
        out = cls()
        k = len(FEATURES)
        for i in idx:
            g, s, x = d.hosted[i] - d.local[i], d.logit[i], d.x[i]
            out.n += 1
            out.g += g
            out.s += s
            out.ss += s * s
            out.gs += g * s
            for a in range(k):
                xa = x[a]
                if xa:
                    out.x[a] += xa
                    out.xg[a] += xa * g
                    out.xs[a] += xa * s
                    row = out.xx[a]
                    for b in range(a, k):
                        row[b] += xa * x[b]
            buckets = out.buckets
            for bucket in d.words[i]:
                c, bg, bs = buckets.get(bucket, (0.0, 0.0, 0.0))
                buckets[bucket] = (c + 1.0, bg + g, bs + s)
        return out

    def without(self, parts: Sequence[Stats]) -> Stats:
        """These sums less those of `parts` (disjoint subsets of these labels): a fold's
        training sums as the whole less the held-out folds, which touches only their prompts."""
        out = Stats(self.n, self.g, self.s, self.ss, self.gs, list(self.x), [list(r) for r in self.xx], list(self.xg),
                    list(self.xs), dict(self.buckets))  # fmt: skip
        k = len(FEATURES)
        for p in parts:
            out.n -= p.n
            out.g -= p.g
            out.s -= p.s
            out.ss -= p.ss
            out.gs -= p.gs
            for a in range(k):
                out.x[a] -= p.x[a]
                out.xg[a] -= p.xg[a]
                out.xs[a] -= p.xs[a]
                row, other = out.xx[a], p.xx[a]
                for b in range(a, k):
                    row[b] -= other[b]
            buckets = out.buckets
            for bucket, (c, g, s) in p.buckets.items():
                left = buckets[bucket]
                if left[0] <= c:
                    del buckets[bucket]
                else:
                    buckets[bucket] = (left[0] - c, left[1] - g, left[2] - s)
        return out


@dataclass(slots=True)
class Fit:
    """The two terms fitted on some labels, and how each is standardised."""

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

    def parts(self, d: Labelled, i: int) -> tuple[float, float, float]:
        """(standardised s0, standardised features term, standardised words term) of prompt i."""
        s0 = (d.logit[i] - self.mu0) / self.sd0
        f = sum(b * (d.x[i][j] - m) / s for b, j, m, s in zip(self.beta, self.columns, self.mu, self.sd))
        buckets = d.words[i]
        w = sum(map(self.table.get, buckets, [0.0] * len(buckets))) / len(buckets) if buckets else 0.0
        return s0, f / self.sd_f, (w - self.centre_w) / self.sd_w


LOO_SAMPLE = 256  # training prompts whose left-out words term sets the term's spread


def fit(d: Labelled, idx: Sequence[int], opts: TermOptions, stats: Stats | None = None) -> Fit:
    """Both terms, fitted on the labels `idx` (whose sums `stats` holds, when already added up)."""
    st = stats or Stats.of(d, idx)
    n = st.n
    mu0 = st.s / n
    sd0 = math.sqrt(max(0.0, st.ss / n - mu0 * mu0)) or 1.0
    mean_g = st.g / n
    slope = max(0.0, (st.gs / n - mean_g * mu0) / sd0)
    # residual_i = g_i - c - k * logit_i: the gain less its line on the standardised prior logit
    k = slope / sd0
    c = mean_g - k * mu0
    columns, mu, sds, beta, sd_f = _ridge(st, c, k, opts.ridge)
    prior, min_df = opts.token_prior, opts.min_df
    table = {b: (sg - c * cnt - k * sl) / (cnt + prior) for b, (cnt, sg, sl) in st.buckets.items() if cnt >= min_df}
    loo = []
    for i in list(idx)[:LOO_SAMPLE]:
        r = d.hosted[i] - d.local[i] - c - k * d.logit[i]
        buckets = d.words[i]
        value = 0.0
        for b in buckets:
            cnt, sg, sl = st.buckets[b]
            if cnt > min_df:
                value += (sg - c * cnt - k * sl - r) / (cnt - 1 + prior)
        loo.append(value / len(buckets) if buckets else 0.0)
    centre = sum(loo) / len(loo)
    return Fit(mu0, sd0, columns, mu, sds, beta, sd_f, table, centre, sd(loo, centre) or 1.0)


def _spread_columns(st: Stats) -> tuple[list[int], list[float], list[float]]:
    """(indexes, means, std devs) of the features that vary over these labels."""
    columns, mu, sds = [], [], []
    for j in range(len(FEATURES)):
        m = st.x[j] / st.n
        s = math.sqrt(max(0.0, st.xx[j][j] / st.n - m * m))
        if s > 1e-9:
            columns.append(j)
            mu.append(m)
            sds.append(s)
    return columns, mu, sds


def _correlations(st: Stats, columns: list[int], mu: list[float], sds: list[float]) -> list[list[float]]:
    """n times the correlation matrix of the standardised columns (the sums keep the upper triangle)."""
    size = len(columns)
    gram = [[0.0] * size for _ in range(size)]
    for a, (ja, ma, sa) in enumerate(zip(columns, mu, sds)):
        for b in range(a, size):
            jb = columns[b]
            gram[a][b] = gram[b][a] = (st.xx[ja][jb] - st.n * ma * mu[b]) / (sa * sds[b])
    return gram


def _ridge(st: Stats, c: float, k: float, ridge: float) -> tuple[list[int], list[float], list[float], list[float], float]:
    """Ridge regression of the residual on the standardised features, from the sums: (columns,
    means, std devs, coefficients, the spread of the fitted term)."""
    columns, mu, sds = _spread_columns(st)
    if not columns:
        return [], [], [], [], 1.0
    gram = _correlations(st, columns, mu, sds)
    # the residual sums to 0, so centring the features changes nothing on the right-hand side
    rhs = [(st.xg[j] - c * st.x[j] - k * st.xs[j]) / s for j, s in zip(columns, sds)]
    size, n = len(columns), st.n
    beta = _solve([[v + (ridge * n if a == b else 0.0) for b, v in enumerate(row)] for a, row in enumerate(gram)], rhs)
    spread = sum(beta[a] * gram[a][b] * beta[b] for a in range(size) for b in range(size)) / n
    return columns, mu, sds, beta, math.sqrt(max(0.0, spread)) or 1.0


def choose_steps(d: Labelled, atoms: dict[int, list[int]], opts: TermOptions,
                 stats: dict[int, Stats] | None = None, everything: Stats | None = None) -> tuple[float, float]:
    """(features step, words step) from the given folds: each fold's terms fitted on the others,
    then the gain regressed on the pooled out-of-fold (s0, features, words). `stats`: each
    fold's sums and `everything` theirs together, when already added up."""
    if len(atoms) < 2:
        return 0.0, 0.0
    parts, gain = _out_of_fold_parts(d, atoms, opts, stats or {a: Stats.of(d, held) for a, held in atoms.items()},
                                     everything or Stats.of(d, [i for held in atoms.values() for i in held]))
    b0, bf, bw = _least_squares(parts, gain)
    base = max(b0, opts.floor, 1.0 / math.sqrt(len(gain)))  # s0 counts as no weaker than its coefficient's error
    return min(opts.max_step, max(0.0, bf / base)), min(opts.max_step, max(0.0, bw / base))


def _out_of_fold_parts(d: Labelled, atoms: dict[int, list[int]], opts: TermOptions, sums: dict[int, Stats],
                       whole: Stats) -> tuple[list[tuple[float, float, float]], list[float]]:
    """(each prompt's parts from terms fitted without its fold, its gain), fold by fold."""
    parts: list[tuple[float, float, float]] = []
    gain: list[float] = []
    for a, held in atoms.items():
        fitted = fit(d, [i for b, rest in atoms.items() if b != a for i in rest], opts, whole.without([sums[a]]))
        parts.extend(fitted.parts(d, i) for i in held)
        gain.extend(d.hosted[i] - d.local[i] for i in held)
    return parts, gain


def _least_squares(parts: Sequence[tuple[float, float, float]], gain: Sequence[float]) -> list[float]:
    """Coefficients of the standardised gain on the centred (s0, features, words)."""
    n = len(gain)
    mg = sum(gain) / n
    sg = sd(gain, mg) or 1.0
    y = [(g - mg) / sg for g in gain]
    x = _centred(parts)
    gram = [[_dot(x, a, b) for b in range(3)] for a in range(3)]
    for a in range(3):
        gram[a][a] += 1e-6 * n  # keeps the system solvable when a term is constant
    return _solve(gram, [sum(r[a] * t for r, t in zip(x, y)) for a in range(3)])


def _centred(rows: Sequence[Sequence[float]]) -> list[list[float]]:
    means = [sum(c) / len(rows) for c in zip(*rows)]
    return [[v - m for v, m in zip(row, means)] for row in rows]


def _dot(rows: Sequence[Sequence[float]], a: int, b: int) -> float:
    return sum(r[a] * r[b] for r in rows)
