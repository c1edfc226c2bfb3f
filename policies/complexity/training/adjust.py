"""A per-deployment adjustment of fitted weights to a user's own labels (`route calibrate --from-log`).

Logistic regression of y = (hosted - local + 1) / 2 on the model's own features, every weight
pulled towards the current one (`strength` pseudo-examples per raw feature unit): a few hundred
feedback labels move the weights a little where the traffic disagrees with them, never refit
them from scratch. `check` judges old and new weights on records they were not adjusted on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from policies.complexity.model import MODEL_FEATURES, ComplexityScorer, Weights
from policies.complexity.training.learn import newton
from policies.routing_eval import apgr, quality_curve

__all__ = ["adjust", "held_out_apgr"]


def adjust(weights: Weights, records: Sequence[dict[str, Any]], strength: float = 20.0) -> Weights:
    """`weights` moved towards what `records` show, the pull towards them `strength`."""
    scorer = ComplexityScorer(weights)
    means = [weights.means.get(f, 0.0) for f in MODEL_FEATURES]
    means[-1] = 0.0  # the exam term is centred by construction (see model.py)
    rows, labels = [], []
    for r in records:
        values, _ = scorer.feature_values(r["prompt"])
        rows.append([1.0] + [v - m for v, m in zip(values, means)])
        labels.append((float(r["hosted"]) - float(r["local"]) + 1.0) / 2.0)
    prior = [weights.bias] + [weights.weights.get(f, 0.0) for f in MODEL_FEATURES]
    pull = [1.0] + [strength] * len(MODEL_FEATURES)
    theta = newton(rows, [0.0] * len(rows), labels, [1.0] * len(rows), prior, pull, 12)
    return replace(
        weights,
        bias=round(theta[0], 6),
        weights={f: round(t, 6) for f, t in zip(MODEL_FEATURES, theta[1:])},
        metadata={**weights.metadata, "adjusted_on": len(records), "adjust_strength": strength},
    )


def held_out_apgr(weights: Weights, records: Sequence[dict[str, Any]]) -> float | None:
    """APGR of `weights` on `records`; None when they show no gap to recover."""
    scorer = ComplexityScorer(weights)
    scores = [scorer.score_text(r["prompt"]) for r in records]
    return apgr(quality_curve(scores, [float(r["local"]) for r in records], [float(r["hosted"]) for r in records]))
