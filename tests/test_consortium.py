"""Consortium orchestration with the in-package FakeBackend: quorum, cancellation, timeouts,
retries, failures, budgets, iterations and the code-simplicity tie-breaker."""

from __future__ import annotations

import asyncio
import time

import pytest

from backends.errors import AllBackendsFailed, BackendUnavailable, UsageError
from backends.fake import FakeStep
from backends.types import last_user_text
from policies.breaker import BreakerBoard
from router.calls import CallPath
from router.consortium.budget import BudgetExhausted
from router.consortium.consortium import Consortium
from router.consortium.simulated import arbiter_responder, read_candidates
from router.consortium.spec import ConsortiumConfig
from tests.helpers import arbiter, ask, build, calls, fake
from tests.waiting import LATE_S

pytestmark = pytest.mark.unit


async def test_quorum_met_cancels_the_rest_and_leaks_no_task():
    slow = [fake(f"m{i}", [FakeStep(f"answer {i}", delay_s=d)]) for i, d in enumerate([0.01, 0.02, 0.03, 30, 30])]
    reg = build({**{b.name: b for b in slow}, "arb": arbiter()},
                {"c": {"members": [b.name for b in slow], "arbiter": "arb", "quorum": 3}})
    before = asyncio.all_tasks()
    completion = await reg["c"].complete(ask())
    states = [m["status"] for m in completion.metadata["trace"]["rounds"][0]["members"]]
    assert states.count("done") == 3 and states.count("cancelled") == 2  # the 30 s members were not waited for
    assert asyncio.all_tasks() == before  # every member task finished or was cancelled and awaited
    assert completion.text in {"answer 0", "answer 1", "answer 2"}
    # the request log keys its record to this id
    assert completion.metadata["trace_id"] == completion.metadata["trace"]["id"] and len(completion.metadata["trace_id"]) == 32


async def test_grace_period_lets_a_close_straggler_in():
    members = [fake(f"m{i}", [FakeStep(f"a{i}", delay_s=d)]) for i, d in enumerate([0.01, 0.02, 0.15, 30])]
    reg = build({**{b.name: b for b in members}, "arb": arbiter()},
                {"c": {"members": [b.name for b in members], "arbiter": "arb", "quorum": 2, "grace_s": 0.6}})
    completion = await reg["c"].complete(ask())
    states = {m["member"]: m["status"] for m in completion.metadata["trace"]["rounds"][0]["members"]}
    assert states == {"m0": "done", "m1": "done", "m2": "done", "m3": "cancelled"}


async def test_hanging_member_times_out_is_retried_and_reported():
    hang = fake("hang", [FakeStep("never", delay_s=30), FakeStep("never", delay_s=30)])
    ok = [fake(f"ok{i}", [FakeStep(f"fine {i}", delay_s=0.01)]) for i in range(2)]
    reg = build({"hang": hang, **{b.name: b for b in ok}, "arb": arbiter()},
                {"c": {"members": ["hang", "ok0", "ok1"], "arbiter": "arb", "member_timeout_s": 0.2, "retries": 1}})
    started = time.perf_counter()
    completion = await reg["c"].complete(ask())
    assert time.perf_counter() - started < 0.4 + LATE_S  # two tries of a 30 s member
    record = next(m for m in completion.metadata["trace"]["rounds"][0]["members"] if m["member"] == "hang")
    assert record["status"] == "failed"
    assert [a["error"] for a in record["attempts"]] == ["BackendTimeout", "BackendTimeout"]
    assert len(hang.calls) == 2
    assert completion.text in {"fine 0", "fine 1"}


async def test_failed_member_is_retried_then_succeeds():
    flaky = fake("flaky", [FakeStep(error=BackendUnavailable("boom", backend="flaky")), FakeStep("second try")])
    reg = build({"flaky": flaky, "arb": arbiter()}, {"c": {"members": ["flaky"], "arbiter": "arb", "retries": 1}})
    completion = await reg["c"].complete(ask())
    member = completion.metadata["trace"]["rounds"][0]["members"][0]
    assert completion.text == "second try"
    assert member["status"] == "done" and member["attempts"][0]["error"] == "BackendUnavailable"


async def test_all_members_failing_is_a_clear_error_not_an_empty_answer():
    broken = [fake(f"b{i}", [FakeStep(error=BackendUnavailable("down", backend=f"b{i}"))] * 2) for i in range(3)]
    arb = arbiter()
    reg = build({**{b.name: b for b in broken}, "arb": arb},
                {"c": {"members": [b.name for b in broken], "arbiter": "arb"}})
    with pytest.raises(AllBackendsFailed) as info:
        await reg["c"].complete(ask())
    assert "all 3 member calls failed" in str(info.value)
    assert len(info.value.exceptions) == 6  # every attempt of every member is reported
    assert arb.calls == []  # the arbiter is not asked to judge nothing


