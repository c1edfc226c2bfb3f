"""Where the labelled prompts fall against a boundary's threshold, and the shift of a score that
puts them where the labels say.

Adaptation's terms (`adapt.py`) learn an order: which prompts need the upper tier more than
others. An order alone never says how many do, and a verdict does: "bad" on the lower tier's
answer says the prompt belongs above the boundary, "good" that it may stay below. A score can
rank every bad-verdict prompt above every good one and still keep them all under the threshold
(a kind of prompt the weights never saw scores alike), so the labels also place the threshold:
the score moves by one shift of its logit, the one that misplaces the fewest labelled prompts.

A label is "up" when the upper tier's answer was better (`hosted > local`: a bad verdict, a
judge that preferred the upper answer) and "stay" otherwise (a good verdict, a tie, the lower
answer preferred); it weighs its gain |hosted - local|, or 1 when the gain is 0 (a good verdict
says plainly that the lower tier was enough). A shift is chosen to misplace the least weight;
among the shifts that do, the one nearest no shift at all, and inside that range its middle
(a fresh prompt of a labelled kind lands as far from the threshold as the labels allow). No
shift when none misplaces less than the score already does: labels that are placed right move
nothing.

Whether a shift helps is judged as the order is: by cross-validation. In each fold the shift
is chosen on the other folds' scores and the fold's labels are placed with it, so the gain in
misplaced labels is measured on labels the shift never saw (`cross_validated`).

Pure Python, deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence

from policies.complexity.training.gate import Estimate

__all__ = ["Classes", "classes", "cross_validated", "misplaced", "shift"]


class Classes:
    """Per label: whether it belongs above the boundary, and its weight."""

    __slots__ = ("up", "weight")

    def __init__(self, up: list[bool], weight: list[float]):
        self.up = up
        self.weight = weight


def classes(local: Sequence[float], hosted: Sequence[float]) -> Classes:
    gains = [h - lo for lo, h in zip(local, hosted)]
    return Classes([g > 1e-9 for g in gains], [abs(g) if abs(g) > 1e-9 else 1.0 for g in gains])


def _wrong(z: float, up: bool, cut: float) -> bool:
    return (z >= cut) != up


def misplaced(z: Sequence[float], c: Classes, cut: float, idx: Sequence[int]) -> float:
    """The weight of the labels of `idx` that logits `z` place on the wrong side of `cut`."""
    return sum(c.weight[i] for i in idx if _wrong(z[i], c.up[i], cut))


def _constant_ranges(z: Sequence[float], c: Classes, cut: float,
                     idx: Sequence[int]) -> list[tuple[float, float, float]]:
    """The ranges of shifts [lo, hi) over which the misplaced weight stays the same, each with
    that weight, from no label placed up to every label placed up."""
    # prompt i is placed up once the shift reaches edge_i = cut - z_i
    edges = sorted((cut - z[i], i) for i in idx)
    wrong = sum(c.weight[i] for i in idx if c.up[i])  # below every edge: all placed below
    cuts = [e for e, _ in edges]
    ranges: list[tuple[float, float, float]] = [(-math.inf, cuts[0], wrong)]
    for k, (edge, i) in enumerate(edges):
        wrong += -c.weight[i] if c.up[i] else c.weight[i]
        upper = cuts[k + 1] if k + 1 < len(cuts) else math.inf
        if upper > edge:
            ranges.append((edge, upper, wrong))
    return ranges


def _shift_within(lo: float, hi: float, z: Sequence[float], idx: Sequence[int]) -> float:
    """The shift a range [lo, hi) of equally good shifts stands for: its middle, or a margin past
    its one finite bound."""
    if math.isinf(lo) or math.isinf(hi):  # the labels bound it on one side: go past it by half their spread
        margin = 0.5 * (_spread([z[i] for i in idx]) or 1.0)
        return hi - margin if math.isinf(lo) else lo + margin
    return (lo + hi) / 2


def shift(z: Sequence[float], c: Classes, cut: float, idx: Sequence[int] | None = None) -> float:
    """The shift of the logits `z` (of the labels `idx`, default all) against the threshold's
    logit `cut` that misplaces the least weight, as the module docstring says; 0 without labels."""
    idx = range(len(z)) if idx is None else idx
    if not idx:
        return 0.0
    ranges = _constant_ranges(z, c, cut, idx)
    best = min(w for _, _, w in ranges)
    if misplaced(z, c, cut, idx) <= best + 1e-12:
        return 0.0
    lo, hi, _ = min((r for r in ranges if r[2] <= best + 1e-12), key=lambda r: _distance(r[0], r[1]))
    return _shift_within(lo, hi, z, idx)


def _distance(lo: float, hi: float) -> float:
    """How far a range of shifts [lo, hi) lies from no shift."""
    return 0.0 if lo <= 0 < hi else min(abs(lo), abs(hi))


def _spread(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def _weight_if_wrong(z: float, c: Classes, i: int, cut: float) -> float:
    return c.weight[i] if _wrong(z, c.up[i], cut) else 0.0


def _fold_savings(run: Sequence[float], atoms: Mapping[int, Sequence[int]], before: Sequence[float],
                  c: Classes, cut: float, judged: set[int]) -> Iterator[tuple[int, float]]:
    """(label, misplaced weight saved over `before`) for each judged label of one repeat, its
    fold shifted as the other folds say (so the shift never saw the label it is judged on)."""
    for f, held in atoms.items():
        rest = [i for a, idx in atoms.items() if a != f for i in idx]
        delta = shift(run, c, cut, rest)
        for i in held:
            if i in judged:
                yield i, _weight_if_wrong(before[i], c, i, cut) - _weight_if_wrong(run[i] + delta, c, i, cut)


def _overlap_corrected(values: Sequence[float], k: int) -> Estimate:
    """The mean of `values` and its standard error, widened by 1 + 1 / (k - 1) because the
    training sets of k folds overlap (as gate.py's is)."""
    n = len(values)
    if n < 2:
        return Estimate(0.0, math.inf)
    mean = sum(values) / n
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return Estimate(mean, math.sqrt(variance / n * (1 + 1 / (k - 1))))


def cross_validated(runs: Sequence[Sequence[float]], folds: Sequence[Mapping[int, Sequence[int]]],
                    before: Sequence[float], c: Classes, cut: float, on: Sequence[int]) -> Estimate:
    """The weight of misplaced labels per label of `on` that placing each repeat's scores
    (`runs[r]`, with `folds[r]`) saves over `before` at `cut`, each fold shifted as the other
    folds say; with the standard error of the per-label savings, corrected for overlapping
    training sets as gate.py's is (the factor 1 + n_test / n_train)."""
    judged = set(on)
    saved = dict.fromkeys(on, 0.0)
    for run, atoms in zip(runs, folds):
        for i, gain in _fold_savings(run, atoms, before, c, cut, judged):
            saved[i] += gain / len(runs)
    return _overlap_corrected(list(saved.values()), max(2, len(folds[0]) if folds else 2))
