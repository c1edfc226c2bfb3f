"""The routing policy: which backend, in what fallback order, with what hedge, and why.

Among the backends of the tier the scorer chose, pick the one that minimises expected cost
(`prefer: cheap`), p50 time (`fast`) or that sits in the strongest reachable tier (`best`),
subject to its p95 time meeting the deadline. When no backend of the tier can meet it, escalate:
stronger tiers first (nearest first), then weaker, faster ones; when nothing can, take the backend
with the smallest p95. Backends whose breaker is open go last. An untried, half-open or stale
backend of the tier is sometimes tried first (exploration) with the normal winner as a quick
hedge behind it, so its estimate is measured rather than guessed.

Pure: inputs in, a Plan out; time (`now`) and the exploration roll are handed in.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from backends.types import Price, Usage
from policies.latency import LatencyModel, Prediction
from policies.tiers import Tier, fallback_order

__all__ = ["PREFER_CHOICES", "Candidate", "Plan", "Prefer", "RouteInputs", "forced_plan", "plan_route"]

# The one definition of fast | cheap | best: config, the CLI, the server and the policy use these.
Prefer = Literal["fast", "cheap", "best"]
PREFER_CHOICES: tuple[Prefer, ...] = get_args(Prefer)


@dataclass(frozen=True, slots=True)
class RouteInputs:
    """Everything the policy looks at besides the tiers. Times in seconds."""

    models: Mapping[str, LatencyModel]
    prices: Mapping[str, Price]
    input_tokens: int = 0
    max_tokens: int | None = None
    deadline_s: float | None = None
    prefer: Prefer = "cheap"
    # `cheap` treats costs within this fraction of the cheapest as equal and takes the fastest of
    # them: cost estimates rest on guessed token counts, so a 5% difference is noise, a 5% faster
    # backend is not.
    cost_tolerance: float = 0.1
    blocked: Collection[str] = ()  # breaker open: tried only when everything else failed
    half_open: Collection[str] = ()  # breaker waiting for a probe
    exploring: Collection[str] = ()  # already being explored by a request in flight
    now: float = 0.0  # unix seconds, compared with each model's newest sample
    stale_after_s: float = 300.0
    explore_rate: float = 0.05
    explore_roll: float = 1.0  # uniform [0, 1) from the caller; 1.0 never explores stale backends
    hedge: bool = False


@dataclass(frozen=True, slots=True)
class Candidate:
    """One backend the plan may try, with what the policy predicted about it. Seconds, dollars."""

    name: str
    tier: str | None
    prediction: Prediction
    cost_usd: float
    meets_deadline: bool
    breaker: str  # closed | half-open | open
    hedge_after_s: float | None = None  # start the next candidate if this one is silent this long

    def as_dict(self) -> dict[str, Any]:
        """For display (--explain, --json): rounded."""
        return {"backend": self.name, "tier": self.tier, **self.prediction.as_dict(),
                "cost_usd": round(self.cost_usd, 8), "meets_deadline": self.meets_deadline, "breaker": self.breaker}


@dataclass(frozen=True, slots=True)
class Plan:
    """The candidates in the order to try them; the executor consumes this, displays render it."""

    candidates: tuple[Candidate, ...]
    why: str
    prefer: Prefer = "cheap"
    explored: str | None = None  # tried ahead of the winner to measure it
    explore_reason: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.candidates)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"prefer": self.prefer, "why": self.why, "explore": self.explored,
                               "candidates": [c.as_dict() for c in self.candidates]}
        hedges = {c.name: round(c.hedge_after_s, 4) for c in self.candidates if c.hedge_after_s is not None}
        if hedges:
            out["hedge_after_s"] = hedges
        return out


@dataclass(frozen=True, slots=True)
class _Row:
    name: str
    tier: int
    prediction: Prediction
    cost_usd: float
    feasible: bool
    blocked: bool


def _rows(tiers: Sequence[Tier], chosen: int, inputs: RouteInputs) -> dict[str, _Row]:
    rows: dict[str, _Row] = {}
    tier_of: dict[str, int] = {}
    for index in [chosen, *range(len(tiers))]:
        for name in tiers[index].backends:
            tier_of.setdefault(name, index)
    for name in fallback_order(tiers, chosen):
        model = inputs.models.get(name) or LatencyModel()
        prediction = model.predict(inputs.max_tokens)
        price = inputs.prices.get(name, Price())
        cost = price.cost(Usage(inputs.input_tokens, prediction.output_tokens))
        feasible = inputs.deadline_s is None or prediction.p95_s <= inputs.deadline_s
        rows[name] = _Row(name, tier_of[name], prediction, cost, feasible, name in inputs.blocked)
    return rows


def _pick(pool: Sequence[_Row], prefer: Prefer, tolerance: float) -> _Row:
    if prefer == "fast":
        return min(pool, key=lambda r: (r.prediction.p50_s, r.cost_usd))
    # cheap and best (`best` chooses the tier, not the row): the fastest of the near-cheapest
    cheapest = min(r.cost_usd for r in pool)
    near = [r for r in pool if r.cost_usd <= cheapest * (1 + tolerance)]
    return min(near, key=lambda r: (r.prediction.p50_s, r.cost_usd))


def _tier_order(tiers: Sequence[Tier], chosen: int, prefer: Prefer) -> list[int]:
    stronger = list(range(chosen + 1, len(tiers)))
    weaker = list(range(chosen - 1, -1, -1))
    if prefer == "best":
        return [*reversed(stronger), chosen, *weaker]
    return [chosen, *stronger, *weaker]


def _goal(inputs: RouteInputs) -> str:
    """What the preference asks of the winner, in words."""
    return {"cheap": f"fastest of the cheapest (within {inputs.cost_tolerance:.0%})", "fast": "fastest (p50)",
            "best": "strongest tier, then cheapest"}[inputs.prefer]


def _open_and_feasible(tier: Tier, rows: Mapping[str, _Row]) -> list[_Row]:
    """The tier's backends whose breaker is not open and whose p95 meets the deadline."""
    return [rows[n] for n in tier.backends if not rows[n].blocked and rows[n].feasible]


