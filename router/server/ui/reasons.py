"""Why a request went where it did, as short lines for the web view: each tier boundary's score
against its threshold, the chosen backend's predicted latency against the deadline, exploring,
a downgrade, a hedge, candidates passed over (breaker open, rate limit), and each backend tried
that failed (the next candidate then answered: a fallback).
Pure: a LiveRequest in, lines out."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policies.selection import Candidate, Plan
    from router.server.ui.live import LiveRequest

__all__ = ["reasons"]


def reasons(entry: LiveRequest) -> list[str]:
    """The decision and what came of it, in the order they happened."""
    decision = entry.decision
    lines: list[str] = []
    if decision.forced:
        lines.append(f"asked for {decision.chosen} by name: no scoring")
    lines += _boundaries(entry)
    plan = decision.plan
    if plan.candidates:
        lines.append(_latency(plan.candidates[0], decision.deadline_s))
    lines += _plan_notes(plan)
    if entry.downgrade is not None and not entry.downgrade.get("planned"):
        lines.append(f"downgraded {entry.downgrade['from_tier']} → {entry.downgrade['to_tier']}: "
                     f"{entry.downgrade['reason']}")
    lines += [f"tried {backend}: failed ({kind})" for backend, kind, _ in entry.failures]
    if entry.failures and entry.status == "ok":
        lines.append(f"answered by {entry.backend}")
    return lines


def _boundaries(entry: LiveRequest) -> list[str]:
    decision = entry.decision
    if decision.forced or decision.score is None:
        return []
    if not entry.crossings:
        return [f"score {decision.score.value:.3f}: one tier ({decision.tier})"]
    lines = []
    for c in entry.crossings:
        head = "" if c.head == "routing" else f" ({c.head})"
        verdict = f"up to {c.upper}" if c.up else f"stays {c.lower}"
        lines.append(f"{c.lower}|{c.upper}{head}: score {c.score:.3f} {'≥' if c.up else '<'} "
                     f"{c.threshold:.3f} → {verdict}")
    return lines


def _latency(first: Candidate, deadline_s: float | None) -> str:
    p = first.prediction
    if not p.known:
        return f"{first.name}: latency not measured yet (tried to learn it)"
    samples = f"{p.samples} sample{'s' if p.samples != 1 else ''}"
    predicted = f"{first.name}: predicted p95 {p.p95_s:.2f} s (p50 {p.p50_s:.2f} s, {samples})"
    if deadline_s is None:
        return f"{predicted}, no deadline"
    verdict = "meets it" if first.meets_deadline else "misses it"
    return f"{predicted} vs deadline {deadline_s:g} s: {verdict}"


def _plan_notes(plan: Plan) -> list[str]:
    lines = []
    if plan.explored:
        lines.append(f"exploring {plan.explored}" + (f": {plan.explore_reason}" if plan.explore_reason else ""))
    if plan.downgrade:
        lines.append(f"downgrade (on_deadline_risk: downgrade): {plan.downgrade}")
    if plan.refused:
        lines.append(f"refused: {plan.refused}")
    candidates = plan.candidates
    for i, c in enumerate(candidates):
        if c.hedge_after_s is not None and i + 1 < len(candidates):
            lines.append(f"hedge: {candidates[i + 1].name} starts if {c.name} is silent {c.hedge_after_s:.2f} s")
        if c.breaker == "open":
            lines.append(f"{c.name}: breaker open, passed over")
        if c.rate_limit:
            lines.append(f"{c.name}: {c.rate_limit}")
    return lines
