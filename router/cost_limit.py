"""A call's spending limit (`max_cost_usd`): checked against predicted cost before the call,
and against the running cost before each further model call of the request.

    decision      candidates predicted to cost more than the limit are left out of the plan;
                  none left -> CostLimitExceeded, nothing is called
    each call     the call path (router/calls.py) asks `admit` before every upstream call of the
                  request (a consortium's members and arbiter, nested ones included, fallbacks):
                  what was spent so far plus this call's smallest cost (its input; its output too
                  when max_tokens bounds it) must stay within the limit; each answer's cost is
                  added as it arrives

The running total lives in a ContextVar set for the request (`SPENDING`): consortium runs and the
executor's lanes are tasks started inside it, so they share the one total. A request without a
limit sets nothing, and the call path reads the variable itself before calling in here, so
such a request never enters this module.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from backends.errors import CostLimitExceeded
from backends.types import Message, Request, Usage
from router.state.rate_limits import estimate_tokens

if TYPE_CHECKING:
    from backends.base import Backend
    from router.decision import Decision
    from router.wiring import Parts

__all__ = ["SPENDING", "Spending", "admit", "current_spending", "spent", "spending_limit", "within_cost"]


@dataclass
class Spending:
    """The limit of one request and what its calls have cost so far (dollars)."""

    limit_usd: float
    spent_usd: float = 0.0
    calls: int = 0


SPENDING: contextvars.ContextVar[Spending | None] = contextvars.ContextVar("route_spending", default=None)


def current_spending() -> Spending | None:
    return SPENDING.get()


@contextlib.contextmanager
def spending_limit(limit_usd: float | None) -> Iterator[Spending | None]:
    """The request's spending for the calls made inside; None (no limit) is set too, so a limit
    never leaks from one request into the next made in the same task (the Router skips this
    when there is no limit and none is set)."""
    spending = Spending(limit_usd) if limit_usd is not None else None
    token = SPENDING.set(spending)
    try:
        yield spending
    finally:
        # A stream closed from another context (a finalizer) cannot reset: its own context ends anyway.
        with contextlib.suppress(ValueError):
            SPENDING.reset(token)


def admit(spending: Spending, backend: Backend, request: Request) -> None:
    """Before an upstream call of a request with a limit (`SPENDING.get()`): CostLimitExceeded
    when its running cost leaves no room for it."""
    smallest = backend.cost(Usage(estimate_tokens(request.messages, None), request.max_tokens or 0))
    if spending.spent_usd + smallest > spending.limit_usd:
        raise CostLimitExceeded(
            f"max_cost_usd ${spending.limit_usd:.6f} would be passed: {spending.calls} model call(s) of this request "
            f"cost ${spending.spent_usd:.6f} so far and the next, to {backend.name}, costs at least ${smallest:.6f}; "
            "it was not started. Raise max_cost_usd, lower max_tokens, or ask a smaller consortium.",
            limit_usd=spending.limit_usd, spent_usd=spending.spent_usd)


def spent(spending: Spending, cost_usd: float) -> None:
    """After an upstream call of a request with a limit answered: add its cost to its running total."""
    spending.spent_usd += cost_usd
    spending.calls += 1


def within_cost(parts: Parts, decision: Decision, messages: list[Message], max_tokens: int | None,
                limit_usd: float) -> Decision:
    """`decision` without the candidates predicted to cost more than `limit_usd` (the reason says
    which were left out); CostLimitExceeded when that leaves none."""
    predicted = {c.name: _predicted(parts, c.name, messages, max_tokens) for c in decision.plan.candidates}
    kept = tuple(c for c in decision.plan.candidates if predicted[c.name] <= limit_usd)
    if not kept:
        cheapest = min(predicted, key=predicted.__getitem__)
        raise CostLimitExceeded(
            f"max_cost_usd ${limit_usd:.6f} is below every candidate's predicted cost (cheapest: {cheapest}, "
            f"${predicted[cheapest]:.6f}); nothing was called. Raise max_cost_usd, lower max_tokens, or ask a "
            "cheaper model.", limit_usd=limit_usd)
    if len(kept) == len(decision.plan.candidates):
        return decision
    dropped = ", ".join(f"{n} (${p:.6f})" for n, p in predicted.items() if p > limit_usd)
    plan = dataclasses.replace(decision.plan, candidates=kept)
    return dataclasses.replace(decision, plan=plan,
                               reason=f"{decision.reason}; over max_cost_usd ${limit_usd:.6f}, left out: {dropped}")


def _predicted(parts: Parts, name: str, messages: list[Message], max_tokens: int | None) -> float:
    """Dollars one call to `name` is predicted to cost: input at ~4 characters a token, output as
    long as `max_tokens` or the answers it has given; a consortium, each call of one run."""
    input_tokens = estimate_tokens(messages, None)
    return _tree_cost(parts, name, input_tokens, max_tokens, depth=0)


def _tree_cost(parts: Parts, name: str, input_tokens: int, max_tokens: int | None, depth: int) -> float:
    spec = parts.config.consortia.get(name)
    if spec is None or depth > 64:
        output = max_tokens if max_tokens is not None else parts.latency.model(name).predict(None).output_tokens
        return parts.backends.get(name).cost(Usage(input_tokens, output))
    members = sum(m.n * _tree_cost(parts, m.model, input_tokens, max_tokens, depth + 1) for m in spec.members)
    # The arbiter reads the question and every answer (max_tokens each, or its own guess of one).
    answer = max_tokens if max_tokens is not None else 256
    arbiter_input = input_tokens + spec.size * answer
    arbiter = _tree_cost(parts, spec.arbiter, arbiter_input, spec.arbiter_max_tokens, depth + 1)
    return spec.min_iterations * (members + arbiter)
