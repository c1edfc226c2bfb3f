"""Learning curves of `route calibrate`'s adaptation on domains the weights never saw.

    python benchmarks/adaptation.py [DIR] [--shuffles 20] [--k 50 100 300 1000] [--sets ...] [--json]
    (needs scikit-learn for the in-domain best: pip install -e '.[bench]')

Each routing set is left out in turn: the starting weights are fitted on the others (the
shipped recipe, `leave_one_out.fit_general`), then adapted (policies/complexity/training/adapt.py,
exactly what `route calibrate` runs, its gate included) on k = 50, 100, 300 and 1,000 of the
set's prompts, over `--shuffles` shuffles, and judged on the rest of the set: the adapted
weights where the gate adopted them, else the starting weights (what a user would route
with). The baseline is the starting weights on the same prompts, measured in the same run.
Every mean is printed with its standard error over the shuffles, and with how many shuffles
adopted anything: "never worse" with nothing adopted is no achievement, and is said so. Also
printed: what adopting every candidate would have given, gate or not (what the gate's caution
costs, or saves).

The gap. The in-domain best is `routing_ceiling.py`'s: the best of its model families, each
cross-validated on the set itself (5 folds, so fitted on 80 % of it: 1,000 to 11,000 labels),
and the gap is that best less the start, both on the whole set, with a paired bootstrap error.
Being fitted on far more labels than k, the best is not reachable at k = 300; the targets are
fractions of it that grow with k (below). For scale, the table beside it gives what the best
family reaches when fitted on the k labels alone, on the same shuffles.

Pass criterion, exit status 1 when it is missed: never worse -- on every set and k, the mean of
(used - start) is above -0.005. The recovery of a share of the gap (issue 36: half at k = 1,000, a
quarter at k = 300) is printed against those shares but no longer judged: issue 48 retired it (at
k = 300 no learner in the family gets there; at k = 1,000 the gate's test lacks the power, and the
looser rules that recover more cannot be shown never worse). What an operator asks of learning --
that verdicts move the class they name -- is tested through `route serve`
(tests/test_learning_steer.py).
A k leaving fewer than 25 prompts to judge on is skipped (n/a). Credit the sets' sources as
their README asks.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.routing_data import routing_sets
from policies.complexity import ComplexityScorer
from policies.complexity.training.adapt import adapt
from policies.complexity.training.leave_one_out import fit_general, set_apgr, training_records

KS = (50, 100, 300, 1000)
SHUFFLES = 20
MIN_JUDGED = 25  # prompts left to judge on, at least
TOLERANCE = 0.005  # the mean may fall this far below the start, no further
TARGETS = {300: 0.25, 1000: 0.5}  # k -> the share of the gap to recover there
SIGNIFICANT = 2.0  # standard errors: a gap worth recovering, and the k = 300 gain
BOOTSTRAP = 200


@dataclass(frozen=True, slots=True)
class Figure:
    """A mean and its standard error."""

    value: float
    se: float

    def __str__(self) -> str:
        return f"{self.value:+.4f} ± {self.se:.4f}"


def _mean(values: Sequence[float]) -> Figure:
    n = len(values)
    m = sum(values) / n
    return Figure(m, math.sqrt(sum((v - m) ** 2 for v in values) / max(1, n - 1) / n))


@dataclass
class Gap:
    """The in-domain best against the start, on the whole set."""

    family: str
    start: float
    best: float
    se: float  # of best - start, paired bootstrap over the prompts

    @property
    def value(self) -> float:
        return self.best - self.start

    @property
    def required(self) -> bool:
        return self.value > SIGNIFICANT * self.se


@dataclass
class Curve:
    """One set's learning curve: per k and shuffle, APGR on the prompts not adapted on of the
    start, of the weights used, of the candidate whatever the verdict, whether it was adopted,
    and (at the target ks of a set with a gap) of the best family fitted on the k labels alone."""

    name: str
    prompts: int
    gap: Gap
    points: dict[int, dict[str, list[float]]] = field(default_factory=dict)

    def gain(self, k: int, key: str = "used") -> Figure:
        p = self.points[k]
        return _mean([a - b for a, b in zip(p[key], p["start"])])

    def adopted(self, k: int) -> int:
        return int(sum(self.points[k]["adopted"]))

    def safe(self, k: int) -> bool:
        return self.gain(k).value >= -TOLERANCE

    def recovery(self, k: int) -> float:
        return self.gain(k).value / self.gap.value


def _gap(name: str, records: Sequence[dict[str, Any]], start_scores: list[float], family: str,
         runs: list[Any]) -> Gap:
    """The gap from the best family's out-of-fold scores (`runs`, one per shuffle)."""
    start = set_apgr(start_scores, records)
    best = sum(set_apgr(list(run), records) for run in runs) / len(runs)
    rng = random.Random(0)
    diffs = []
    for _ in range(BOOTSTRAP):
        pick = [rng.randrange(len(records)) for _ in records]
        sample = [records[i] for i in pick]
        at = sum(set_apgr([run[i] for i in pick], sample) for run in runs) / len(runs)
        diffs.append(at - set_apgr([start_scores[i] for i in pick], sample))
    mean = sum(diffs) / len(diffs)
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
    print(f"{name}: start {start:.4f}, in-domain best {best:.4f} ({family}), gap {best - start:+.4f} ± {se:.4f}",
          file=sys.stderr)
    return Gap(family, start, best, se)


