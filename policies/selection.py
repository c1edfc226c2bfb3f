"""The routing policy: which backend, in what fallback order, with what hedge, and why.

Backends of the tier the scorer chose, and of stronger tiers, answer *at quality*; a weaker
tier's backend answering is a *downgrade*. The winner is, in this order:

  1. an at-quality backend whose (cautious) p95 meets the deadline -- the chosen tier first,
     then stronger ones, nearest first (`prefer: best`: strongest first) -- picked by `prefer`;
  2. else an at-quality backend not yet shown unable to meet it: its optimistic p95 (the good
     end of what its samples allow; 0 when untried and without a prior) meets the deadline. A
     tier is never abandoned for lack of data, only on evidence;
  3. else the deadline is at risk, and `on_deadline_risk` (the tier's, else routing's) decides:
     `best-effort` tries the at-quality backend with the smallest p95 anyway; `downgrade` takes
     a weaker tier's backend that meets the deadline (nearest first) and says so in
     `Plan.downgrade`; `fail` sets `Plan.refused` (the caller raises DeadlineAtRisk and calls
     nothing).

Fallbacks follow. With `downgrade`: those meeting the deadline (quality order), then those that
might, then the rest by p95. Otherwise every at-quality backend goes before any weaker one, so a
weaker tier answers only after every at-quality backend failed (marked as a downgrade by the
caller), and `fail` leaves weaker tiers out. Backends whose breaker is open go last.

A backend at its rate limit (`limited`: its rpm / tpm bucket would refuse this request now) is
treated like one shown unable to meet the deadline: passed over while another can answer, tried
late (the call path refuses it at once if it is still at its limit, and the next one goes), and
never explored. When rate limits, not slowness, are what stand between the tier and the request,
`fail` does not refuse: the request then ends as a rate-limit error that says when to retry.

Exploration, budgeted: an untried backend of the tier is tried ahead of the winner once (one
request at a time), a half-open one is probed, a stale one is re-measured on `explore_rate` of
requests; the normal winner follows as a quick hedge or the next fallback.

Sessions: the backend that answers a session (`sticky`) is kept ahead of all of this while it
is at quality, its breaker is not open, it is not at its rate limit and it may meet the
deadline: a move would throw away the provider's cache of the session's prompt and change the
voice of the conversation mid-task. Wherever backends are still compared (the session's backend
fails, the session moves up a tier), what a move loses is in the cost: the session's prompt
(`cached_tokens`) is billed at the cache-read price by the backend that holds it, at full price
by any other.

Pure: inputs in, a Plan out; time (`now`) and the exploration roll are handed in.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from backends.types import Price, Usage
from policies.ladder import ON_DEADLINE_RISK_CHOICES, OnDeadlineRisk, Tier, fallback_order
from policies.latency import LatencyModel, Prediction
from policies.rate_limit import Limited

__all__ = ["ON_DEADLINE_RISK_CHOICES", "PREFER_CHOICES", "Candidate", "OnDeadlineRisk", "Plan", "Prefer",
           "RouteInputs", "forced_plan", "plan_route"]

# The one definition of fast | cheap | best: config, the CLI, the server and the policy use these.
Prefer = Literal["fast", "cheap", "best"]
PREFER_CHOICES: tuple[Prefer, ...] = get_args(Prefer)


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
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
    on_deadline_risk: OnDeadlineRisk = "best-effort"  # a tier's own setting wins
    limited: Mapping[str, Limited] = field(default_factory=dict)  # at their rate limit now
    sticky: str | None = None  # the backend answering this request's session: kept while it may be
    cached_tokens: Mapping[str, int] = field(default_factory=dict)  # the session's prompt in each backend's cache


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Candidate:
    """One backend the plan may try, with what the policy predicted about it. Seconds, dollars."""

    name: str
    tier: str | None
    prediction: Prediction
    cost_usd: float
    meets_deadline: bool  # its cautious p95 does
    breaker: str  # closed | half-open | open
    hedge_after_s: float | None = None  # start the next candidate if this one is silent this long
    could_meet: bool = True  # its optimistic p95 does: not shown unable to
    weaker: bool = False  # from a tier below the chosen one: its answer is a downgrade
    rate_limit: str | None = None  # "at its rate limit (rpm 60), free in 2.1 s", when it is

    def as_dict(self) -> dict[str, Any]:
        """For display (--explain, --json): rounded."""
        out = {"backend": self.name, "tier": self.tier, **self.prediction.as_dict(),
               "cost_usd": round(self.cost_usd, 8), "meets_deadline": self.meets_deadline,
               "could_meet_deadline": self.could_meet, "downgrade": self.weaker, "breaker": self.breaker}
        if self.rate_limit is not None:
            out["rate_limit"] = self.rate_limit
        return out


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class Plan:
    """The candidates in the order to try them; the executor consumes this, displays render it."""

    candidates: tuple[Candidate, ...]
    why: str
    prefer: Prefer = "cheap"
    explored: str | None = None  # tried ahead of the winner to measure it
    explore_reason: str | None = None
    on_deadline_risk: OnDeadlineRisk = "best-effort"  # in force for this request's tier
    downgrade: str | None = None  # why the winner comes from a weaker tier, when it does
    refused: str | None = None  # `fail`: why nothing should be called

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.candidates)

    def candidate(self, name: str) -> Candidate | None:
        for c in self.candidates:  # a loop, not next() over a generator: asked several times a request
            if c.name == name:
                return c
        return None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"prefer": self.prefer, "on_deadline_risk": self.on_deadline_risk, "why": self.why,
                               "explore": self.explored, "candidates": [c.as_dict() for c in self.candidates]}
        if self.downgrade is not None:
            out["downgrade"] = self.downgrade
        if self.refused is not None:
            out["refused"] = self.refused
        hedges = {c.name: round(c.hedge_after_s, 4) for c in self.candidates if c.hedge_after_s is not None}
        if hedges:
            out["hedge_after_s"] = hedges
        return out


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class _Row:
    name: str
    tier: int
    prediction: Prediction
    cost_usd: float
    feasible: bool  # the cautious p95 meets the deadline
    could: bool  # the optimistic p95 does
    blocked: bool
    at_quality: bool  # the chosen tier or a stronger one
    limited: Limited | None = None  # at its rate limit: as good as missing the deadline


# Built on every call: not frozen (ARCHITECTURE.md, "Values built per request").
@dataclass(slots=True)
class _Choice:
    """The winner, why, and what the deadline risk made of it."""

    row: _Row
    why: str
    downgrade: str | None = None
    refused: str | None = None


def _rows(tiers: Sequence[Tier], chosen: int, inputs: RouteInputs) -> dict[str, _Row]:
    rows: dict[str, _Row] = {}
    tier_of: dict[str, int] = {}
    for index in [chosen, *range(len(tiers))]:
        for name in tiers[index].backends:
            tier_of.setdefault(name, index)
    deadline = inputs.deadline_s
    for name in fallback_order(tiers, chosen):
        model = inputs.models.get(name) or LatencyModel()
        prediction = model.predict(inputs.max_tokens)
        price = inputs.prices.get(name, Price())
        cached = min(inputs.cached_tokens.get(name, 0), inputs.input_tokens)
        cost = price.cost(Usage(inputs.input_tokens, prediction.output_tokens, cache_read_tokens=cached))
        limited = inputs.limited.get(name)
        feasible = limited is None and (deadline is None or (prediction.known and prediction.p95_s <= deadline))
        could = limited is None and (deadline is None or prediction.optimistic_s <= deadline)
        rows[name] = _Row(name, tier_of[name], prediction, cost, feasible, could, name in inputs.blocked,
                          tier_of[name] >= chosen, limited)
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


def _mode(tiers: Sequence[Tier], chosen: int, inputs: RouteInputs) -> OnDeadlineRisk:
    return tiers[chosen].on_deadline_risk or inputs.on_deadline_risk


def _first_pool(tiers: Sequence[Tier], indexes: Sequence[int], rows: Mapping[str, _Row],
                test: Callable[[_Row], bool], inputs: RouteInputs) -> tuple[_Row, int] | None:
    """The preferred open backend passing `test` in the first tier (of `indexes`) that has one."""
    for index in indexes:
        pool = [rows[n] for n in tiers[index].backends if not rows[n].blocked and test(rows[n])]
        if pool:
            return _pick(pool, inputs.prefer, inputs.cost_tolerance), index
    return None


def _winner_why(row: _Row, goal: str, tier: Tier, escalated: bool, inputs: RouteInputs,
                skipped: Sequence[Tier] = ()) -> str:
    """Why `row` (picked from `tier`) wins: the goal, the deadline it meets, why another tier
    (prefer best starts at the strongest tier: that is no escalation, and may have no deadline)."""
    if escalated and inputs.prefer == "best":
        return _winner_why_default(row, goal, tier, False, inputs) + f" (prefer best: tier {tier.name!r})"
    return _winner_why_default(row, goal, tier, escalated, inputs, skipped)


def _winner_why_default(row: _Row, goal: str, tier: Tier, escalated: bool, inputs: RouteInputs,
                        skipped: Sequence[Tier] = ()) -> str:
    """Why `row` (picked from `tier`) wins: the goal, the deadline it meets, any escalation and
    what made it (the tiers passed over: too slow, or unable to take this request)."""
    where = f" (escalated to tier {tier.name!r}: {_why_skipped(skipped)})" if escalated else ""
    limit = (f" with p95 {row.prediction.p95_s:.2f}s <= deadline {inputs.deadline_s:.2f}s"
             if inputs.deadline_s else "")
    return f"{row.name} is the {goal} candidate{limit}{where}"


def _why_skipped(skipped: Sequence[Tier]) -> str:
    """Why each tier passed over was: nothing in it could take the request, or none of what
    could meets the deadline."""
    if not skipped:
        return "nothing in the chosen tier meets the deadline"
    reasons = []
    for tier in skipped:
        unable = "; ".join(f"{name} {why}" for name, why in tier.left_out)
        if not tier.backends and unable:
            reasons.append(f"nothing in tier {tier.name!r} can take this request ({unable})")
        elif unable:
            reasons.append(f"nothing in tier {tier.name!r} that can take this request meets the deadline ({unable})")
        else:
            reasons.append(f"nothing in tier {tier.name!r} meets the deadline")
    return "; ".join(reasons)


def _unproven_why(row: _Row, inputs: RouteInputs) -> str:
    """Why a backend whose cautious p95 misses the deadline is tried: too little evidence."""
    p = row.prediction
    evidence = ("untried" if not p.known else
                f"{p.samples} sample{'s' if p.samples != 1 else ''}: p95 {p.optimistic_s:.2f}-{p.p95_s:.2f}s")
    return (f"{row.name} may meet the {inputs.deadline_s:.2f}s deadline ({evidence}); nothing at this "
            "quality is known to, and a tier is not given up for lack of data")


def _risk(tier: Tier, open_quality: Sequence[_Row], inputs: RouteInputs) -> str:
    """What stands between the chosen tier and the deadline, in words."""
    if not open_quality:
        return f"every backend of tier {tier.name!r} and above has its breaker open"
    free = [r for r in open_quality if r.limited is None]
    if not free:
        soonest = min(open_quality, key=lambda r: r.limited.free_in_s if r.limited else 0.0)
        assert soonest.limited is not None
        return (f"every backend of tier {tier.name!r} and above is at its rate limit (soonest: {soonest.name}, "
                f"{soonest.limited.describe()})")
    fastest = min(free, key=lambda r: r.prediction.p95_s)
    return (f"no backend of tier {tier.name!r} or above is predicted to meet the {inputs.deadline_s:.2f}s deadline "
            f"(fastest: {fastest.name}, p95 {fastest.prediction.p95_s:.2f}s)")


def _unable_above(tiers: Sequence[Tier], chosen: int) -> str:
    """No backend of the chosen tier or above can take the request: which could not, and why."""
    unable = "; ".join(f"{name} {why}" for tier in tiers[chosen:] for name, why in tier.left_out)
    return f"nothing in tier {tiers[chosen].name!r} or above can take this request ({unable or 'no backends'})"


def _smallest_p95(pool: Sequence[_Row]) -> _Row:
    """Open breakers preferred, then the smallest p95 (an unmeasured backend's is a placeholder:
    those go after the measured)."""
    return min(pool, key=lambda r: (r.blocked, r.limited is not None, not r.prediction.known, r.prediction.p95_s,
                                    r.cost_usd))


def _at_risk(tiers: Sequence[Tier], chosen: int, rows: Mapping[str, _Row], inputs: RouteInputs) -> _Choice:
    """No open at-quality backend could meet the deadline: `on_deadline_risk` decides."""
    mode = _mode(tiers, chosen, inputs)
    quality = [r for r in rows.values() if r.at_quality]
    open_quality = [r for r in quality if not r.blocked]
    if not quality:  # nothing at this quality can take the request: only a weaker tier can answer
        return _downgrade(tiers, chosen, rows, inputs, _unable_above(tiers, chosen))
    risk = _risk(tiers[chosen], open_quality, inputs)
    if mode == "fail" and any(r.limited is None for r in open_quality):  # slow, not merely rate-limited
        return _Choice(_smallest_p95(quality), f"{risk}; on_deadline_risk is fail: nothing is called", refused=risk)
    if mode == "fail" or (mode == "best-effort" and open_quality):
        row = _smallest_p95(quality)
        return _Choice(row, f"{risk}; best effort at this quality: {row.name} has the smallest p95")
    return _downgrade(tiers, chosen, rows, inputs, risk)


def _downgrade(tiers: Sequence[Tier], chosen: int, rows: Mapping[str, _Row], inputs: RouteInputs,
               risk: str) -> _Choice:
    """A weaker tier's backend that meets the deadline (nearest tier first), else one that may,
    else the smallest p95 anywhere."""
    weaker = [i for i in _tier_order(tiers, chosen, inputs.prefer) if i < chosen]
    found = (_first_pool(tiers, weaker, rows, lambda r: r.feasible, inputs)
             or _first_pool(tiers, weaker, rows, lambda r: r.could, inputs))
    row = found[0] if found else _smallest_p95(list(rows.values()))
    if row.at_quality:
        return _Choice(row, f"{risk}; nothing weaker meets it either: {row.name} has the smallest p95")
    how = "has the smallest p95"
    if found:
        how = "meets it" if row.feasible else "may meet it (too little measured to tell)"
    return _Choice(row, f"DOWNGRADE to tier {tiers[row.tier].name!r}: {risk}; {row.name} {how}", downgrade=risk)


def _kept(rows: Mapping[str, _Row], inputs: RouteInputs) -> _Row | None:
    """The session's backend, when it may stay: at quality, breaker not open, not at its rate
    limit, not shown unable to meet the deadline."""
    row = rows.get(inputs.sticky) if inputs.sticky is not None else None
    if row is None or row.blocked or not row.at_quality or not row.could:
        return None
    return row


def _winner(tiers: Sequence[Tier], chosen: int, rows: Mapping[str, _Row], inputs: RouteInputs) -> _Choice:
    """The backend to try first, and why (see the module docstring)."""
    kept = _kept(rows, inputs)
    if kept is not None:
        cached = inputs.cached_tokens.get(kept.name, 0)
        note = f", which holds ~{cached} tokens of its prompt in cache" if cached else ""
        return _Choice(kept, f"{kept.name} kept for the session{note}")
    quality = [i for i in _tier_order(tiers, chosen, inputs.prefer) if i >= chosen]
    found = _first_pool(tiers, quality, rows, lambda r: r.feasible, inputs)
    if found is not None:
        row, index = found
        skipped = [tiers[i] for i in quality[:quality.index(index)]]
        return _Choice(row, _winner_why(row, _goal(inputs), tiers[index], index != chosen, inputs, skipped))
    found = _first_pool(tiers, quality, rows, lambda r: r.could, inputs)
    if found is not None:
        return _Choice(found[0], _unproven_why(found[0], inputs))
    return _at_risk(tiers, chosen, rows, inputs)


def _explorable(row: _Row, winner: _Row, inputs: RouteInputs) -> bool:
    """Whether `row` may be tried ahead of the winner at all."""
    if row.name == winner.name or row.blocked or row.limited is not None or row.name in inputs.exploring:
        return False
    return row.could or inputs.hedge  # without a hedge behind it, exploring would risk the deadline


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


def _by_promise(pool: Sequence[_Row]) -> list[_Row]:
    """Those meeting the deadline (in fallback_order: quality first), then those that might (best
    optimistic p95 first), then the rest (smallest p95 first; those at their rate limit last)."""
    good = [r for r in pool if r.feasible]
    maybe = sorted((r for r in pool if r.could and not r.feasible), key=lambda r: r.prediction.optimistic_s)
    late = sorted((r for r in pool if not r.could), key=lambda r: (r.limited is not None, r.prediction.p95_s))
    return [*good, *maybe, *late]


def _groups(rest: Sequence[_Row], mode: OnDeadlineRisk) -> list[list[_Row]]:
    """Unless downgrading is allowed, at-quality backends form a group of their own, ahead of the
    weaker ones (`fail`: no weaker ones at all)."""
    if mode == "downgrade":
        return [list(rest)]
    quality = [r for r in rest if r.at_quality]
    return [quality] if mode == "fail" else [quality, [r for r in rest if not r.at_quality]]


def _fallbacks(rows: Mapping[str, _Row], first: Sequence[str], mode: OnDeadlineRisk) -> list[str]:
    """The rest after `first`, group by group, most promising first; open breakers last."""
    groups = _groups([r for r in rows.values() if r.name not in first], mode)
    ordered: list[_Row] = []
    blocked: list[_Row] = []
    for group in groups:
        ordered += _by_promise([r for r in group if not r.blocked])
        blocked += [r for r in group if r.blocked]
    return [r.name for r in (*ordered, *blocked)]


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
                     _breaker_state(row, inputs), hedge_after_s, row.could, not row.at_quality,
                     row.limited.describe() if row.limited is not None else None)


def _limited_note(rows: Mapping[str, _Row], winner: _Row) -> str:
    """The at-quality backends passed over for their rate limit, in words ("" when none)."""
    passed = [r for r in rows.values() if r.limited is not None and r.at_quality and r.name != winner.name]
    return "".join(f"; {r.name} is {r.limited.describe()}" for r in passed if r.limited is not None)


def plan_route(tiers: Sequence[Tier], chosen: int, inputs: RouteInputs) -> Plan:
    """The candidates in the order to try them, a one-line reason, and per-candidate predictions."""
    rows = _rows(tiers, chosen, inputs)
    choice = _winner(tiers, chosen, rows, inputs)
    winner, why = choice.row, choice.why
    mode = _mode(tiers, chosen, inputs)
    # A kept session is never explored away from its backend: exploring is for fresh requests.
    exploring = not choice.refused and winner.name != inputs.sticky
    explored, explore_why = _explore(tiers, chosen, rows, winner, inputs) if exploring else (None, "")
    first = [winner.name] if explored is None else [explored.name, winner.name]
    candidates = [*first, *_fallbacks(rows, first, mode)]
    hedge_after = _hedge_after(rows, candidates, explored, winner) if inputs.hedge else {}
    if explored is not None:
        backup = f"hedged by {winner.name}" if inputs.hedge else f"then {winner.name}"
        why = f"exploring {explored.name} ({explore_why}), {backup}; {why}"
    why += _limited_note(rows, winner)
    return Plan(tuple(_candidate(tiers, rows[n], inputs, hedge_after.get(n)) for n in candidates), why,
                inputs.prefer, explored.name if explored else None, explore_why or None, mode,
                choice.downgrade, choice.refused)


def forced_plan(name: str, prediction: Prediction) -> Plan:
    """A plan of one backend the caller named: no tier, no fallback."""
    return Plan((Candidate(name, None, prediction, 0.0, True, "closed"),), f"{name} was asked for by name")