def _winner_why(row: _Row, goal: str, tier: Tier, escalated: bool, inputs: RouteInputs) -> str:
    """Why `row` (picked from `tier`) wins: the goal, the deadline it meets, any escalation."""
    where = (f" (escalated to tier {tier.name!r}: nothing in the chosen tier meets the deadline)"
             if escalated else "")
    limit = (f" with p95 {row.prediction.p95_s:.2f}s <= deadline {inputs.deadline_s:.2f}s"
             if inputs.deadline_s else "")
    return f"{row.name} is the {goal} candidate{limit}{where}"


def _smallest_p95(rows: Mapping[str, _Row], inputs: RouteInputs) -> tuple[_Row, str]:
    """The last resort when no tier has an open, feasible backend: the smallest p95 (open breakers
    preferred)."""
    pool = [r for r in rows.values() if not r.blocked] or list(rows.values())
    row = min(pool, key=lambda r: (r.prediction.p95_s, r.cost_usd))
    if inputs.deadline_s is not None:
        return row, f"no backend's p95 meets the {inputs.deadline_s:.2f}s deadline; {row.name} has the smallest p95"
    return row, f"every backend's breaker is open; {row.name} has the smallest p95"


def _winner(tiers: Sequence[Tier], chosen: int, rows: Mapping[str, _Row], inputs: RouteInputs) -> tuple[_Row, str]:
    """The backend to try first, and why: the preferred one of the nearest tier (in preference
    order) with an open breaker and a p95 within the deadline, else the smallest p95."""
    goal = _goal(inputs)
    for index in _tier_order(tiers, chosen, inputs.prefer):
        pool = _open_and_feasible(tiers[index], rows)
        if pool:
            row = _pick(pool, inputs.prefer, inputs.cost_tolerance)
            return row, _winner_why(row, goal, tiers[index], index != chosen, inputs)
    return _smallest_p95(rows, inputs)


