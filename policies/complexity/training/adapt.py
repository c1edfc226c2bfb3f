"""Adapting the weights in use to a deployment's own labels, so that it never routes worse.

`route calibrate`, `route calibrate --from-log` and the router's online learning
(router/learning/) all come here. The adapted score is the current one plus two learned terms
(`terms.py`: the hand-designed features, and the deployment's own hashed vocabulary), each a
step away from it. With both steps 0 the adapted weights are the current ones: the current
weights are the prior everything is centred on, and the labels move the score only as far as
folds they were not fitted on support.

Whether to adopt is judged by nested cross-validation: in each of `folds` folds (`repeats`
times over, folds drawn by hash), the steps are chosen on the other folds only, the terms
fitted on them, and the fold scored. The gain over the weights in use is measured fold by
fold on the labels the weights in use were not fitted on, and its standard error is that of
a corrected repeated cross-validation test with a floor for few differing labels (`gate.py`
says which and why). The adapted weights are adopted only when the gain exceeds `z` standard
errors, and only with at least `min_informative` labels on which the two tiers' answers
differ (fewer cannot tell a better order from luck). No label is ever scored by a model that
saw it, so few labels give wide errors and move nothing.

The adapted weights keep the current score scale (mean and spread of the logit over the
labelled prompts) and hosted share (a stored threshold moves to the same quantile), so score
bands in a config keep their meaning. A router's boundary passes its threshold instead: there
a verdict says on which side of it the prompt belongs, so the labels also place the score
against it (`placement.py`), and an order that is already right but misplaced is moved across
it. Pure Python; deterministic for given records.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from policies.complexity.features import FEATURES
from policies.complexity.model import ComplexityScorer, Weights
from policies.complexity.training.gate import ADOPT_Z, Estimate, FoldGain, corrected_gain, fold_gain
from policies.complexity.training.terms import Fit, Labelled, Stats, TermOptions, choose_steps, fit, logit, prepare, sd
from policies.routing_eval import quality_curve

__all__ = ["AdaptOptions", "Adaptation", "Estimate", "Labelled", "adapt", "adapt_json", "estimate", "prepare"]


@dataclass(frozen=True, slots=True)
class AdaptOptions:
    """`folds` x `repeats`: the nested cross-validation; `bootstrap`: resamples for the errors
    of the APGR before and after; `z`: the gain must exceed this many standard errors (`ADOPT_Z`,
    a one-sided test at 10 %); `min_labels` and `min_informative`: below these nothing is
    fitted (the error would swamp any gain)."""

    folds: int = 5
    repeats: int = 3
    bootstrap: int = 300
    z: float = ADOPT_Z
    min_labels: int = 30
    min_informative: int = 40
    seed: int = 0
    terms: TermOptions = field(default_factory=TermOptions)


@dataclass(frozen=True, slots=True)
class Adaptation:
    """The verdict. `weights` is what to use: `candidate` when adopted, else the weights in use."""

    weights: Weights
    candidate: Weights
    adopted: bool
    reason: str
    labels: int
    judged_on: int  # labels the weights in use were not fitted on: before and after are compared there
    before: Estimate | None = None
    after: Estimate | None = None
    gain: Estimate | None = None
    steps: tuple[float, float] = (0.0, 0.0)  # (features, words), chosen on every label
    # with a boundary's threshold: the share of labels' weight placed right that the candidate
    # gains over the weights in use (placement.py), and the logit shift it was placed with
    placement: Estimate | None = None
    shift: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "adopted": self.adopted, "reason": self.reason, "labels": self.labels, "judged_on": self.judged_on,
            "apgr_before": None if self.before is None else self.before.as_dict(),
            "apgr_after": None if self.after is None else self.after.as_dict(),
            "gain": None if self.gain is None else self.gain.as_dict(),
            "steps": {"features": round(self.steps[0], 4), "words": round(self.steps[1], 4)},
            "placement": None if self.placement is None else self.placement.as_dict(),
            "shift": round(self.shift, 4),
        }  # fmt: skip


def _area(scores: Sequence[float], local: Sequence[float], hosted: Sequence[float]) -> float:
    """The area under the quality curve: APGR before it is normalised by the gap."""
    curve = quality_curve(scores, local, hosted)
    return sum((s1 - s0) * (q0 + q1) / 2 for (s0, q0), (s1, q1) in zip(curve, curve[1:]))


class _Ranked:
    """Prompts in the order a score routes them up (highest first), with where each tie group
    ends, so that the area under the quality curve of any resample (a count per prompt) is one
    pass, with no sort: the bootstrap draws hundreds of resamples."""

    def __init__(self, scores: Sequence[float], local: Sequence[float], hosted: Sequence[float]):
        self.order = sorted(range(len(scores)), key=lambda i: -scores[i])
        self.ends = [j + 1 == len(self.order) or scores[self.order[j + 1]] != scores[i]
                     for j, i in enumerate(self.order)]
        self.local, self.hosted = local, hosted

    def area(self, counts: Sequence[int]) -> float:
        """`_area` of the resample holding prompt i `counts[i]` times (the same curve, tie
        groups sent up together as `quality_curve` does)."""
        weight = quality = 0.0
        for i in range(len(counts)):
            weight += counts[i]
            quality += counts[i] * self.local[i]
        if weight <= 0:
            return 0.0
        total, before, group_w, group_q = 0.0, quality / weight, 0.0, 0.0
        for i, end in zip(self.order, self.ends):
            c = counts[i]
            group_w += c
            group_q += c * (self.hosted[i] - self.local[i])
            if end and group_w:
                after = before + group_q / weight
                total += group_w / weight * (before + after) / 2
                before, group_w, group_q = after, 0.0, 0.0
        return total


def _atoms(d: Labelled, folds: int, salt: str) -> dict[int, list[int]]:
    """Prompt indexes by fold, the fold drawn from a hash of the label's id."""
    atoms: dict[int, list[int]] = defaultdict(list)
    for i, rid in enumerate(d.ids):
        digest = hashlib.sha256(f"{salt}:{rid}".encode()).digest()
        atoms[int.from_bytes(digest[:8], "big") % folds].append(i)
    return atoms


