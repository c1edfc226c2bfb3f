"""Map a complexity score to a tier of backends, and order the fallbacks. Pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["ON_DEADLINE_RISK_CHOICES", "OnDeadlineRisk", "Tier", "fallback_order", "pick_tier"]

# What to do when no backend at a prompt's quality can meet its deadline (policies/selection.py).
OnDeadlineRisk = Literal["best-effort", "downgrade", "fail"]
ON_DEADLINE_RISK_CHOICES: tuple[OnDeadlineRisk, ...] = get_args(OnDeadlineRisk)


@dataclass(frozen=True, slots=True)
class Tier:
    name: str
    below: float | None  # upper edge of the score band; None for the last tier
    backends: tuple[str, ...]
    deadline_ms: float | None = None
    on_deadline_risk: OnDeadlineRisk | None = None  # None: the routing-wide setting
    # Backends of this tier left out for the request at hand, and why ("cannot take `tools`"):
    # not candidates, but the reason a tier was skipped must name them.
    left_out: tuple[tuple[str, str], ...] = ()


def pick_tier(score: float, tiers: Sequence[Tier]) -> int:
    """Index of the first tier whose band contains `score`; the last tier takes the rest."""
    for index, tier in enumerate(tiers):
        if tier.below is not None and score < tier.below:
            return index
    return len(tiers) - 1


def fallback_order(tiers: Sequence[Tier], chosen: int) -> list[str]:
    """The chosen tier's backends, then stronger tiers (nearest first), then weaker ones.

    Stronger before weaker: a prompt scored for tier k is more likely to be answered well by
    tier k+1 than by tier k-1. Each backend appears once.
    """
    order = [*range(chosen, len(tiers)), *range(chosen - 1, -1, -1)]
    seen: dict[str, None] = {}
    for index in order:
        for name in tiers[index].backends:
            seen.setdefault(name, None)
    return list(seen)