def _explorable(row: _Row, winner: _Row, inputs: RouteInputs) -> bool:
    """Whether `row` may be tried ahead of the winner at all."""
    if row.name == winner.name or row.blocked or row.name in inputs.exploring:
        return False
    return row.feasible or inputs.hedge  # without a hedge behind it, exploring would risk the deadline


def _explore_reason(row: _Row, inputs: RouteInputs) -> str | None:
    """Why an explorable backend should be measured now, or None when its estimate will do."""
    model = inputs.models.get(row.name)
    if model is None or model.samples == 0:
        return "untried"
    if row.name in inputs.half_open:
        return "breaker half-open: probing whether it recovered"
    if inputs.now - model.last_ts > inputs.stale_after_s and inputs.explore_roll < inputs.explore_rate:
        return f"no sample for over {inputs.stale_after_s:.0f}s"
    return None


def _explore(tiers: Sequence[Tier], chosen: int, rows: Mapping[str, _Row], winner: _Row,
             inputs: RouteInputs) -> tuple[_Row | None, str]:
    for name in tiers[chosen].backends:
        row = rows[name]
        if not _explorable(row, winner, inputs):
            continue
        reason = _explore_reason(row, inputs)
        if reason is not None:
            return row, reason
    return None, ""


def _fallbacks(rows: Mapping[str, _Row], first: Sequence[str]) -> list[str]:
    """The rest after `first`: those meeting the deadline (in fallback_order: quality first),
    then those that would not (smallest p95 first), then those behind an open breaker."""
    good: list[_Row] = []
    late: list[_Row] = []
    blocked: list[_Row] = []
    for row in rows.values():
        if row.name not in first:
            (blocked if row.blocked else good if row.feasible else late).append(row)
    late.sort(key=lambda r: r.prediction.p95_s)  # stable: ties keep fallback_order
    return [r.name for r in (*good, *late, *blocked)]


def _hedge_after(rows: Mapping[str, _Row], candidates: Sequence[str], explored: _Row | None,
                 winner: _Row) -> dict[str, float]:
    """Seconds after which each candidate gets the next one started behind it."""
    # Start the next candidate when this one is later than its own p95 to first content;
    # an explored backend is backed up as soon as the winner would usually have answered.
    hedge_after = {n: rows[n].prediction.first_p95_s for n in candidates}
    if explored is not None:
        hedge_after[explored.name] = min(explored.prediction.first_p95_s, winner.prediction.first_p50_s)
    return hedge_after


def _breaker_state(row: _Row, inputs: RouteInputs) -> str:
    return "open" if row.blocked else ("half-open" if row.name in inputs.half_open else "closed")


def _candidate(tiers: Sequence[Tier], row: _Row, inputs: RouteInputs, hedge_after_s: float | None) -> Candidate:
    return Candidate(row.name, tiers[row.tier].name, row.prediction, row.cost_usd, row.feasible,
                     _breaker_state(row, inputs), hedge_after_s)


def plan_route(tiers: Sequence[Tier], chosen: int, inputs: RouteInputs) -> Plan:
    """The candidates in the order to try them, a one-line reason, and per-candidate predictions."""
    rows = _rows(tiers, chosen, inputs)
    winner, why = _winner(tiers, chosen, rows, inputs)
    explored, explore_why = _explore(tiers, chosen, rows, winner, inputs)
    first = [winner.name] if explored is None else [explored.name, winner.name]
    candidates = [*first, *_fallbacks(rows, first)]
    hedge_after = _hedge_after(rows, candidates, explored, winner) if inputs.hedge else {}
    if explored is not None:
        backup = f"hedged by {winner.name}" if inputs.hedge else f"then {winner.name}"
        why = f"exploring {explored.name} ({explore_why}), {backup}; {why}"
    return Plan(tuple(_candidate(tiers, rows[n], inputs, hedge_after.get(n)) for n in candidates), why,
                inputs.prefer, explored.name if explored else None, explore_why or None)


def forced_plan(name: str, prediction: Prediction) -> Plan:
    """A plan of one backend the caller named: no tier, no fallback."""
    return Plan((Candidate(name, None, prediction, 0.0, True, "closed"),), f"{name} was asked for by name")