def _score(fitted: Fit, d: Labelled, i: int, steps: tuple[float, float]) -> float:
    s0, f, w = fitted.parts(d, i)
    return s0 + steps[0] * f + steps[1] * w


def _out_of_fold(d: Labelled, repeat: int, opts: AdaptOptions) -> list[float]:
    """Each prompt scored by terms (and steps) chosen and fitted without its fold."""
    atoms = _atoms(d, opts.folds, f"adapt-{opts.seed}-{repeat}")
    sums = {a: Stats.of(d, held) for a, held in atoms.items()}
    whole = Stats.of(d, range(len(d.ids)))
    scores = [0.0] * len(d.ids)
    for f, held in atoms.items():
        inner = {a: rest for a, rest in atoms.items() if a != f}
        training = whole.without([sums[f]])
        steps = choose_steps(d, inner, opts.terms, sums, training)
        fitted = fit(d, [i for rest in inner.values() for i in rest], opts.terms, training)
        for i in held:
            scores[i] = _score(fitted, d, i, steps)
    return scores


def _judge(d: Labelled, on: list[int], runs: list[list[float]], opts: AdaptOptions) -> tuple[Estimate, Estimate, Estimate]:
    """(before, after, gain) on the prompts `on`, each with its standard error.

    The gain is measured fold by fold with the corrected error of `gate.py`. Before and after
    are the APGR of the incumbent's order and of the pooled out-of-fold order, their errors
    bootstrapped over the prompts; after is reported as before + gain, the figure the gate
    judges. The gap of the labels at hand normalises every figure (resampling the normaliser
    too would let a resample with almost no gap swamp the error of a set whose gap is small)."""
    areas = _Areas(d, on, runs)
    n = len(on)
    before, _ = areas([1] * n)
    rng = random.Random(opts.seed)
    samples = [areas(_resample(rng, n)) for _ in range(opts.bootstrap)]
    gap = areas.gap
    gain = corrected_gain([_fold_gains(d, on, run, r, opts) for r, run in enumerate(runs)], gap, opts.folds)
    after_se = _spread([sum(a) / len(a) for _, a in samples]) / gap
    return (Estimate(before / gap, _spread([b for b, _ in samples]) / gap),
            Estimate(before / gap + gain.value, after_se), gain)  # fmt: skip


