"""The adoption test: is the adapted order better than the incumbent's, beyond its error?

Adaptation (`adapt.py`) scores every label by weights fitted without its fold (nested
cross-validation, `folds` x `repeats`). This module turns those out-of-fold scores into the
gain over the incumbent and a standard error that holds when the labels are few.

**The gain, fold by fold.** The area under the quality curve is a pairwise statistic: with
g = hosted - local, the area a score gains over another on n labels is

    D = 1/n^2 * sum over pairs i<j of (g_i - g_j) * (I_ij(after) - I_ij(before))

where I_ij is 1 when i is routed up before j, 1/2 on a tie. Only pairs whose tiers' answers
differ (g_i != g_j) and that the two orders rank differently count: they are the labels that
differ between the two routings. Each fold's D is taken on its own labels, ranked by the one
model that never saw them (pooling folds would rank scores of different models against each
other), and the gain is the mean over folds, divided by the labels' gap (hosted - local) as
APGR is.

**Its error: a corrected repeated cross-validation test** (Nadeau and Bengio, "Inference for
the generalization error", 2003; Bouckaert and Frank, 2004). The J = folds x repeats fold gains
are not independent: their training sets overlap, so the spread of their mean is not s^2 / J,
and the candidate adopted is one more fit, on all the labels, whose own gain varies with the
labels it was fitted on. Their correction, var = (1/J + n_test/n_train) * s^2, counts both
(n_test/n_train = 1 / (folds - 1)). Bootstrapping the labels with the out-of-fold scores held
fixed (what this test replaced) counts neither. Measured on 20 shuffles of the shared routing
sets (benchmarks/adaptation.py: the estimate against what the adapted weights then did on the
rest of the set, less that figure's own noise), its errors were 1.3 to 2 times too small on
gsm8k, llmrouter (k = 1,000), theoremqa and zeroeval, and right on mmlu; this one's are about
right to 1.5 times too large.

**A floor for few labels.** s^2 is estimated from J fold gains that share labels; when few
labels differ between the two routings, most folds hold the same few pairs and s^2 can come
out small by chance, which is when a lucky candidate passes. But a fold gain's variance is at
least the sampling variance of its own labels (the law of total variance: the spread between
training sets only adds to it), and that is estimated from each label's part in the fold's
pairs (the Hajek projection of the pairwise statistic above: label i's part is
sum_j (g_i - g_j) * dI_ij). So s^2 is taken as at least the folds' mean sampling variance:
with fewer differing labels each fold's D rests on fewer pairs and this floor rises relative
to the gain, never falls. An order that differs from the incumbent's only by sending 1, 2 or
3 prompts of 300 up, each rightly, gains 0.76, 0.88 and 1.13 errors here (an exact sign test
says 3 of 3 in favour happens one time in eight by luck); the bootstrap said 1.01, 1.20, 1.57.

**The bar** (`ADOPT_Z`): a one-sided test at 10 %. At one error (16 %) the shared sets'
candidates that did harm got through often enough to break "never worse" on theoremqa at
k = 300 with this error too. Online refits raise it with every refit (router/learning).
Pure Python, O(n log n) per fold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ADOPT_Z", "Estimate", "FoldGain", "corrected_gain", "fold_gain"]

# The gain must exceed this many standard errors: a one-sided test at 10 % (a candidate no
# better than the weights in use passes at most one time in ten; see "The bar" above).
ADOPT_Z = 1.2816


@dataclass(frozen=True, slots=True)
class Estimate:
    """An APGR (or a difference of two) and its standard error."""

    value: float
    se: float

    def as_dict(self) -> dict[str, float]:
        return {"value": round(self.value, 4), "se": round(self.se, 4)}

    def __str__(self) -> str:
        return f"{self.value:.3f} ± {self.se:.3f}"


@dataclass(frozen=True, slots=True)
class FoldGain:
    """One fold's area gain (quality units, before dividing by the gap) and its sampling variance."""

    area: float
    variance: float
    labels: int


def _below(scores: Sequence[float], gains: Sequence[float], idx: Sequence[int]) -> list[tuple[float, float]]:
    """For each label of `idx` (in that order): (how many labels the score routes up after it,
    the sum of their gains), a tie counting half (itself included, which cancels in `fold_gain`)."""
    where = {i: p for p, i in enumerate(idx)}
    order = sorted(idx, key=scores.__getitem__)
    out = [(0.0, 0.0)] * len(idx)
    count = total = 0.0
    p = 0
    while p < len(order):
        q, group = p, 0.0
        while q < len(order) and scores[order[q]] == scores[order[p]]:
            group += gains[order[q]]
            q += 1
        for i in order[p:q]:
            out[where[i]] = (count + (q - p) / 2, total + group / 2)
        count += q - p
        total += group
        p = q
    return out


def fold_gain(gains: Sequence[float], after: Sequence[float], before: Sequence[float], idx: Sequence[int]) -> FoldGain:
    """The area the `after` order gains over `before` on the labels `idx`, and its sampling
    variance from each label's part (psi_i below; their mean is twice the gain)."""
    n = len(idx)
    a, b = _below(after, gains, idx), _below(before, gains, idx)
    psi = [gains[i] * (ca - cb) - (ga - gb) for i, (ca, ga), (cb, gb) in zip(idx, a, b)]
    mean = sum(psi) / n
    area = mean / (2 * n)
    if n < 2:
        return FoldGain(area, 0.0, n)
    spread = sum((x - mean) ** 2 for x in psi) / (n - 1) / (n * n)
    return FoldGain(area, spread / n, n)


def corrected_gain(folds: Sequence[Sequence[FoldGain]], gap: float, n_folds: int) -> Estimate:
    """The gain (APGR) from each repeat's fold gains, with the corrected error described above.
    `folds`: per repeat, its folds; `gap`: the labels' mean hosted - local."""
    value = sum(map(_pooled, folds)) / len(folds)
    judged = [f for run in folds for f in run if f.labels >= 2]
    if len(judged) < 2:
        return Estimate(value / gap, math.inf)
    floor = sum(f.variance for f in judged) / len(judged)
    variance = (1 / len(judged) + 1 / (n_folds - 1)) * max(_variance([f.area for f in judged]), floor)
    return Estimate(value / gap, math.sqrt(variance) / gap)


def _pooled(run: Sequence[FoldGain]) -> float:
    """One repeat's gain: its folds' areas weighted by their labels."""
    return sum(f.area * f.labels for f in run) / max(1, sum(f.labels for f in run))


def _variance(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return sum((x - mean) ** 2 for x in values) / (len(values) - 1)
