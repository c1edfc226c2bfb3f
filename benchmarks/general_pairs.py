"""Generalization sanity check: does the scorer rank the harder prompt of a pair above the easier?

    .venv/bin/python benchmarks/general_pairs.py [--weights FILE] [--json]

`tests/data/general_pairs.jsonl` holds hand-written pairs `{"id", "category", "easy", "hard"}`
(optionally `lang`) across open-ended chat, everyday questions, coding (some with fenced code),
math, writing, science and domain exams, multi-part instructions and ten languages,
where a careful practitioner would agree the hard prompt needs a frontier model more. About a
sixth of the pairs have the easy prompt longer, so length alone cannot get them all.

The set is a sanity check, never a fitting target: nothing is fitted on it. Printed beside the
length baseline measured in the same run:
- pair accuracy: share of pairs with score(hard) > score(easy) (a tie counts half), overall,
  per category and per language;
- global AUC: chance that a random hard prompt outscores a random easy one, which is what a
  single routing threshold needs;
- the share of easy and of hard prompts at or above the calibrated threshold, and the score
  quantiles of each.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.routing_quality import quantiles
from policies.complexity import ComplexityScorer
from policies.length import LengthScorer

__all__ = ["PAIRS", "auc", "load_pairs", "pair_accuracy", "report"]

PAIRS = Path(__file__).resolve().parents[1] / "tests" / "data" / "general_pairs.jsonl"


def load_pairs(path: str | Path = PAIRS) -> list[dict[str, Any]]:
    """The pairs in a JSONL file; each needs `easy`, `hard` and `category`."""
    pairs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                p = json.loads(line)
                missing = {"easy", "hard", "category"} - p.keys()
                if missing:
                    raise ValueError(f"{path}:{n}: pair lacks {sorted(missing)}")
                pairs.append(p)
    return pairs


def _win(hard: float, easy: float) -> float:
    return 1.0 if hard > easy else 0.5 if hard == easy else 0.0


def pair_accuracy(scored: Sequence[tuple[float, float]]) -> float:
    """Share of (easy score, hard score) pairs where hard is higher; ties count half."""
    return sum(_win(h, e) for e, h in scored) / len(scored)


def auc(easy: Sequence[float], hard: Sequence[float]) -> float:
    """Chance that a random hard score beats a random easy one (ties count half)."""
    return sum(_win(h, e) for h in hard for e in easy) / (len(hard) * len(easy))


def _grouped(pairs: Sequence[dict[str, Any]], scored: list[tuple[float, float]], key: str) -> dict[str, float]:
    groups: dict[str, list] = defaultdict(list)
    for p, s in zip(pairs, scored):
        groups[p.get(key, "en")].append(s)
    return {g: pair_accuracy(v) for g, v in sorted(groups.items())}


def report(score: Callable[[str], float], pairs: Sequence[dict[str, Any]], threshold: float | None = None) -> dict:
    """Pair accuracy overall, per category and per language, global AUC, score quantiles and
    (given a threshold) the share of easy and of hard prompts at or above it."""
    scored = [(score(p["easy"]), score(p["hard"])) for p in pairs]
    easy, hard = [e for e, _ in scored], [h for _, h in scored]
    out: dict[str, Any] = {
        "pairs": len(pairs),
        "accuracy": pair_accuracy(scored),
        "auc": auc(easy, hard),
        "by_category": _grouped(pairs, scored, "category"),
        "by_language": _grouped(pairs, scored, "lang"),
        "n_by_category": dict(sorted(Counter(p["category"] for p in pairs).items())),
        "easy_quantiles": quantiles(easy),
        "hard_quantiles": quantiles(hard),
    }
    if threshold is not None:
        out["easy_above_threshold"] = sum(e >= threshold for e in easy) / len(easy)
        out["hard_above_threshold"] = sum(h >= threshold for h in hard) / len(hard)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pairs", nargs="?", type=Path, default=PAIRS)
    parser.add_argument("--weights", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pairs = load_pairs(args.pairs)
    learned = ComplexityScorer.load(args.weights)
    length = LengthScorer()
    out = {
        "learned": report(learned.score_text, pairs, learned.threshold),
        "length": report(lambda t: length.score([{"role": "user", "content": t}]).value, pairs),
    }
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    a, b = out["learned"], out["length"]
    print(f"{len(pairs)} pairs from {args.pairs.name}; accuracy = share with score(hard) > score(easy)")
    print(f"{'':16s} {'learned':>8s} {'length':>8s}")
    print(f"{'all pairs':16s} {a['accuracy']:8.3f} {b['accuracy']:8.3f}")
    print(f"{'global AUC':16s} {a['auc']:8.3f} {b['auc']:8.3f}")
    for c, n in a["n_by_category"].items():
        print(f"{c + f' ({n})':16s} {a['by_category'][c]:8.3f} {b['by_category'][c]:8.3f}")
    for lang in a["by_language"]:
        print(f"{'  lang ' + lang:16s} {a['by_language'][lang]:8.3f} {b['by_language'][lang]:8.3f}")
    for kind in ("easy", "hard"):
        q = "  ".join(f"{k} {v:.3f}" for k, v in a[f"{kind}_quantiles"].items())
        print(f"learned score quantiles, {kind} prompts: {q}")
    if "easy_above_threshold" in a:
        print(f"at or above the learned threshold {learned.threshold:.3f}: "
              f"{a['easy_above_threshold']:.1%} of easy prompts, {a['hard_above_threshold']:.1%} of hard ones")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
