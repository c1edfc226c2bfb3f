"""The arbiter's verdict in words, for the human output: who judged, the order it gave, how sure
it was, and anything that made the outcome a fallback. One line per consortium run, the one asked
for first, then each nested consortium that fed its last round (indented)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["verdict_lines"]


def verdict_lines(trace: Mapping[str, Any], depth: int = 0) -> list[str]:
    """Lines for `trace` (a consortium completion's `metadata["trace"]`) and those nested in it."""
    rounds = trace.get("rounds") or []
    if not rounds:
        return []
    last = rounds[-1]
    arbiter = last.get("arbiter") or {}
    lines = ["  " * depth + _line(trace, arbiter, len(rounds))]
    nested = [m.get("trace") for m in last.get("members") or ()] + [arbiter.get("trace")]
    for inner in nested:
        if isinstance(inner, Mapping):
            lines += verdict_lines(inner, depth + 1)
    return lines


def _line(trace: Mapping[str, Any], arbiter: Mapping[str, Any], rounds: int) -> str:
    name, judge = trace.get("consortium", "?"), arbiter.get("arbiter") or trace.get("arbiter", "?")
    order = list(arbiter.get("order") or [])
    if arbiter.get("status") == "failed":  # nobody judged: the order is the fallback's, not a verdict
        errors = arbiter.get("errors") or [{}]
        why = f" ({errors[-1]['error']})" if errors[-1].get("error") else ""
        first = f"; {order[0]} answered (the first answer, simplest code first)" if order else ""
        return f"verdict {name}: unjudged: arbiter {judge} failed{why}{first}"
    ranked = " > ".join(order) or "no ranking"
    if trace.get("judging") == "synthesis":
        outcome = f"{judge} synthesized the answer from {len(order)} answers, ranked {ranked}"
    else:
        outcome = f"{judge} chose {order[0]} ({ranked})" if order else f"{judge} gave {ranked}"
    parts = [f"verdict {name}: {outcome}"]
    confidence = trace.get("confidence")
    if confidence is not None:
        parts.append(f"confidence {confidence:.2f}")
    if rounds > 1:
        parts.append(f"after {rounds} rounds")
    if arbiter.get("fallback"):
        parts.append(f"note: {arbiter['fallback']}")
    return "; ".join(parts)
