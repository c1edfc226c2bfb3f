"""Learning curves of `route calibrate`'s adaptation on domains the weights never saw.

    python benchmarks/adaptation.py [DIR] [--ceiling ceiling.json] [--json]
    (ceiling.json: `python benchmarks/routing_ceiling.py DIR --json > ceiling.json`, the bench extra)

Each routing set is left out in turn: the starting weights are fitted on the others (the
shipped recipe, `leave_one_out.fit_general`), then adapted (policies/complexity/training/adapt.py,
exactly what `route calibrate` runs) on k = 50, 100, 300 and 1,000 of the set's prompts, five
shuffles each, and judged on the rest of the set: the adapted weights where adaptation adopted
them, else the starting weights (what a user would route with). The baseline is the starting
weights on the same prompts, measured in the same run. Also kept (JSON, stderr): what the
adapted weights would have given had every candidate been adopted, gate or not: the gap
between the two is what the gate's caution costs.

Pass criteria (issue 23): on every set and k, the mean APGR is no lower than the start's
minus 0.005; at k = 300, where `routing_ceiling.py`'s in-domain best is above the start (on the
whole set), the mean recovers at least half of that gap. A k leaving fewer than 25 prompts to
judge on is skipped (n/a). Credit the sets' sources as their README asks.
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
SHUFFLES = 5
MIN_JUDGED = 25  # prompts left to judge on, at least
TOLERANCE = 0.005  # the mean may fall this far below the start, no further
RECOVERY_K = 300


@dataclass
class Curve:
    """One set's learning curve: per k, the start's and the used weights' APGR per shuffle."""

    name: str
    prompts: int
    start_whole: float  # the starting weights on the whole set
    best: float | None  # routing_ceiling.py's in-domain best, when given
    points: dict[int, dict[str, list[float]]] = field(default_factory=dict)  # k -> start/used/adopted/seconds

    def mean(self, k: int, key: str) -> float:
        values = self.points[k][key]
        return sum(values) / len(values)

    def se(self, k: int, key: str) -> float:
        values = self.points[k][key]
        m = sum(values) / len(values)
        return math.sqrt(sum((v - m) ** 2 for v in values) / max(1, len(values) - 1) / len(values))

    def safe(self, k: int) -> bool:
        return self.mean(k, "used") >= self.mean(k, "start") - TOLERANCE

    def recovery(self) -> float | None:
        """The share of the start-to-best gap recovered at RECOVERY_K; None where not required."""
        if self.best is None or self.best <= self.start_whole or RECOVERY_K not in self.points:
            return None
        return (self.mean(RECOVERY_K, "used") - self.mean(RECOVERY_K, "start")) / (self.best - self.start_whole)


def learning_curve(name: str, records: Sequence[dict[str, Any]], sets: dict[str, list[dict[str, Any]]],
                   ks: Sequence[int], shuffles: int, best: float | None) -> Curve:
    start = fit_general([r for other, rs in sets.items() if other != name for r in training_records(rs)])
    scorer = ComplexityScorer(start)
    start_scores = {r["id"]: scorer.score_text(r["prompt"]) for r in records}
    curve = Curve(name, len(records), set_apgr([start_scores[r["id"]] for r in records], records), best)
    for k in (k for k in ks if len(records) - k >= MIN_JUDGED):
        curve.points[k] = _point(records, start, start_scores, k, shuffles)
        print(f"{name} k={k}: start {curve.mean(k, 'start'):.3f}, adapted {curve.mean(k, 'used'):.3f} "
              f"± {curve.se(k, 'used'):.3f} ({int(sum(curve.points[k]['adopted']))}/{shuffles} adopted; had every "
              f"candidate been adopted {curve.mean(k, 'candidate'):.3f})", file=sys.stderr)
    return curve


