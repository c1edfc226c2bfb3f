"""Under the default `best-effort`, a weaker tier's backend is never started while an at-quality
candidate is still queued, whatever order the fallbacks are queued in (router/execution.py,
_Plan._index and Executor._next).

The case from benchmarks/latency_routing.py on a loaded box (issue 26): an at-quality backend
behind an open breaker is queued after the light one. The plan counted at-quality candidates
from the front of the queue, so once the next at-quality candidate no longer fitted in the time
left (a hedge falls due exactly when it barely does), it picked the light backend: heavy prompts
answered by a light model with nothing failed.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from backends.deadline import Deadline
from policies.latency import Prediction
from policies.selection import Candidate, Plan
from router.execution import _Plan

pytestmark = pytest.mark.unit


def _candidate(name: str, optimistic_s: float, *, weaker: bool = False, breaker: str = "closed") -> Candidate:
    prediction = Prediction(p50_s=optimistic_s, p95_s=optimistic_s, first_p50_s=0.05, first_p95_s=0.1,
                            output_tokens=100, samples=20, failure_rate=0.0, optimistic_s=optimistic_s)
    return Candidate(name, "light" if weaker else "heavy", prediction, 0.0, False, breaker, 0.1, True, weaker)


def _plan(deadline_s: float) -> _Plan:
    # What plan_route orders for a heavy prompt: the winner, the light tier, then the open breaker.
    candidates = (_candidate("heavy-a", 0.2), _candidate("heavy-c", 1.0), _candidate("light", 0.1, weaker=True),
                  _candidate("heavy-b", 2.0, breaker="open"))
    decision = SimpleNamespace(plan=Plan(candidates, "test"), candidates=tuple(c.name for c in candidates),
                               deadline_s=deadline_s)
    return _Plan(decision, hedge=True)  # type: ignore[arg-type]


def test_a_weaker_candidate_is_not_picked_while_an_at_quality_one_is_queued():
    plan = _plan(deadline_s=0.5)  # heavy-c (1.0 s) no longer fits; the light one (0.1 s) would
    assert plan.held_back == {"light"}
    assert plan.pop() == "heavy-a"
    assert plan.peek() == "heavy-c" and plan.pop() == "heavy-c"  # at quality first, fit or not
    assert plan.pop() == "heavy-b"  # behind an open breaker: the executor fails it without a call
    assert plan.pop() == "light"  # only then the weaker tier, as a fallback after those failures


def test_among_at_quality_candidates_the_one_that_fits_goes_first():
    plan = _plan(deadline_s=1.5)
    plan.queue = ["heavy-b", "light", "heavy-c"]
    plan.deadline = Deadline(1.5)
    assert plan.pop() == "heavy-c"  # fits in 1.5 s; heavy-b (2.0 s) does not; light is held back
