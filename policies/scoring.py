"""The scorer interface: a prompt in, a complexity score in [0, 1] and its explanation out.

Higher means the prompt more likely needs the strong (hosted) model. Scorers are pure: no I/O
after construction, no clock, no model call, deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from backends.types import Message

__all__ = ["Score", "Scorer", "build_scorer"]


class Score:
    """`value` in [0, 1]. `contributions` maps a feature name to its share of the value, so that
    `base + sum(contributions.values()) == value`; `features` holds the raw feature values.

    A scorer may hand in `explain`, a function returning (contributions, features), instead of
    the two dicts: the explanation is then built only when someone reads it, which keeps the
    routing decision itself in microseconds."""

    __slots__ = ("value", "base", "scorer", "_contributions", "_features", "_explain")

    def __init__(
        self,
        value: float,
        base: float = 0.0,
        contributions: dict[str, float] | None = None,
        features: dict[str, float] | None = None,
        scorer: str = "",
        explain: Callable[[], tuple[dict[str, float], dict[str, float]]] | None = None,
    ):
        self.value = value
        self.base = base
        self.scorer = scorer
        self._contributions = contributions
        self._features = features
        self._explain = explain

    def _load(self) -> None:
        if self._explain is not None:
            self._contributions, self._features = self._explain()
            self._explain = None

    @property
    def contributions(self) -> dict[str, float]:
        if self._contributions is None:
            self._load()
        return self._contributions or {}

    @property
    def features(self) -> dict[str, float]:
        if self._features is None:
            self._load()
        return self._features or {}

    def top(self, n: int = 5) -> list[tuple[str, float]]:
        """The n contributions of largest magnitude, largest first (ties in their order)."""
        contributions = self.contributions
        # Positions sorted by a list's __getitem__, not by a lambda: no Python call per feature,
        # and every logged request asks.
        magnitudes = list(map(abs, contributions.values()))
        order = sorted(range(len(magnitudes)), key=magnitudes.__getitem__, reverse=True)[:n]
        items = list(contributions.items())
        return [items[i] for i in order]

    def __repr__(self) -> str:
        return f"Score(value={self.value!r}, base={self.base!r}, scorer={self.scorer!r})"


class Scorer(Protocol):
    @property
    def name(self) -> str: ...

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
