"""Routing quality of the complexity scorer on the held-out GSM8K and MMLU records.

    .venv/bin/python benchmarks/routing_quality.py [--json]

Uses only the records `policies.complexity.fit.split` holds out (never fitted on) from the
shared RouteLLM data (Ong et al., 2024; Apache-2.0) and prints, per dataset, the scorer beside
the baselines measured in the same run; then the score quantiles (10/25/50/75/90 %) of every
shared prompt, per dataset and together, for setting tier bands, and the calibrated threshold.
See `benchmarks/general_pairs.py` for prompts of other kinds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console

from policies.complexity import ComplexityScorer
from policies.complexity.fit import DEFAULT_DATA, load_records, split
from router.cli.scoring_cmds import eval_table, evaluate_records

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def quantiles(scores: list[float]) -> dict[str, float]:
    """The scores at QUANTILES (nearest rank), keyed "10%" and so on."""
    ranked = sorted(scores)
    return {f"{q:.0%}": ranked[min(len(ranked) - 1, int(q * len(ranked)))] for q in QUANTILES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="*", type=Path, default=list(DEFAULT_DATA))
    parser.add_argument("--weights", type=Path, default=None)
    parser.add_argument("--holdout", type=float, default=0.3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scorer = ComplexityScorer.load(args.weights)
    out: dict = {}
    every: list[float] = []
    for path in args.data:
        records = load_records([path])
        _, test = split(records, args.holdout)
        reports, _ = evaluate_records(scorer, test)
        scores = [scorer.score_text(r["prompt"]) for r in records]
        every += scores
        out[path.stem] = {"held_out": len(test), "reports": [r.as_dict() for r in reports],
                          "prompts": len(scores), "quantiles": quantiles(scores)}  # fmt: skip
        if not args.json:
            Console().print(eval_table(reports, f"{path.stem}: {len(test)} held-out prompts"))
    out["all"] = {"prompts": len(every), "quantiles": quantiles(every), "threshold": scorer.threshold}
    if not args.json:
        for name, entry in out.items():
            q = "  ".join(f"{k} {v:.3f}" for k, v in entry["quantiles"].items())
            print(f"score quantiles, {name} ({entry['prompts']} prompts): {q}")
        print(f"calibrated threshold: {scorer.threshold:.4f}")
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