async def test_quorum_that_cannot_be_met_fails_fast():
    members = [fake("ok", [FakeStep("x")]), fake("bad", [FakeStep(error=BackendUnavailable("no", backend="bad"))] * 2),
               fake("slow", [FakeStep("late", delay_s=30)])]
    reg = build({**{b.name: b for b in members}, "arb": arbiter()},
                {"c": {"members": ["ok", "bad", "slow", "ok"], "arbiter": "arb", "quorum": 4}})
    started = time.perf_counter()
    with pytest.raises(AllBackendsFailed, match="quorum is 4"):
        await reg["c"].complete(ask())
    assert time.perf_counter() - started < LATE_S  # did not wait out the 30 s member once 4 was impossible


async def test_budget_is_enforced_across_deep_nesting():
    leaf = fake("leaf", responder=lambda req: "leaf answer")
    arb = arbiter()
    spec = {"members": ["leaf*3"], "arbiter": "arb"}
    # l3 -> l2*2 -> l1*2 -> leaf*3: without a budget, 2*2*(3+1) + 2*1 + 1 = 19 calls
    reg = build({"leaf": leaf, "arb": arb}, {
        "l1": spec,
        "l2": {"members": ["l1*2"], "arbiter": "arb"},
        "l3": {"members": ["l2*2"], "arbiter": "arb", "budget": 9},
    })
    completion = await reg["l3"].complete(ask())
    # Every call of the budget is used (inner arbiters hold nothing of it), none more.
    assert calls(leaf, arb) == 9
    assert completion.metadata["trace"]["rounds"][0]["arbiter"]["status"] == "done"  # its call was kept
    assert completion.metadata["calls"] == calls(leaf, arb)
    trace = completion.metadata["trace"]
    assert trace["budget"] == {"owner": "l3", "limit": 9, "used": calls(leaf, arb)}
    # What the budget refused is reported, not dropped.
    text = str(trace)
    assert "BudgetExhausted" in text and completion.text


async def test_budget_too_small_for_even_one_round_is_an_error():
    leaf = fake("leaf", responder=lambda req: "x")
    arb = arbiter()
    reg = build({"leaf": leaf, "arb": arb}, {
        "inner": {"members": ["leaf*4"], "arbiter": "arb"},
        "outer": {"members": ["inner"], "arbiter": "arb", "budget": 1},
    })
    with pytest.raises(AllBackendsFailed) as info:
        await reg["outer"].complete(ask())
    assert calls(leaf, arb) == 0  # the one call is kept for the outer arbiter, which has nothing to judge
    assert "BudgetExhausted" in str(info.value)


async def test_code_built_self_loop_stops_at_the_depth_limit():
    registry: dict = {"arb": arbiter()}
    path = CallPath(registry.__getitem__, breakers=BreakerBoard(time.monotonic))
    registry["loop"] = Consortium("loop", ConsortiumConfig(members=[{"model": "loop"}], arbiter="arb"),
                                  resolve=registry.__getitem__, calls=path)
    with pytest.raises(UsageError, match="nested more than"):
        await registry["loop"].complete(ask())


async def test_iterations_feed_the_previous_answer_and_refinement_areas():
    confidences = iter([0.3, 0.95])

    def respond(req):
        return arbiter_responder(confidence=next(confidences), refine="- cite a source\n- be shorter")(req.messages)

    member = fake("m", responder=lambda req: f"draft {len(req.messages)}")
    reg = build({"m": member, "arb": fake("arb", responder=respond)},
                {"c": {"members": ["m*2"], "arbiter": "arb", "judging": "synthesis",
                       "confidence_threshold": 0.8, "max_iterations": 3}})
    completion = await reg["c"].complete(ask())
    trace = completion.metadata["trace"]
    assert len(trace["rounds"]) == 2 and trace["confidence"] == 0.95
    assert "reached the threshold" in trace["stopped"]
    second = member.calls[2].messages
    assert second[-2] == {"role": "assistant", "content": "draft 1"}
    assert "cite a source" in second[-1]["content"] and "be shorter" in second[-1]["content"]


