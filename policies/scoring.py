"""The scorer interface: a prompt in, a complexity score in [0, 1] and its explanation out.

Higher means the prompt more likely needs the strong (hosted) model. Scorers are pure: no I/O
after construction, no clock, no model call, deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from backends.types import Message

__all__ = ["Score", "Scorer", "build_scorer"]


@dataclass(frozen=True, slots=True)
class Score:
    """`value` in [0, 1]. `contributions` maps a feature name to its share of the value, so that
    `base + sum(contributions.values()) == value`; `features` holds the raw feature values."""

    value: float
    base: float = 0.0
    contributions: dict[str, float] = field(default_factory=dict)
    features: dict[str, float] = field(default_factory=dict)
    scorer: str = ""

    def top(self, n: int = 5) -> list[tuple[str, float]]:
        """The n contributions of largest magnitude, largest first."""
        return sorted(self.contributions.items(), key=lambda kv: abs(kv[1]), reverse=True)[:n]


class Scorer(Protocol):
    name: str

    def score(self, messages: list[Message]) -> Score: ...


def build_scorer(kind: str, **options: Any) -> Scorer:
    """A scorer from its config `kind` and options. Heavy scorers are imported only when chosen."""
    if kind == "length":
        from policies.length import LengthScorer

        return LengthScorer(**options)
    if kind == "learned":
        from policies.complexity import ComplexityScorer

        return ComplexityScorer.load(options.pop("weights", None), **options)
    raise ValueError(f"unknown scorer kind {kind!r}; known: length, learned")