def _fold_gains(d: Labelled, on: list[int], run: list[float], repeat: int, opts: AdaptOptions) -> list[FoldGain]:
    """The area `run` (one repeat's out-of-fold scores) gains over the incumbent in each of
    that repeat's folds, on the labels of `on` in it."""
    judged = set(on)
    gains = [h - lo for h, lo in zip(d.hosted, d.local)]
    folds = _atoms(d, opts.folds, f"adapt-{opts.seed}-{repeat}")
    return [fold_gain(gains, run, d.before, held) for held in ([i for i in f if i in judged] for f in folds.values())
            if held]


def _spread(values: Sequence[float]) -> float:
    return sd(values, sum(values) / len(values))


class _Areas:
    """The areas (less the local quality) of the incumbent's order and of each repeat's
    out-of-fold order, on any resample of the prompts `on` (a count per prompt)."""

    def __init__(self, d: Labelled, on: list[int], runs: list[list[float]]):
        self.local = [d.local[i] for i in on]
        hosted = [d.hosted[i] for i in on]
        self.gap = (sum(hosted) - sum(self.local)) / len(on)
        self.base = _Ranked([d.before[i] for i in on], self.local, hosted)
        self.runs = [_Ranked([run[i] for i in on], self.local, hosted) for run in runs]

    def __call__(self, counts: Sequence[int]) -> tuple[float, list[float]]:
        q_local = sum(c * lo for c, lo in zip(counts, self.local)) / sum(counts)
        return self.base.area(counts) - q_local, [run.area(counts) - q_local for run in self.runs]


def _resample(rng: random.Random, n: int) -> list[int]:
    """How many times each of n prompts is drawn in a bootstrap resample of size n."""
    counts = [0] * n
    for _ in range(n):
        counts[rng.randrange(n)] += 1
    return counts


def _weights(current: Weights, d: Labelled, fitted: Fit, steps: tuple[float, float], meta: dict[str, Any]) -> Weights:
    """`current` with the two terms added at `steps`, rescaled to the current score's mean and
    spread over the labelled prompts (order unchanged), a threshold at the same quantile."""
    return _rescaled(current, d, fitted, steps, meta)[0]


def _rescaled(current: Weights, d: Labelled, fitted: Fit, steps: tuple[float, float],
              meta: dict[str, Any]) -> tuple[Weights, tuple[float, float]]:
    """`_weights`, and the (scale, offset) that took a logit of the fitted terms to the new score's."""
    raw = _with_terms(current, fitted, steps)
    new = [logit(p) for p in map(ComplexityScorer(raw).score_text, d.prompts)]
    mu_old, mu_new = sum(d.logit) / len(d.logit), sum(new) / len(new)
    a = (sd(d.logit, mu_old) or 1.0) / (sd(new, mu_new) or 1.0)
    affine = (a, mu_old - a * mu_new)
    pinned = replace(
        raw,
        bias=round(a * raw.bias + mu_old - a * mu_new, 6),
        weights={k: round(a * v, 6) for k, v in raw.weights.items()},
        vocabulary_cap=a * raw.vocabulary_cap,
        domain={k: round(a * v, 7) for k, v in raw.domain.items() if abs(a * v) >= 1e-6},
        metadata={**current.metadata, "adapted": meta},
    )
    if current.threshold is None:
        return pinned, affine
    from policies.complexity.training.fit import calibrate_threshold

    share = sum(v >= logit(current.threshold) for v in d.logit) / len(d.logit)
    return replace(pinned, threshold=calibrate_threshold(list(map(ComplexityScorer(pinned).score_text, d.prompts)),
                                                         share)), affine


def _with_terms(current: Weights, fitted: Fit, steps: tuple[float, float]) -> Weights:
    """`current` plus the features term (moving each feature's weight) and the words term (the
    domain table) at `steps`, in the current logit's units."""
    scale_f = fitted.sd0 * steps[0] / fitted.sd_f
    scale_w = fitted.sd0 * steps[1] / fitted.sd_w
    weights = dict(current.weights)
    bias = current.bias - scale_w * fitted.centre_w
    for b, j, m, s in zip(fitted.beta, fitted.columns, fitted.mu, fitted.sd):
        name = FEATURES[j]
        delta = scale_f * b / s
        weights[name] = weights.get(name, 0.0) + delta
        bias += delta * (current.means.get(name, 0.0) - m)  # the model centres on its own means
    domain = dict(current.domain)
    for bucket, value in fitted.table.items():
        domain[bucket] = domain.get(bucket, 0.0) + scale_w * value
    return replace(current, bias=bias, weights=weights, domain=domain)