async def test_rank_tie_goes_to_the_simpler_code():
    complex_code = "```python\ndef f(x):\n    if x > 1:\n        if x > 2:\n            return 3\n        return 2\n    return 1\n```"
    simple_code = "```python\ndef f(x):\n    return min(3, max(1, x))\n```"
    members = [fake("a", [FakeStep(complex_code)]), fake("b", [FakeStep(simple_code)])]

    def tie(req):
        nonce, _ = read_candidates(req.messages)
        return f"<ranking-{nonce}>1 = 2</ranking-{nonce}><confidence-{nonce}>0.9</confidence-{nonce}>"

    reg = build({"a": members[0], "b": members[1], "arb": fake("arb", responder=tie)},
                {"c": {"members": ["a", "b"], "arbiter": "arb"}})
    completion = await reg["c"].complete(ask())
    assert completion.text == simple_code
    prompt = reg["arb"].calls[0].messages[1]["content"]
    assert "cyclomatic complexity" in prompt  # the arbiter was shown the metrics


async def test_complexity_budget_rejects_a_far_more_complex_candidate():
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(12))
    monster = f"```python\ndef f(x):\n{branches}\n    return -1\n```"
    plain = "```python\ndef f(x):\n    return x\n```"
    members = [fake("a", [FakeStep(monster)]), fake("b", [FakeStep(plain)]), fake("c", [FakeStep(plain + " ")])]
    longest_first = arbiter(score=len)  # this arbiter would pick the monster
    reg = build({**{m.name: m for m in members}, "arb": longest_first},
                {"cns": {"members": ["a", "b", "c"], "arbiter": "arb", "complexity_budget": 3}})
    completion = await reg["cns"].complete(ask())
    rnd = completion.metadata["trace"]["rounds"][0]
    assert "a#1" in rnd["rejected"] and "cyclomatic" in rnd["rejected"]["a#1"]
    assert completion.text != monster


async def test_arbiter_failure_falls_back_and_says_so():
    members = [fake("a", [FakeStep("alpha")]), fake("b", [FakeStep("beta")])]
    broken = fake("arb", [FakeStep(error=BackendUnavailable("arbiter down", backend="arb"))] * 2)
    reg = build({"a": members[0], "b": members[1], "arb": broken}, {"c": {"members": ["a", "b"], "arbiter": "arb"}})
    completion = await reg["c"].complete(ask())
    arb = completion.metadata["trace"]["rounds"][0]["arbiter"]
    assert completion.text in {"alpha", "beta"}
    assert arb["status"] == "failed" and "arbiter failed" in arb["fallback"]


async def test_caller_cancelling_a_run_cancels_its_members():
    members = [fake(f"m{i}", [FakeStep("x", delay_s=30)]) for i in range(3)]
    reg = build({**{m.name: m for m in members}, "arb": arbiter()},
                {"c": {"members": ["m0", "m1", "m2"], "arbiter": "arb"}})
    before = asyncio.all_tasks()
    task = asyncio.create_task(reg["c"].complete(ask()))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)
    assert asyncio.all_tasks() == before


async def test_listeners_see_every_member_of_nested_runs():
    leaf = fake("leaf", responder=lambda req: "leaf " + last_user_text(req.messages)[:5])
    reg = build({"leaf": leaf, "arb": arbiter()}, {
        "inner": {"members": ["leaf*2"], "arbiter": "arb"},
        "outer": {"members": ["inner", "leaf"], "arbiter": "arb"},
    })
    events: list[dict] = []
    reg["outer"].add_listener(events.append)
    await reg["outer"].complete(ask())
    done = {(e["path"], e["id"]) for e in events if e["type"] == "member" and e["status"] == "done"}
    assert done == {("outer", "inner#1"), ("outer", "leaf#1"), ("outer/inner", "leaf#1"), ("outer/inner", "leaf#2")}


def test_reservation_is_kept_from_members_but_checked_against_budgets_above():
    from router.consortium.budget import CallBudget

    top = CallBudget(3, "top")
    inner = CallBudget(2, "inner", parent=top)
    held = inner.reserve()
    inner.take("a member")
    with pytest.raises(BudgetExhausted, match="'inner'"):
        inner.take("another member")  # the last inner call is the arbiter's
    top.take("a sibling")
    top.take("another sibling")  # the top budget is now spent, reservation or not
    with pytest.raises(BudgetExhausted, match="'top'"):
        held.spend("the arbiter")
    held.release()
    assert (top.used, inner.used, inner.reserved) == (3, 1, 0)
    unlimited = CallBudget(None, "free", parent=CallBudget(1, "capped"))
    unlimited.reserve().spend("the arbiter")
    assert unlimited.available() == 0
