"""The call budget of a nested consortium run, and the run context nested consortia inherit.

A consortium that is a member (or the arbiter) of another runs inside the outer one's task, so
a ContextVar carries the run down: every upstream attempt anywhere in the tree (retries
included) is charged by the router's call path to the innermost budget and to each budget above
it, and fails once any of them is spent.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backends.errors import BackendError

__all__ = ["CURRENT_RUN", "BudgetExhausted", "CallBudget", "Reservation", "RunContext", "current_run", "emit"]

# Consortia inside consortia, below the outermost one. The config loader refuses deeper graphs
# (and cycles), so this stops only code-built ones.
MAX_DEPTH = 64


class BudgetExhausted(BackendError):
    """No model call is left in the run's budget. Never retried."""

    retryable = False


class Reservation:
    """A round's arbiter call, put aside in the consortium's own budget (if it has a limit) so
    its members cannot spend it. Budgets above are not held: nested consortia running side by
    side would otherwise each hold a call and starve the members. Spend or release it once."""

    def __init__(self, budget: CallBudget, held: bool):
        self._budget = budget
        self._held = held
        self.open = True

    def spend(self, what: str) -> None:
        """Charge the call: from the put-aside one, still checked against the budgets above."""
        if not self.open:
            self._budget.take(what)
            return
        self.open = False
        if not self._held:
            self._budget.take(what)
            return
        self._budget.reserved -= 1
        try:
            self._budget.take(what)
        except BudgetExhausted:
            self._budget.reserved += 1
            self.open = True
            raise

    def release(self) -> None:
        if self.open:
            self.open = False
            if self._held:
                self._budget.reserved -= 1


class CallBudget:
    """Counts model calls against `limit` (None = unlimited) and every parent budget."""

    def __init__(self, limit: int | None, owner: str, parent: CallBudget | None = None):
        self.limit = limit
        self.owner = owner
        self.parent = parent
        self.used = 0
        self.reserved = 0

    def _chain(self):
        budget: CallBudget | None = self
        while budget is not None:
            yield budget
            budget = budget.parent

    def available(self) -> int | None:
        """Calls that may still start (None = unlimited), across this budget and its parents."""
        left = [b.limit - b.used - b.reserved for b in self._chain() if b.limit is not None]
        return min(left) if left else None

    def take(self, what: str) -> None:
        """Charge one call, or raise BudgetExhausted naming the budget that ran out."""
        for budget in self._chain():
            if budget.limit is not None and budget.limit - budget.used - budget.reserved <= 0:
                raise BudgetExhausted(
                    f"call budget of consortium {budget.owner!r} is spent ({budget.limit} model calls); "
                    f"{what} was not started. Raise `budget:` or lower members' samples or iterations.",
                    backend=budget.owner,
                )
        for budget in self._chain():
            budget.used += 1

    def reserve(self) -> Reservation | None:
        """Put one call aside in this budget (see Reservation), or None if it has none free."""
        if self.limit is None:
            return Reservation(self, held=False)
        if self.limit - self.used - self.reserved <= 0:
            return None
        self.reserved += 1
        return Reservation(self, held=True)

    def as_dict(self) -> dict[str, Any]:
        return {"owner": self.owner, "limit": self.limit, "used": self.used}


Listener = Callable[[dict[str, Any]], None]


@dataclass
class RunContext:
    """What a consortium run hands down to the consortia nested in it."""

    budget: CallBudget
    path: str  # e.g. "cns-meta/cns-glm#2": where in the tree events come from
    depth: int
    listeners: list[Listener] = field(default_factory=list)
    # Every enclosing consortium's `max_concurrency`, outermost first: a model call anywhere in
    # the tree holds a slot in each, so nesting cannot multiply the limit.
    limits: tuple[asyncio.Semaphore, ...] = ()


# The run the current task is part of; None outside any consortium. Read directly (`CURRENT_RUN.get()`)
# by the call path on every model call: a function around it would cost every call a frame.
CURRENT_RUN: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("consortium_run", default=None)


def current_run() -> contextvars.ContextVar[RunContext | None]:
    return CURRENT_RUN


def emit(run: RunContext, event: dict[str, Any]) -> None:
    """Tell every listener; a listener that fails must not break the run (it is only a view)."""
    for listener in run.listeners:
        try:
            listener(event)
        except Exception:
            pass