def learning_curve(name: str, records: Sequence[dict[str, Any]], sets: dict[str, list[dict[str, Any]]],
                   ks: Sequence[int], shuffles: int) -> Curve:
    from benchmarks.routing_ceiling import best_family

    start = fit_general([r for other, rs in sets.items() if other != name for r in training_records(rs)])
    scorer = ComplexityScorer(start)
    start_scores = [scorer.score_text(r["prompt"]) for r in records]
    family, runs, predict = best_family(records)
    curve = Curve(name, len(records), _gap(name, records, start_scores, family, runs))
    reference = predict if curve.gap.required else None
    for k in (k for k in ks if len(records) - k >= MIN_JUDGED):
        curve.points[k] = _point(records, start, start_scores, k, shuffles,
                                 reference if k in TARGETS else None)
        print(f"{name} k={k}: gain {curve.gain(k)} ({curve.adopted(k)}/{shuffles} adopted; every candidate "
              f"{curve.gain(k, 'candidate')})", file=sys.stderr)
    return curve


def _point(records: Sequence[dict[str, Any]], start: Any, start_scores: list[float], k: int, shuffles: int,
           reference: Any) -> dict[str, list[float]]:
    """Per shuffle: APGR on the prompts not adapted on, of the start, of the weights used (the
    adapted ones when adopted), of the adapted ones whatever the verdict, and of the reference."""
    import numpy as np

    point: dict[str, list[float]] = {"start": [], "used": [], "candidate": [], "adopted": [], "seconds": []}
    if reference is not None:
        point["best_at_k"] = []
    for s in range(shuffles):
        order = list(range(len(records)))
        random.Random(s).shuffle(order)
        labelled, judged = [records[i] for i in order[:k]], [records[i] for i in order[k:]]
        began = time.perf_counter()
        found = adapt(start, labelled)
        point["seconds"].append(time.perf_counter() - began)
        before = set_apgr([start_scores[i] for i in order[k:]], judged)
        candidate = ComplexityScorer(found.candidate)
        tried = set_apgr([candidate.score_text(r["prompt"]) for r in judged], judged)
        point["start"].append(before)
        point["used"].append(tried if found.adopted else before)
        point["candidate"].append(tried)
        point["adopted"].append(float(found.adopted))
        if reference is not None:
            predicted = reference(np.array(order[:k]), np.array(order[k:]))
            point["best_at_k"].append(set_apgr(list(predicted), judged))
    return point


def format_table(curves: Sequence[Curve], ks: Sequence[int], shuffles: int) -> str:
    width = 30
    head = f"{'set':16s} {'prompts':>7s}  " + "  ".join(f"{'k=' + str(k):>{width}s}" for k in ks)
    lines = [head, f"{'':16s} {'':>7s}  " + "  ".join(f"{'gain ± se (adopted/n)':>{width}s}" for _ in ks)]
    for c in curves:
        cells, every = [], []
        for k in ks:
            if k not in c.points:
                cells.append(f"{'n/a':>{width}s}")
                every.append(f"{'':>{width}s}")
                continue
            mark = "" if c.safe(k) else "!"
            cells.append(f"{str(c.gain(k)) + f' ({c.adopted(k)}/{shuffles})' + mark:>{width}s}")
            every.append(f"{'every candidate ' + str(c.gain(k, 'candidate')):>{width}s}")
        lines.append(f"{c.name:16.16s} {c.prompts:7d}  " + "  ".join(cells))
        lines.append(f"{'':16s} {'':7s}  " + "  ".join(every))
    lines.append(f"gain: APGR of the weights used less the start's, on the prompts not adapted on (mean ± se over "
                 f"{shuffles} shuffles); adopted: shuffles whose candidate the gate adopted; ! a mean more than "
                 f"{TOLERANCE} below the start")
    return "\n".join(lines)


