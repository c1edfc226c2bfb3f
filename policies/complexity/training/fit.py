"""Fit and calibrate the complexity scorer's weights from labelled routing records.

    python -m policies.complexity.training.fit ../shared/data/routing/*.jsonl --holdout 0 \
        --out policies/complexity/weights.json

Records are JSON lines `{"id", "prompt", "local", "hosted"}` (quality in [0, 1]); the shipped
weights are fitted on every set in ../shared/data/routing with `learn.GENERAL`, the options that
did best leaving one dataset out (`benchmarks/routing_quality.py`).

- Split: a record is held out when a hash of its id falls below `holdout`, so the split is
  the same on every machine and run; only the rest is fitted on (see `learn.py` for the model).
- With `--cv`, vocabulary boosts (`GRID`) are chosen by cross-validation inside the training
  part (mean per-dataset APGR), never on the held-out part.
- Scale: the logit is stretched and shifted (`rescaled`, order unchanged) so that, every set
  weighing the same, 35 % of training prompts score below 0.45 and 30 % from 0.6 up, the
  threshold stored with the weights (`ANCHORS`). `route calibrate` instead sets the threshold
  for a hosted share of the user's own prompts (`calibrated`). Pure Python: no numpy needed,
  so `route calibrate` works wherever the router does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from policies.complexity.model import ComplexityScorer, Weights
from policies.complexity.training.learn import (
    GENERAL,
    Design,
    LearnOptions,
    dataset_of,
    design,
    fold_of,
    learn,
    subset,
)
from policies.routing_eval import apgr, quality_curve

__all__ = [
    "GRID",
    "calibrate_threshold",
    "calibrated",
    "fit",
    "group_apgr",
    "is_held_out",
    "load_records",
    "main",
    "split",
]

def load_records(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """JSON lines from each file; each record needs `id`, `prompt`, `local` and `hosted`."""
    records = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                r = json.loads(line)
                missing = {"id", "prompt", "local", "hosted"} - r.keys()
                if missing:
                    raise ValueError(f"{path}:{n}: record lacks {sorted(missing)}")
                records.append(r)
    return records


def _unit_hash(text: str, salt: str = "") -> float:
    digest = hashlib.sha256((salt + text).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def is_held_out(record_id: str, holdout: float = 0.3) -> bool:
    """True when the record belongs to the held-out part (same answer on every machine)."""
    return _unit_hash(str(record_id)) < holdout


def split(
    records: Sequence[dict[str, Any]], holdout: float = 0.3
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(training records, held-out records) by id hash."""
    train: list[dict[str, Any]] = []
    test: list[dict[str, Any]] = []
    for r in records:
        (test if is_held_out(r["id"], holdout) else train).append(r)
    return train, test


def calibrate_threshold(scores: Sequence[float], hosted_share: float) -> float:
    """The threshold that sends `hosted_share` of these scores (those >= it) to hosted."""
    if not 0.0 <= hosted_share <= 1.0:
        raise ValueError(f"hosted share must be in [0, 1], got {hosted_share}")
    ranked = sorted(scores, reverse=True)
    k = round(hosted_share * len(ranked))
    if k <= 0:
        return math.nextafter(ranked[0], math.inf) if ranked else 1.0
    if k >= len(ranked):
        return ranked[-1]
    return (ranked[k - 1] + ranked[k]) / 2


