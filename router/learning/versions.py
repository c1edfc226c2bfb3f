"""Putting a version's weights to work: a new routing model, installed in the one slot every
decision reads (policies/routing_model.py).

Boundary 0 is decided by its tier's head when the config gives one, else by the routing
scorer, so a learned version replaces the model's scorer (what `--explain`, the log and the
`x-route-score` header show). Every boundary above it gets a head of its own: the learned
weights once that boundary has a version, else the scorer it was configured with, so a
boundary never decides on another pair of tiers' labels. A tier with `below: calibrated`
takes the threshold stored with its boundary's weights (adaptation keeps it at the same
hosted share). Installing is one assignment: the next decision of every path -- plain,
streamed, sessions, consortia, the server -- sees the whole new model and its version.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from policies.complexity import ComplexityScorer, Weights
from policies.ladder import Ladder
from policies.routing_model import RoutingModel
from policies.scoring import Scorer

if TYPE_CHECKING:
    from policies.routing_model import ModelSlot
    from router.config import Config
    from router.learning.labels import LabelStore

__all__ = ["Configured", "install", "model_of", "weights_of"]


@dataclass(frozen=True, slots=True)
class Configured:
    """What the config set up, kept to learn from and to roll back to."""

    scorer: Scorer
    ladder: Ladder
    base: tuple[Weights, ...]  # per boundary: the weights every refit starts from
    own_head: tuple[bool, ...]  # per boundary: the config gives it a head
    calibrated: tuple[bool, ...]  # per tier: `below: calibrated`

    @classmethod
    def of(cls, model: RoutingModel, config: Config) -> Configured:
        """What `model` (the one the config built: version 0) decides with."""
        ladder = model.ladder
        base, own = [], []
        for b in range(len(ladder.tiers) - 1):
            head = ladder.heads[b] if ladder.heads else None
            scorer = head[1] if head is not None else model.scorer
            if not isinstance(scorer, ComplexityScorer):  # the config check refuses this first
                raise TypeError(f"boundary {b} is decided by a {type(scorer).__name__}, which has no weights to learn")
            base.append(scorer.weights)
            own.append(head is not None)
        calibrated = tuple(t.below == "calibrated" for t in config.routing.tiers)
        return cls(model.scorer, ladder, tuple(base), tuple(own), calibrated)


def weights_of(store: LabelStore, configured: Configured, heads: Mapping[int, int]) -> dict[int, Weights]:
    """Per boundary, the weights of the version `heads` names for it (0: the configured ones)."""
    out = {}
    for b, base in enumerate(configured.base):
        version = heads.get(b, 0)
        row = store.version(version) if version else None
        out[b] = Weights.from_json(row.weights, f"version {version}") if row is not None else base
    return out


def install(slot: ModelSlot, configured: Configured, weights: Mapping[int, Weights], version: int) -> None:
    """Decide every boundary with `weights` (a boundary's configured weights: its configured scorer)."""
    slot.install(model_of(configured, weights, version))


def model_of(configured: Configured, weights: Mapping[int, Weights], version: int) -> RoutingModel:
    """The routing model of `version`: every boundary decided with `weights`."""
    if version == 0:
        return RoutingModel(configured.scorer, configured.ladder, 0)
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
    return RoutingModel(scorer, ladder, version)


def _head(configured: Configured, boundary: int, learned: Weights, version: int) -> tuple[str, Scorer]:
    """(name, scorer) deciding `boundary`: the learned weights when it has its own, else what
    the config set there (its head, or the routing scorer)."""
    if learned is not configured.base[boundary]:
        return f"learned v{version}", ComplexityScorer(learned)
    own = configured.ladder.heads[boundary] if configured.own_head[boundary] and configured.ladder.heads else None
    return own if own is not None else ("routing", configured.scorer)
