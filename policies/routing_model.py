"""The routing model: the scorer, the tiers and their boundaries, as one versioned value.

Which tier a prompt needs is decided by three things that only make sense together: the
routing scorer, the ladder of tiers with each boundary's threshold, and the heads that decide
boundaries of their own (policies/ladder.py). Learning replaces all three at once, so they
travel as one frozen value: a decision reads the model once and uses that one value
throughout, whatever another task installs meanwhile, and records the `version` it used
(0: the weights the config names).

Pure: scorers are handed in already built.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.types import Message
from policies.ladder import Crossing, Ladder
from policies.scoring import Score, Scorer
from policies.tiers import Tier

__all__ = ["Placement", "RoutingModel"]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a prompt lands: the tier's index, the routing score, the boundaries looked at."""

    index: int
    score: Score
    crossings: tuple[Crossing, ...]


@dataclass(frozen=True, slots=True)
class RoutingModel:
    scorer: Scorer
    ladder: Ladder
    version: int = 0  # the learned version it is (0: as configured)

    @property
    def tiers(self) -> tuple[Tier, ...]:
        return self.ladder.tiers

    @property
    def top(self) -> int:
        """The index of the strongest tier."""
        return len(self.ladder.tiers) - 1

    def place(self, messages: list[Message]) -> Placement:
        """The tier `messages` (as the scorer should see them) climb to."""
        score = self.scorer.score(messages)
        index, crossings = self.ladder.climb(messages, score)
        return Placement(index, score, crossings)

    def place_text(self, text: str) -> Placement:
        """The tier one user turn's own words climb to, scored alone."""
        return self.place([{"role": "user", "content": text}])

    def reason(self, placement: Placement) -> str:
        """The words a decision's reason opens with."""
        return self.ladder.reason(placement.crossings, placement.score)
