"""Routing quality of the complexity scorer on the held-out GSM8K and MMLU records.

    .venv/bin/python benchmarks/routing_quality.py [--json]

Uses only the records `policies.complexity.fit.split` holds out (never fitted on) from the
shared RouteLLM data (Ong et al., 2024; Apache-2.0) and prints, per dataset, the scorer beside
the baselines measured in the same run.
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="*", type=Path, default=list(DEFAULT_DATA))
    parser.add_argument("--weights", type=Path, default=None)
    parser.add_argument("--holdout", type=float, default=0.3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scorer = ComplexityScorer.load(args.weights)
    out = {}
    for path in args.data:
        _, test = split(load_records([path]), args.holdout)
        reports, _ = evaluate_records(scorer, test)
        out[path.stem] = {"held_out": len(test), "reports": [r.as_dict() for r in reports]}
        if not args.json:
            Console().print(eval_table(reports, f"{path.stem}: {len(test)} held-out prompts"))
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
