"""Leave-one-dataset-out routing quality of the complexity scorer: the development metric.

    .venv/bin/python benchmarks/routing_quality.py [DIR] [--json]

DIR (default ../shared/data/routing; the committed sample when that is absent) holds one
JSONL routing set per file. Each set is left out in turn: weights are fitted with the shipped
options (`learn.GENERAL`) on all the others and judged on it, beside prompt length and random
measured on the same records; then the mean. Also printed: the shipped weights on each whole
set (fitted on all of them, so in-domain: for reference only). Credit the sets' sources as
their README asks (RouteLLM, LLMRouter, TheoremQA, ZeroEval, FastChat/Vicuna).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.routing_data import routing_sets
from policies.complexity import ComplexityScorer
from policies.complexity.training.leave_one_out import judge, leave_one_out_table

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def quantiles(scores: list[float]) -> dict[str, float]:
    """The scores at QUANTILES (nearest rank), keyed "10%" and so on."""
    ranked = sorted(scores)
    return {f"{q:.0%}": ranked[min(len(ranked) - 1, int(q * len(ranked)))] for q in QUANTILES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=None, help="directory of routing sets")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sets = routing_sets(args.data)
    rows, text = leave_one_out_table(sets, log=lambda m: print(m, file=sys.stderr))
    shipped = ComplexityScorer.load()
    in_domain = [judge(shipped, name, records) for name, records in sets.items()]
    if args.json:
        json.dump({"leave_one_out": [r.as_dict() for r in rows],
                   "shipped_in_domain": [r.as_dict() for r in in_domain]}, sys.stdout, indent=1)  # fmt: skip
        print()
        return 0
    print(text)
    print("\nshipped weights on each whole set (fitted on all of them: in-domain, reference only)")
    for r in in_domain:
        print(f"  {r.name:18s} ours {r.ours:.3f}  length {r.length:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
