"""The tiers: each one's band of scores and backends, the order of fallbacks across them, and
climbing them one boundary at a time, each boundary with its own score and threshold.

With two tiers one score and one threshold say all there is. With three (local, fast hosted,
frontier) the two boundaries ask different questions: "would a fast hosted model do better
than the local one?" and "would a frontier model do better than the fast one?". A prompt can
be well beyond a 7B model and still well within a fast hosted one, so one score cut at two
places (one global band set) answers the second question with the first one's evidence.

Here boundary k (between tier k and tier k+1) has its own head, a scorer that predicts the
gain of tier k+1 over tier k (the routing scorer when none is configured), and its own
threshold on that head's score (the tier's `below`). A prompt climbs from the lowest tier
while each boundary it meets says "up"; the first boundary that says "stay" decides, and a
prompt that crosses every boundary lands in the last tier. Heads above the deciding
boundary are never run, so a prompt that stays local costs one score.

With every boundary on the routing scorer this is exactly `pick_tier` on ascending bands.
Pure: scorers are handed in already built; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from backends.types import Message
from policies.scoring import Score, Scorer

__all__ = ["ON_DEADLINE_RISK_CHOICES", "Crossing", "Ladder", "OnDeadlineRisk", "Tier", "fallback_order", "pick_tier"]

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


# -- the ladder -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Crossing:
    """One boundary's verdict on a prompt: `score` from the head named `head`, against `threshold`."""

    lower: str  # the tier below the boundary
    upper: str  # the tier above it
    head: str  # the scorer that decided this boundary ("routing" for the routing scorer)
    score: float
    threshold: float

    @property
    def up(self) -> bool:
        return self.score >= self.threshold

    def describe(self) -> str:
        sign = ">=" if self.up else "<"
        on = "" if self.head == "routing" else f" ({self.head})"
        return f"{self.lower}|{self.upper}{on}: {self.score:.3f} {sign} {self.threshold:.3f}"

    def as_dict(self) -> dict[str, object]:
        return {"boundary": f"{self.lower}|{self.upper}", "head": self.head, "score": round(self.score, 6),
                "threshold": self.threshold, "up": self.up}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Ladder:
    """The tiers in order and, per boundary (one fewer than tiers), its head: a named scorer,
    or None for the routing scorer."""

    tiers: tuple[Tier, ...]
    heads: tuple[tuple[str, Scorer] | None, ...] = ()

    def __post_init__(self) -> None:
        if self.heads and len(self.heads) != max(0, len(self.tiers) - 1):
            raise ValueError(f"{len(self.tiers)} tiers have {len(self.tiers) - 1} boundaries, got {len(self.heads)} heads")

    @property
    def per_boundary(self) -> bool:
        """True when some boundary has a head of its own."""
        return any(h is not None for h in self.heads)

    def climb(self, messages: list[Message], score: Score) -> tuple[int, tuple[Crossing, ...]]:
        """(index of the tier the prompt lands in, the crossings looked at, the deciding one last).

        `score` is the routing scorer's score of `messages`, already computed."""
        crossings: list[Crossing] = []
        for k, tier in enumerate(self.tiers[:-1]):
            head = self.heads[k] if self.heads else None
            name, value = ("routing", score.value) if head is None else (head[0], head[1].score(messages).value)
            threshold = tier.below if tier.below is not None else 1.0
            crossing = Crossing(tier.name, self.tiers[k + 1].name, name, value, threshold)
            crossings.append(crossing)
            if not crossing.up:
                return k, tuple(crossings)
        return len(self.tiers) - 1, tuple(crossings)

    def reason(self, crossings: Sequence[Crossing], score: Score) -> str:
        """The words `Decision.reason` opens with: the one threshold, or the boundaries looked at."""
        if not crossings:
            return f"score {score.value:.3f} (one tier)"
        if not self.per_boundary:  # one score, ascending bands: the familiar form
            last = crossings[-1]
            if last.up:
                return f"score {score.value:.3f} is above every other band"
            return f"score {score.value:.3f} < {last.threshold:.3f}"
        decided = "decided by" if not crossings[-1].up else "every boundary crossed, last"
        return f"{decided} {crossings[-1].describe()}" + (
            f" (after {'; '.join(c.describe() for c in crossings[:-1])})" if len(crossings) > 1 else ""
        )
