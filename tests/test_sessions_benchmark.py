"""benchmarks/sessions.py on a tiny workload: sessions run through the real router in recorded
clients' harnesses, quality comes from the labels alone, and a failure shows only as the client
shows it. The benchmark's targets are not asserted here (they are the benchmark's business)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from benchmarks.session_client import STRONG, WEAK, Plan, Session, Task, workload
from benchmarks.session_harness import harnesses
from benchmarks.session_results import LAST_TURN, SESSIONS, STRONGEST, TRANSCRIPT, WEAKEST, hull, quality_at
from benchmarks.sessions import run_mode

pytestmark = pytest.mark.unit

HARNESSES = {h.name: h for h in harnesses()}
PICKED = ["codex-responses-tool-round-trip", "claude-code-opus-tool-round-trip", "aider-chat-gpt-4.1",
          "openai-python-chat-tool-round-trip"]
# (local, hosted): the weaker model good enough on the first three, not on the last three
LABELS = [(1.0, 1.0), (1.0, 0.0), (0.0, 0.0), (0.0, 1.0), (0.2, 0.9), (0.0, 1.0)]
PROMPTS = ["What is 2 + 2?", "Name the capital of France.", "Say hello.",
           "Prove that there are infinitely many primes of the form 4k + 3, and generalise the argument.",
           "Derive the variance of the hypergeometric distribution and explain each step.",
           "Find all integer solutions of x^2 - 7y^2 = 1 with x < 10^6 and prove the list is complete."]


def _tasks(swap: bool = False) -> list[Task]:
    return [Task(f"t-{i}", "tiny", p, hosted if swap else local, local if swap else hosted)
            for i, (p, (local, hosted)) in enumerate(zip(PROMPTS, LABELS))]


def _sessions(tasks: list[Task]) -> list[Session]:
    return workload(tasks, [HARNESSES[n] for n in PICKED], seed=3)


def _plan(kind: str, **changes) -> Plan:
    base = Plan(("tool", "text"), kind, shows=True, false_signal=False, arm_at=0, follow_up="ok, continue",
                closing="thanks", correction="That's wrong.", seed=11)
    return dataclasses.replace(base, **changes)


def test_every_corpus_harness_carries_the_task_through_its_own_dialect() -> None:
    assert len(HARNESSES) >= 15
    for h in HARNESSES.values():
        call = h.parse(h.first_turn("Compute 6 * 7 and explain."))
        users = [json.dumps(m.get("content")) for m in call.messages if m.get("role") == "user"]
        assert any("Compute 6 * 7 and explain." in u for u in users), h.name
        assert not any(p in json.dumps(call.messages) for p in ("echo corpus-ok' and", "weather in Paris")), h.name


async def test_each_mode_runs_every_session_to_a_final_answer() -> None:
    sessions = _sessions(_tasks())
    run = await run_mode(SESSIONS, 0.5, sessions)
    assert [o.session.key for o in run.outcomes] == [s.key for s in sessions]
    for o in run.outcomes:
        assert o.tiers and set(o.tiers) <= {WEAK, STRONG}
        assert o.final in o.tiers
        assert all(o.whys), "a sessions run routes every call as part of the task"
        assert o.cost >= 0 and o.input_tokens > 0
    for mode in (TRANSCRIPT, LAST_TURN):
        per_call = await run_mode(mode, 0.5, sessions)
        assert len(per_call.outcomes) == len(sessions) and all(o.tiers for o in per_call.outcomes)
        assert not any(w for o in per_call.outcomes for w in o.whys), "no session: nothing routed as one"
    forced = await run_mode(STRONGEST, 0.5, sessions)
    assert {t for o in forced.outcomes for t in o.tiers} == {STRONG}
    assert forced.cost > 0 and not any(o.whys[0] for o in forced.outcomes)
    # a session's later calls resend its earlier ones: the provider's cache serves them, at a tenth
    assert 0 < sum(o.cached_tokens for o in forced.outcomes) < sum(o.input_tokens for o in forced.outcomes)
    uncached = sum(3.0 * o.input_tokens for o in forced.outcomes) / 1e6
    assert forced.cost < uncached


async def test_quality_is_read_from_the_labels_alone() -> None:
    tasks = _tasks()
    weakest = await run_mode(WEAKEST, 0.5, _sessions(tasks))
    strongest = await run_mode(STRONGEST, 0.5, _sessions(tasks))
    assert weakest.quality == pytest.approx(3 / 6)
    assert strongest.quality == pytest.approx(5 / 6)  # (1.0, 0.0): the weaker model was the better one
    swapped = await run_mode(WEAKEST, 0.5, _sessions(_tasks(swap=True)))
    assert swapped.quality == pytest.approx(sum(t.local >= t.hosted - 0.1 for t in _tasks(swap=True)) / 6)
    assert swapped.quality != weakest.quality


async def test_a_weak_models_failure_shows_only_in_what_the_client_sends_next() -> None:
    hard, easy = _tasks()[3], _tasks()[0]
    harness = HARNESSES["codex-chat-0.80-tool-round-trip"]
    failing = Session("k-hard", hard, harness, _plan("tool_errors"))
    managing = Session("k-easy", easy, harness, _plan("tool_errors"))
    run = await run_mode(WEAKEST, 0.5, [failing, managing])
    shown, quiet = run.outcomes
    assert [(s.kind, s.true, s.at) for s in shown.signals] == [("tool_errors", True, 0)]
    assert len(shown.tiers) == len(quiet.tiers) + 2, "two failing tool results, then the task's own steps"
    assert quiet.signals == [] and not shown.good and quiet.good
    hidden = await run_mode(WEAKEST, 0.5, [dataclasses.replace(failing, plan=_plan("tool_errors", shows=False))])
    assert hidden.outcomes[0].signals == [] and len(hidden.outcomes[0].tiers) == len(quiet.tiers)


async def test_a_stronger_model_gets_past_a_failing_step() -> None:
    hard = _tasks()[3]
    harness = HARNESSES["claude-code-opus-tool-round-trip"]
    for kind in ("correction", "truncated", "refusal", "empty", "repeat", "retype"):
        session = Session(f"k-{kind}", hard, harness, _plan(kind))
        weak = (await run_mode(WEAKEST, 0.5, [session])).outcomes[0]
        strong = (await run_mode(STRONGEST, 0.5, [session])).outcomes[0]
        assert [s.kind for s in weak.signals] == [kind] and strong.signals == [], kind
        assert len(weak.tiers) == len(strong.tiers) + 1, kind
        assert strong.good and not weak.good


def test_quality_at_equal_cost_reads_the_upper_hull() -> None:
    upper = hull([(0.0, 0.5), (1.0, 1.0), (0.5, 0.9), (0.4, 0.6)])
    assert upper == [(0.0, 0.5), (0.5, 0.9), (1.0, 1.0)]
    assert quality_at(upper, 0.25) == pytest.approx(0.7)
    assert quality_at(upper, 0.75) == pytest.approx(0.95)


def test_the_signals_are_worded_as_the_detector_was_not_written_from() -> None:
    """Issue 46: the benchmark planted the detector's own phrases. Its corrections open with
    none of them, its failing outputs print no traceback or FAILED line, and its successful ones
    include outputs that name files and tests for errors: only structure can tell them apart."""
    from benchmarks.session_client import CORRECTIONS, ERROR_OUTPUTS, OK_OUTPUTS
    from policies.sessions import correction, tool_failed

    assert not any(correction(c) for c in CORRECTIONS)
    assert all(tool_failed(o) is None for o in (*ERROR_OUTPUTS, *OK_OUTPUTS))
    assert any("error" in o for o in OK_OUTPUTS)


def test_a_stuck_model_repeats_its_call_and_a_working_one_does_not() -> None:
    harness = HARNESSES["codex-responses-tool-round-trip"]
    items = harness.first_turn("Compute 6 * 7.")
    for step, error in ((1, False), (2, True), (2, True)):
        items += harness.tool_round(f"c{len(items)}", "x", error=error, step=step)
    calls = [m["tool_calls"][0]["function"]["arguments"] for m in harness.parse(items).messages if m.get("tool_calls")]
    assert calls[0] != calls[1] == calls[2]
