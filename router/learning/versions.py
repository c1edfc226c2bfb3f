"""Putting a version's weights to work in a Router: each boundary's scorer, nothing else.

Boundary 0 is decided by its tier's head when the config gives one, else by the routing
scorer, so a learned version replaces `Router.scorer` (what `--explain`, the log and the
`x-route-score` header show). Every boundary above it gets a head of its own: the learned
weights once that boundary has a version, else the scorer it was configured with, so a
boundary never decides on another pair of tiers' labels. A tier with `below: calibrated`
takes the threshold stored with its boundary's weights (adaptation keeps it at the same
hosted share). Swapping is two attribute assignments, seen by the next decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from policies.complexity import ComplexityScorer, Weights
from policies.ladder import Ladder
from policies.scoring import Scorer

if TYPE_CHECKING:
    from router.core import Router
    from router.learning.labels import LabelStore

__all__ = ["Configured", "install", "weights_of"]


@dataclass(frozen=True, slots=True)
class Configured:
    """What the config set up, kept to learn from and to roll back to."""

    scorer: Scorer
    ladder: Ladder
    base: tuple[Weights, ...]  # per boundary: the weights every refit starts from
    own_head: tuple[bool, ...]  # per boundary: the config gives it a head
    calibrated: tuple[bool, ...]  # per tier: `below: calibrated`

    @classmethod
    def of(cls, router: Router) -> Configured:
        ladder = router.ladder
        base, own = [], []
        for b in range(len(ladder.tiers) - 1):
            head = ladder.heads[b] if ladder.heads else None
            scorer = head[1] if head is not None else router.scorer
            if not isinstance(scorer, ComplexityScorer):  # the config check refuses this first
                raise TypeError(f"boundary {b} is decided by a {type(scorer).__name__}, which has no weights to learn")
            base.append(scorer.weights)
            own.append(head is not None)
        calibrated = tuple(t.below == "calibrated" for t in router.config.routing.tiers)
        return cls(router.scorer, ladder, tuple(base), tuple(own), calibrated)


def weights_of(store: LabelStore, configured: Configured, heads: Mapping[int, int]) -> dict[int, Weights]:
    """Per boundary, the weights of the version `heads` names for it (0: the configured ones)."""
    out = {}
    for b, base in enumerate(configured.base):
        version = heads.get(b, 0)
        row = store.version(version) if version else None
        out[b] = Weights.from_json(row.weights, f"version {version}") if row is not None else base
    return out


def install(router: Router, configured: Configured, weights: Mapping[int, Weights], version: int) -> None:
    """Decide every boundary with `weights` (a boundary's configured weights: its configured scorer)."""
    if version == 0:
        router.scorer, router.ladder, router.tiers = configured.scorer, configured.ladder, configured.ladder.tiers
        return
    tiers = list(configured.ladder.tiers)
    heads: list[tuple[str, Scorer] | None] = []
    scorer = configured.scorer
    for b, base in enumerate(configured.base):
        learned = weights.get(b, base)
        head = _head(configured, b, learned, version)
        if b == 0 and not configured.own_head[0]:
            scorer = head[1]  # boundary 0 without a head of its own is the routing scorer's
            heads.append(None)
        else:
            heads.append(head)
        if configured.calibrated[b] and learned is not base and learned.threshold is not None:
            tiers[b] = dataclasses.replace(tiers[b], below=learned.threshold)
    ladder = Ladder(tuple(tiers), tuple(heads) if any(h is not None for h in heads) else ())
    router.scorer, router.ladder, router.tiers = scorer, ladder, ladder.tiers


def _head(configured: Configured, boundary: int, learned: Weights, version: int) -> tuple[str, Scorer]:
    """(name, scorer) deciding `boundary`: the learned weights when it has its own, else what
    the config set there (its head, or the routing scorer)."""
    if learned is not configured.base[boundary]:
        return f"learned v{version}", ComplexityScorer(learned)
    own = configured.ladder.heads[boundary] if configured.own_head[boundary] and configured.ladder.heads else None
    return own if own is not None else ("routing", configured.scorer)
