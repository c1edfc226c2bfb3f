"""What `routing.learn` needs from the rest of the config: a judge, and boundaries to learn.

A boundary is the line between two adjacent tiers (0: between the first two). Each is decided
by its own scorer, the tier's `scorer:` head or else `routing.scorer`, and learns from the
labels of its own pair of tiers; only the `learned` scorer has weights to adapt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from router.config import Config, ScorerConfig

__all__ = ["boundary_name", "boundary_scorer", "default_judge", "learning_problem"]


def default_judge(config: Config) -> str | None:
    """The fast diffusion arbiter: the first diffusion backend above the lowest tier, else the
    first diffusion backend anywhere; None when there is none."""
    tiers = config.routing.tiers
    upper = [name for tier in tiers[1:] for name in tier.backends]
    diffusion = [name for name, spec in config.backends.items() if spec.decoding == "diffusion"]
    for name in upper:
        if name in diffusion:
            return name
    return diffusion[0] if diffusion else None


def boundary_name(config: Config, boundary: int) -> str:
    tiers = config.routing.tiers
    return f"{tiers[boundary].name}|{tiers[boundary + 1].name}"


def boundary_scorer(config: Config, boundary: int) -> tuple[ScorerConfig, tuple]:
    """The scorer deciding `boundary` and where it is written (a config path)."""
    head = config.routing.tiers[boundary].scorer
    if head is not None:
        return head, ("routing", "tiers", boundary, "scorer")
    return config.routing.scorer, ("routing", "scorer")


def learning_problem(config: Config) -> tuple[tuple, str] | None:
    """(where, what is wrong) when `routing.learn` cannot work with these tiers, else None."""
    tiers = config.routing.tiers
    if len(tiers) < 2:
        return ("routing", "learn"), ("routing.learn needs at least two tiers: it learns when a prompt needs the "
                                      "stronger one. Add a tier or remove `learn:`.")
    for boundary in range(len(tiers) - 1):
        scorer, where = boundary_scorer(config, boundary)
        if scorer.kind != "learned":
            return where, (f"{'.'.join(map(str, where))} is `kind: {scorer.kind}`, which has no weights to learn; "
                           f"routing.learn adapts the `learned` scorer. Use `kind: learned` there or remove `learn:`.")
    return None