def _too_few(d: Labelled, on: list[int], options: AdaptOptions) -> str | None:
    """Why these labels cannot tell a better order from luck, or None when they may."""
    if len(d.ids) < options.min_labels or len(on) < options.min_labels:
        return f"{len(on)} labels the weights in use were not fitted on; adapting needs {options.min_labels}"
    informative = sum(1 for i in on if abs(d.hosted[i] - d.local[i]) > 1e-9)
    if informative < options.min_informative:
        return (f"{informative} of the labels show the tiers' answers differ; judging needs "
                f"{options.min_informative}, as fewer cannot tell a better order from luck")
    if sum(d.hosted[i] - d.local[i] for i in on) <= 1e-9:
        return "the labels show no gain from the stronger tier: no order of the prompts routes better"
    return None


def adapt(
    current: Weights,
    records: Sequence[dict[str, Any]] | Labelled,
    *,
    incumbent: Weights | None = None,
    seen: Collection[str] = (),
    options: AdaptOptions = AdaptOptions(),
    threshold: float | None = None,
) -> Adaptation:
    """Adapt `current` to `records` ({"id", "prompt", "local", "hosted"}), adopting the result
    only when nested cross-validation shows a gain beyond `options.z` standard errors.

    `incumbent`: the weights in use, when they are not `current` itself (online learning refits
    from the configured weights each time and must beat the version in use); `seen`: ids of
    records the incumbent was fitted on. Before and after are compared on the other records
    only, so weights are never judged on labels they were fitted on.

    `threshold`: the threshold the boundary compares these weights' score with (a router's
    boundary; None for `route calibrate`, which keeps the hosted share). Given, the labels also
    place the boundary (`_placed`): the verdicts move the prompts they name across it."""
    d = records if isinstance(records, Labelled) else prepare(current, records, incumbent)
    n = len(d.ids)
    on = [i for i, rid in enumerate(d.ids) if rid not in seen]

    def keep(reason: str, candidate: Weights | None = None, **figures: Any) -> Adaptation:
        kept = incumbent or current
        return Adaptation(kept, candidate or kept, False, reason, n, len(on), **figures)

    too_few = _too_few(d, on, options)
    if too_few is not None:
        return keep(too_few)
    runs = [_out_of_fold(d, r, options) for r in range(options.repeats)]
    before, after, gain = _judge(d, on, runs, options)
    steps = choose_steps(d, _atoms(d, options.folds, f"adapt-{options.seed}-0"), options.terms)
    figures = {"before": before, "after": after, "gain": gain, "steps": steps}
    meta = {"labels": n, "steps": list(steps), "apgr_before": before.as_dict(), "apgr_after": after.as_dict(),
            "gain": gain.as_dict()}  # fmt: skip
    candidate, affine = _rescaled(current, d, fit(d, range(n), options.terms), steps, meta)
    if threshold is not None:
        return _placed(d, on, runs, options, threshold, candidate, affine, incumbent or current, figures, keep)
    if steps == (0.0, 0.0):
        return keep("cross-validation gave both terms step 0: the labels do not move the weights", candidate, **figures)
    if gain.value <= options.z * gain.se:
        return keep(f"the cross-validated gain {gain.value:+.3f} does not exceed {options.z:g} standard errors "
                    f"({gain.se:.3f} each); more labels narrow the error", candidate, **figures)
    return Adaptation(candidate, candidate, True, f"cross-validated gain {gain}", n, len(on), **figures)  # type: ignore[arg-type]