def format_gaps(curves: Sequence[Curve]) -> str:
    lines = [f"{'set':16s} {'start':>7s} {'best':>7s} {'family':>9s} {'gap ± se':>17s}  required   "
             + "  ".join(f"{'k=' + str(k) + ': best family on k labels':>30s}" for k in TARGETS)]
    for c in curves:
        g = c.gap
        refs = []
        for k in TARGETS:
            if k in c.points and "best_at_k" in c.points[k]:
                refs.append(f"{str(c.gain(k, 'best_at_k')):>30s}")
            else:
                refs.append(f"{'-':>30s}")
        lines.append(f"{c.name:16.16s} {g.start:7.4f} {g.best:7.4f} {g.family:>9s} {g.value:+8.4f} ± {g.se:.4f}  "
                     f"{'yes' if g.required else 'no':8s}   " + "  ".join(refs))
    lines.append("gap: the in-domain best (routing_ceiling.py: its best family cross-validated on the whole set, each "
                 "fit on 80 % of it) less the start, on the whole set, ± a paired bootstrap error; required where it "
                 f"exceeds {SIGNIFICANT:g} errors. Best family on k labels: that family fitted on the k labels alone, "
                 "judged as the adapted weights are (APGR less the start's, mean ± se): what in-domain fitting reaches "
                 "at k")
    return "\n".join(lines)


def verdicts(curves: Sequence[Curve], shuffles: int) -> tuple[list[str], bool]:
    """The verdict lines, and whether every target was met."""
    line, ok = _never_worse(curves, shuffles)
    lines = [line]
    for c in curves:  # shown against issue 36's shares; retired as a target by issue 48
        lines.append(_recovery(c)[0])
    return lines, ok


def _never_worse(curves: Sequence[Curve], shuffles: int) -> tuple[str, bool]:
    """The never-worse line, saying how much was adopted (nothing adopted is no achievement)."""
    points = [(c, k) for c in curves for k in c.points]
    unsafe = [f"{c.name} k={k} ({c.gain(k)})" for c, k in points if not c.safe(k)]
    adopted = sum(c.adopted(k) for c, k in points)
    head = f"never worse than the start (-{TOLERANCE}): "
    if unsafe:
        return head + "NO at " + ", ".join(unsafe), False
    if adopted == 0:
        return head + "nothing was adopted at any set or k, so it holds trivially", True
    where = "; ".join(f"{c.name} k={k}: {c.adopted(k)}" for c, k in points if c.adopted(k))
    return head + f"yes at every set and k; adopted in {adopted} of {shuffles * len(points)} runs ({where})", True


def _recovery(c: Curve) -> tuple[str, bool]:
    """One set's recovery line, and whether its targets were met."""
    g = c.gap
    if not g.required:
        return (f"{c.name}: no recovery required (gap {g.value:+.4f} ± {g.se:.4f}, not above {SIGNIFICANT:g} "
                "errors)"), True
    parts, ok = [], True
    for k, share in TARGETS.items():
        if k not in c.points:
            parts.append(f"k={k} n/a (too few prompts)")
            continue
        gain, r = c.gain(k), c.recovery(k)
        passed = r >= share and (k != min(TARGETS) or gain.value > SIGNIFICANT * gain.se)
        ok = ok and passed
        extra = f", gain/se {gain.value / gain.se:.1f} (needs > {SIGNIFICANT:g})" if k == min(TARGETS) and gain.se else ""
        parts.append(f"k={k} gain {gain} ({c.adopted(k)} adopted) = {r:.0%} of the gap (issue 36 asked "
                     f"{share:.0%}{extra}: {'reached' if passed else 'not reached'})")
    return f"{c.name} (gap {g.value:+.4f} ± {g.se:.4f}; retired target, shown): " + "; ".join(parts), ok


def _has_sklearn() -> bool:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        print("benchmarks/adaptation.py needs scikit-learn for the in-domain best it measures the gap to: "
              "pip install -e '.[bench]'", file=sys.stderr)
        return False
    return True


def _print(curves: Sequence[Curve], lines: list[str], ok: bool, ks: Sequence[int], shuffles: int) -> None:
    print(f"APGR gained on each set's prompts not adapted on: the starting weights (fitted without the set) against "
          f"the weights used after adapting on k of its prompts ({shuffles} shuffles)")
    print(format_table(curves, ks, shuffles))
    print()
    print(format_gaps(curves))
    print()
    for line in lines:
        print(line)
    print("targets: " + ("all met" if ok else "MISSED (exit status 1)"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=None, help="directory of routing sets")
    parser.add_argument("--shuffles", type=int, default=SHUFFLES)
    parser.add_argument("--k", type=int, nargs="+", default=list(KS), help="labelled prompts to adapt on")
    parser.add_argument("--sets", nargs="+", help="only these sets (all are still used to fit the start)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not _has_sklearn():
        return 2
    sets = routing_sets(args.data)
    curves = [learning_curve(name, records, sets, args.k, args.shuffles)
              for name, records in sets.items() if not args.sets or name in args.sets]
    lines, ok = verdicts(curves, args.shuffles)
    if args.json:
        json.dump([{**asdict(c), "required": c.gap.required} for c in curves], sys.stdout, indent=1)
        print()
    else:
        _print(curves, lines, ok, args.k, args.shuffles)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
