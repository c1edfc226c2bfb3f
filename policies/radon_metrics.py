"""The one place radon runs: metrics of a piece of Python source, for the complexity scorer
(fenced code in a prompt) and for judging (code in a candidate answer). Cached: the same code
is often measured twice (a prompt scored for routing, then explained)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Analysis", "analyse"]


@dataclass(frozen=True, slots=True)
class Analysis:
    cyclomatic: int  # radon's total: module level plus every function and method
    blocks_cyclomatic: float  # the sum over functions and classes (cc_visit), at least 1
    halstead_volume: float
    halstead_difficulty: float
    halstead_effort: float
    maintainability: float  # radon's MI, 0..100
    sloc: int


@lru_cache(maxsize=512)
def analyse(code: str) -> Analysis | None:
    """radon's metrics of `code`, or None when radon cannot read it (not Python, say)."""
    try:
        from radon.complexity import ComplexityVisitor, cc_visit
        from radon.metrics import h_visit, mi_visit
        from radon.raw import analyze

        halstead = h_visit(code).total
        return Analysis(
            cyclomatic=int(ComplexityVisitor.from_code(code).total_complexity),
            blocks_cyclomatic=float(sum(b.complexity for b in cc_visit(code))) or 1.0,
            halstead_volume=float(halstead.volume),
            halstead_difficulty=float(halstead.difficulty),
            halstead_effort=float(halstead.effort),
            maintainability=float(mi_visit(code, multi=True)),
            sloc=analyze(code).sloc,
        )
    except Exception:
        return None