def group_apgr(scorer: ComplexityScorer, records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """APGR of the scorer on each dataset among the records."""
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_group[dataset_of(r)].append(r)
    out = {}
    for g, rs in sorted(by_group.items()):
        scores = [scorer.score_text(r["prompt"]) for r in rs]
        value = apgr(quality_curve(scores, [r["local"] for r in rs], [r["hosted"] for r in rs]))
        if value is not None:
            out[g] = value
    return out


GRID: tuple[dict[str, float], ...] = tuple(
    {"vocabulary_boost": boost, "exam_boost": exam} for boost in (1.0, 2.0) for exam in (6.0, 10.0, 16.0)
)


def fit(
    records: Sequence[dict[str, Any]],
    options: LearnOptions = GENERAL,
    grid: Sequence[dict[str, float]] = (),
    folds: int = 3,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[Weights, dict[str, Any]]:
    """Choose options from `grid` by `folds`-fold cross-validation on `records`, then refit on
    all of them. The criterion is the mean over datasets of the validation-fold APGR; an
    empty grid fits `options` as given."""
    d = design(records)
    fold = [fold_of(i, folds, "cv") for i in d.ids]
    results: list[dict[str, Any]] = []
    best: tuple[float, dict[str, float]] | None = None
    for changes in grid:
        per_group = _cv_apgr(d, records, fold, folds, replace(options, **changes))  # type: ignore[arg-type]
        mean = sum(per_group.values()) / max(1, len(per_group))
        results.append({"options": changes, "cv_apgr": dict(per_group), "mean": round(mean, 4)})
        log(f"cv {changes}: " + ", ".join(f"{g} {a:.3f}" for g, a in per_group.items()))
        if best is None or round(mean, 4) > best[0]:
            best = (round(mean, 4), changes)
    chosen = best[1] if best else {}
    weights = learn(d, replace(options, **chosen))  # type: ignore[arg-type]
    return weights, {"chosen": chosen, "cross_validation": results}


def _cv_apgr(
    d: Design, records: Sequence[dict[str, Any]], fold: Sequence[int], folds: int, opts: LearnOptions
) -> dict[str, float]:
    """Per dataset, the validation-fold APGR of `opts` averaged over the `folds` folds."""
    per_group: dict[str, float] = defaultdict(float)
    for f in range(folds):
        scorer = ComplexityScorer(learn(subset(d, [i for i, g in enumerate(fold) if g != f]), opts))
        valid = [r for r, g in zip(records, fold) if g == f]
        for g, value in group_apgr(scorer, valid).items():
            per_group[g] += value / folds
    return per_group


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m policies.complexity.training.fit", description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="+", type=Path, help="labelled JSONL files")
    parser.add_argument("--out", type=Path, required=True, help="weights file to write")
    parser.add_argument("--holdout", type=float, default=0.3, help="share of records held out by id hash")
    parser.add_argument("--cv", action="store_true", help="choose vocabulary boosts by cross-validation (GRID)")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    from policies.complexity.training.leave_one_out import training_records

    records = training_records(load_records(args.data))
    train, test = split(records, args.holdout)
    log(f"{len(records)} records: fitting on {len(train)}, holding out {len(test)}")
    weights, info = fit(train, grid=GRID if args.cv else (), log=log)
    weights = rescaled(weights, train, ANCHORS)
    (below, score) = ANCHORS[1]
    weights = replace(weights, threshold=score, hosted_share=round(1.0 - below, 6))
    weights = replace(weights, metadata={
        **weights.metadata,
        "fitted_on": sorted(p.name for p in args.data),
        "records": len(train),
        "holdout": args.holdout,
        "split": "held out when the first 8 bytes of sha256(id) / 2**64 < holdout",
        "label": "(hosted - local + 1) / 2",
        "options": "learn.GENERAL",
        "credit": "RouteLLM (Ong et al., 2024), LLMRouter (ulab-uiuc), TheoremQA (Chen et al., 2023), "
        "ZeroEval (WildEval), FastChat/Vicuna (LMSYS); see ../shared/data/routing/README.md",
        **info,
    })  # fmt: skip
    weights.save(args.out)
    log(f"wrote {args.out} ({len(weights.vocabulary)} words, threshold {weights.threshold:.4f})")
    return 0


def rescaled(weights: Weights, records: Sequence[dict[str, Any]], anchors: Sequence[tuple[float, float]]) -> Weights:
    """The weights with the logit stretched and shifted (a * logit + b, order unchanged) so that
    the share of these prompts scoring below each anchor's score is the anchor's share, every
    dataset weighing the same (else 14k exam questions would set the bands for chat).

    Fitted on soft labels the logits span a narrow range, and where that range sits moves from
    fit to fit; fixed score bands in a config (`below: 0.45`) stay meaningful only when the
    score scale is pinned, so two anchors (share, score) pin it.
    """
    (s1, p1), (s2, p2) = anchors
    scorer = ComplexityScorer(weights)
    logits = [_logit(scorer.score_text(r["prompt"])) for r in records]
    q1, q2 = (_balanced_quantile(logits, [dataset_of(r) for r in records], s) for s in (s1, s2))
    if q2 <= q1:
        return weights
    a = (_logit(p2) - _logit(p1)) / (q2 - q1)
    b = _logit(p1) - a * q1
    return replace(
        weights,
        bias=round(a * weights.bias + b, 6),
        weights={k: round(a * v, 6) for k, v in weights.weights.items()},
        vocabulary_cap=a * weights.vocabulary_cap,
        metadata={**weights.metadata, "rescaled": {"anchors": [list(x) for x in anchors], "a": round(a, 6)}},
    )


def _balanced_quantile(values: Sequence[float], groups: Sequence[str], share: float) -> float:
    """The value below which `share` of the weight lies, each group weighing the same in total."""
    counts: dict[str, int] = defaultdict(int)
    for g in groups:
        counts[g] += 1
    ranked = sorted(zip(values, groups))
    total, target = 0.0, share * len(counts)
    for v, g in ranked:
        total += 1.0 / counts[g]
        if total >= target:
            return v
    return ranked[-1][0]


def _logit(p: float) -> float:
    p = min(1.0 - 1e-12, max(1e-12, p))
    return math.log(p / (1.0 - p))


# Where the shipped score scale is pinned, every training set weighing the same: 35 % of
# prompts below 0.45 (config.yaml's local band) and 30 % from 0.6 up (the hosted threshold).
ANCHORS: tuple[tuple[float, float], ...] = ((0.35, 0.45), (0.7, 0.6))


def calibrated(weights: Weights, records: Sequence[dict[str, Any]], hosted_share: float) -> Weights:
    """The weights with the threshold that sends `hosted_share` of these prompts up."""
    scorer = ComplexityScorer(weights)
    threshold = calibrate_threshold([scorer.score_text(r["prompt"]) for r in records], hosted_share)
    return replace(weights, threshold=threshold, hosted_share=hosted_share)


if __name__ == "__main__":
    raise SystemExit(main())
