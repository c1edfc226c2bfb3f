"""Routing-quality metrics: how well a score orders prompts for sending to the hosted model.

Sort prompts by score, highest first, and send the top share to the hosted model: quality at
that share is the mean of `hosted` for those and `local` for the rest. Tied scores are
routed in random order, so between tie groups the expected curve is a straight line.

- APGR: (area under the quality curve - local quality) / (hosted quality - local quality);
  random routing scores 0.5, a perfect ordering can exceed 1 (it never sends a prompt up
  that the local model answers better).
- CPT(x): the smallest hosted share whose quality recovers x of the gap.
- PGR(s): the share of the gap recovered at hosted share s.

Baselines come from the same records: random (its expectation: a straight line), prompt
length, always-local, always-hosted and the oracle (sorted by hosted - local). Pure functions,
no I/O; metrics from RouteLLM (Ong et al., 2024).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "RoutingReport",
    "apgr",
    "baseline_reports",
    "cpt",
    "evaluate",
    "pgr",
    "quality_at",
    "quality_curve",
]

Curve = list[tuple[float, float]]  # (hosted share, mean quality), share ascending from 0 to 1


@dataclass(frozen=True, slots=True)
class RoutingReport:
    """One policy's figures. Curve metrics are None for a fixed policy or when there is no gap."""

    policy: str
    apgr: float | None
    cpt50: float | None
    cpt80: float | None
    pgr50: float | None
    quality50: float | None  # mean quality at 50 % hosted (fixed policies: at their own share)
    hosted_share: float | None = None  # fixed policies only

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def quality_curve(scores: Sequence[float], local: Sequence[float], hosted: Sequence[float]) -> Curve:
    """Expected quality at each tie-group boundary, routing the highest scores up first."""
    n = len(scores)
    if not (n == len(local) == len(hosted)):
        raise ValueError("scores, local and hosted must have the same length")
    if n == 0:
        raise ValueError("no records to evaluate")
    order = sorted(range(n), key=lambda i: -scores[i])
    total = float(sum(local))
    curve = [(0.0, total / n)]
    i = 0
    while i < n:
        j = i
        s = scores[order[i]]
        while j < n and scores[order[j]] == s:
            total += hosted[order[j]] - local[order[j]]
            j += 1
        curve.append((j / n, total / n))
        i = j
    return curve


def quality_at(curve: Curve, share: float) -> float:
    """Quality at `share` in [0, 1], interpolating linearly between curve points."""
    for (s0, q0), (s1, q1) in zip(curve, curve[1:]):
        if s0 <= share <= s1:
            return q0 if s1 == s0 else q0 + (q1 - q0) * (share - s0) / (s1 - s0)
    return curve[-1][1]


def _gap(curve: Curve) -> tuple[float, float] | None:
    q_local, q_hosted = curve[0][1], curve[-1][1]
    gap = q_hosted - q_local
    return None if gap <= 1e-12 else (q_local, gap)


def apgr(curve: Curve) -> float | None:
    """Average performance gap recovered; None when hosted is no better than local."""
    g = _gap(curve)
    if g is None:
        return None
    area = sum((s1 - s0) * (q0 + q1) / 2 for (s0, q0), (s1, q1) in zip(curve, curve[1:]))
    return (area - g[0]) / g[1]


def cpt(curve: Curve, recovered: float) -> float | None:
    """Smallest hosted share that recovers `recovered` (e.g. 0.5) of the gap."""
    g = _gap(curve)
    if g is None:
        return None
    target = g[0] + recovered * g[1]
    if curve[0][1] >= target:
        return 0.0
    for (s0, q0), (s1, q1) in zip(curve, curve[1:]):
        if q1 >= target:
            return s1 if q1 == q0 else s0 + (s1 - s0) * (target - q0) / (q1 - q0)
    return 1.0


def pgr(curve: Curve, share: float) -> float | None:
    """Share of the gap recovered when `share` of the prompts go to the hosted model."""
    g = _gap(curve)
    return None if g is None else (quality_at(curve, share) - g[0]) / g[1]


def evaluate(
    policy: str, scores: Sequence[float], local: Sequence[float], hosted: Sequence[float]
) -> RoutingReport:
    """All curve metrics for one score per prompt."""
    curve = quality_curve(scores, local, hosted)
    return RoutingReport(
        policy=policy,
        apgr=apgr(curve),
        cpt50=cpt(curve, 0.5),
        cpt80=cpt(curve, 0.8),
        pgr50=pgr(curve, 0.5),
        quality50=quality_at(curve, 0.5),
    )


def _fixed(policy: str, quality: float, share: float, pgr_value: float | None) -> RoutingReport:
    return RoutingReport(policy, None, None, None, pgr_value, quality, hosted_share=share)


def baseline_reports(
    prompts: Sequence[str], local: Sequence[float], hosted: Sequence[float]
) -> list[RoutingReport]:
    """random, length, always-local, always-hosted and oracle, measured on these records."""
    n = len(prompts)
    q_local, q_hosted = sum(local) / n, sum(hosted) / n
    has_gap = q_hosted - q_local > 1e-12
    return [
        evaluate("random", [0.0] * n, local, hosted),
        evaluate("length", [float(len(p)) for p in prompts], local, hosted),
        _fixed("always-local", q_local, 0.0, 0.0 if has_gap else None),
        _fixed("always-hosted", q_hosted, 1.0, 1.0 if has_gap else None),
        evaluate("oracle", [h - lo for h, lo in zip(hosted, local)], local, hosted),
    ]