def _placed(d: Labelled, on: list[int], runs: list[list[float]], options: AdaptOptions, threshold: float,
            candidate: Weights, affine: tuple[float, float], kept: Weights, figures: dict[str, Any],
            keep: Any) -> Adaptation:
    """The verdict with a boundary's threshold: the order the terms learned, placed against it
    (`placement.py`), adopted when its order gains beyond its error and it misplaces no more of
    the labels it did not see than the weights in use (never worse on the operator's own labels);
    else the weights in use, placed, when that alone misplaces fewer beyond its error."""
    from policies.complexity.training.placement import classes, cross_validated, shift

    cut, c, z = logit(threshold), classes(d.local, d.hosted), options.z
    folds = [_atoms(d, options.folds, f"adapt-{options.seed}-{r}") for r in range(len(runs))]
    a, b = affine
    mapped = [[a * x + b for x in run] for run in runs]  # out-of-fold scores in the candidate's units
    ordered = cross_validated(mapped, folds, d.before, c, cut, on)
    gain = figures["gain"]
    if figures["steps"] != (0.0, 0.0) and gain.value > z * gain.se and ordered.value > -z * ordered.se:
        delta = shift([sum(col) / len(col) for col in zip(*mapped)], c, cut)
        placed = _shifted(candidate, delta, threshold, {"shift": round(delta, 6), "placement": ordered.as_dict()})
        return Adaptation(placed, placed, True, f"cross-validated gain {gain}; placed on the right side of the "
                          f"boundary: {ordered.value:+.3f} ± {ordered.se:.3f} of the labels' weight", len(d.ids), len(on),
                          **figures,
                          placement=ordered, shift=delta)
    alone = cross_validated([d.before] * len(runs), folds, d.before, c, cut, on)
    if alone.value > z * alone.se:
        delta = shift(d.before, c, cut)
        placed = _shifted(kept, delta, threshold, {**candidate.metadata.get("adapted", {}), "order": "kept",
                                                   "shift": round(delta, 6), "placement": alone.as_dict()})
        return Adaptation(placed, placed, True, f"the labels place the boundary: {alone.value:+.3f} ± {alone.se:.3f} "
                          "of their weight moves to the side they name (on labels each shift was not chosen on); "
                          f"the order kept (its gain {gain} is within {z:g} errors)", len(d.ids), len(on), **figures,
                          placement=alone, shift=delta)
    why = (f"the cross-validated gain {gain.value:+.3f} does not exceed {z:g} standard errors ({gain.se:.3f} each)"
           if gain.value <= z * gain.se else f"the new order would place {ordered.value:+.3f} ± {ordered.se:.3f} of the "
           "labels' weight on the side they name: worse than the version in use")
    return keep(f"{why}, and placing the boundary gains {alone.value:+.3f} ± {alone.se:.3f} of the labels' weight, "
                f"within {z:g} errors; more labels narrow the error", candidate, **figures, placement=alone)


def _shifted(weights: Weights, delta: float, threshold: float, note: dict[str, Any]) -> Weights:
    """`weights` with its logit moved by `delta`, compared with `threshold` (kept as its own
    when the weights carry one, for a `below: calibrated` tier)."""
    meta = {**weights.metadata, "adapted": {**weights.metadata.get("adapted", {}), **note}}
    return replace(weights, bias=round(weights.bias + delta, 6), metadata=meta,
                   threshold=threshold if weights.threshold is not None else None)


def estimate(weights: Weights, records: Sequence[dict[str, Any]], *, bootstrap: int = 200,
             seed: int = 0) -> Estimate | None:
    """APGR of `weights` on `records`, with its bootstrap standard error (normalised by the
    records' gap, as in `adapt`); None without a gap to recover."""
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
    rng = random.Random(seed)
    ranked = _Ranked(scores, local, hosted)
    samples = []
    for _ in range(bootstrap):
        counts = _resample(rng, n)
        samples.append(ranked.area(counts) - sum(c * lo for c, lo in zip(counts, local)) / n)
    value = (_area(scores, local, hosted) - sum(local) / n) / gap
    return Estimate(value, sd(samples, sum(samples) / len(samples)) / gap)


def adapt_json(current: dict[str, Any], records: list[dict[str, Any]], incumbent: dict[str, Any] | None,
               seen: Collection[str], z: float, threshold: float | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """`adapt` on weights given as their files' JSON, returning (the weights to use, the
    verdict's figures): plain data, for a worker process (router/learning/refit.py)."""
    found = adapt(Weights.from_json(current), records,
                  incumbent=Weights.from_json(incumbent) if incumbent is not None else None,
                  seen=seen, options=AdaptOptions(z=z), threshold=threshold)
    return found.weights.to_json(), found.as_dict()