def _point(records: Sequence[dict[str, Any]], start: Any, start_scores: dict[str, float], k: int,
           shuffles: int) -> dict[str, list[float]]:
    """Per shuffle: APGR on the prompts not adapted on, of the start, of the weights used (the
    adapted ones when adopted) and of the adapted ones whatever the verdict."""
    point: dict[str, list[float]] = {"start": [], "used": [], "candidate": [], "adopted": [], "seconds": []}
    for s in range(shuffles):
        shuffled = list(records)
        random.Random(s).shuffle(shuffled)
        labelled, judged = shuffled[:k], shuffled[k:]
        began = time.perf_counter()
        found = adapt(start, labelled)
        point["seconds"].append(time.perf_counter() - began)
        before = set_apgr([start_scores[r["id"]] for r in judged], judged)
        candidate = ComplexityScorer(found.candidate)
        tried = set_apgr([candidate.score_text(r["prompt"]) for r in judged], judged)
        point["start"].append(before)
        point["used"].append(tried if found.adopted else before)
        point["candidate"].append(tried)
        point["adopted"].append(float(found.adopted))
    return point


def format_table(curves: Sequence[Curve], ks: Sequence[int], shuffles: int) -> str:
    head = f"{'set':16s} {'prompts':>7s} {'best':>6s}  " + "  ".join(f"{'k=' + str(k):>28s}" for k in ks)
    lines = [head, f"{'':16s} {'':>7s} {'':>6s}  " + "  ".join(f"{'start -> adapted ± se (n)':>28s}" for _ in ks)]
    for c in curves:
        cells = []
        for k in ks:
            if k not in c.points:
                cells.append(f"{'n/a':>28s}")
                continue
            mark = "" if c.safe(k) else "!"
            adopted = int(sum(c.points[k]["adopted"]))
            cells.append(f"{c.mean(k, 'start'):.3f} -> {c.mean(k, 'used'):.3f} ± {c.se(k, 'used'):.3f} ({adopted}){mark:1s}")
        best = f"{c.best:6.3f}" if c.best is not None else f"{'-':>6s}"
        lines.append(f"{c.name:16.16s} {c.prompts:7d} {best}  " + "  ".join(f"{x:>28s}" for x in cells))
    lines.append(f"(n): shuffles of {shuffles} whose adaptation was adopted; ! marks a mean more than {TOLERANCE} "
                 "below the start")
    return "\n".join(lines)


def verdicts(curves: Sequence[Curve]) -> list[str]:
    unsafe = [f"{c.name} k={k}" for c in curves for k in c.points if not c.safe(k)]
    out = ["never worse than the start (-0.005): " + ("yes, every set and k" if not unsafe else
                                                       "NO: " + ", ".join(unsafe))]
    return out + [_recovery_line(c) for c in curves]


def _recovery_line(c: Curve) -> str:
    r = c.recovery()
    if r is not None and c.best is not None:
        return (f"{c.name}: k={RECOVERY_K} recovers {r:.0%} of the gap to the in-domain best ({c.start_whole:.3f} -> "
                f"{c.best:.3f}, gap {c.best - c.start_whole:.3f}): {'pass' if r >= 0.5 else 'FAIL'}")
    if c.best is None:
        why = "no ceiling given"
    elif RECOVERY_K not in c.points:
        why = "n/a (too few prompts)"
    else:
        why = f"not required (best {c.best:.3f} <= start {c.start_whole:.3f})"
    return f"{c.name}: k={RECOVERY_K} recovery {why}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=None, help="directory of routing sets")
    parser.add_argument("--ceiling", type=Path, help="routing_ceiling.py --json output: the in-domain bests")
    parser.add_argument("--shuffles", type=int, default=SHUFFLES)
    parser.add_argument("--k", type=int, nargs="+", default=list(KS), help="labelled prompts to adapt on")
    parser.add_argument("--sets", nargs="+", help="only these sets (all are still used to fit the start)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sets = routing_sets(args.data)
    bests = {}
    if args.ceiling is not None:
        bests = {row["name"]: float(row["best"]) for row in json.loads(args.ceiling.read_text(encoding="utf-8"))}
    curves = [learning_curve(name, records, sets, args.k, args.shuffles, bests.get(name))
              for name, records in sets.items() if not args.sets or name in args.sets]
    if args.json:
        json.dump([{**asdict(c), "recovery": c.recovery()} for c in curves], sys.stdout, indent=1)
        print()
        return 0
    print(f"APGR on each set's prompts not adapted on: the starting weights (fitted without the set) -> the "
          f"weights used after adapting on k of its prompts (mean ± se over {args.shuffles} shuffles)")
    print(format_table(curves, args.k, args.shuffles))
    for line in verdicts(curves):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
