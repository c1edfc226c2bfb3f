"""Route the task, not the turn (issue 30): a session keeps its backend, its tier moves only up,
and history length alone cannot carry it across a boundary. Through the real path: the
shipped scorer and three tiers of simulated backends on loopback, `Router.acomplete` and
`route serve`.

Before sessions (measured with `Router.decide` on the shipped config): a coding task with 18
tool round trips moved from the fast tier to frontier at its second call; a simple task's
score climbed 0.33 -> 0.43 over 7 calls from history alone; a hard question followed by "ok,
continue" moved down to the local tier.
"""

from __future__ import annotations

import httpx
import pytest

from router import Router
from router.config_loader import load_config
from router.server import RouteServer
from router.sessions import SessionState, SessionTable
from router.store import Store

pytestmark = pytest.mark.unit

FAST = {"ttft_s": 0.0, "tokens_per_s": None, "answer_tokens": 6}
SIMPLE_TASK = "Rename the variable `cnt` to `count` in utils.py."
HARD_TASK = ("Prove that for every prime p > 3, p^2 - 1 is divisible by 24, then generalise: for which k is "
             "p^k - 1 divisible by 24 for all such primes? Give a rigorous argument for each step and explain "
             "the group-theoretic reason behind the pattern, relating it to the structure of (Z/24Z)*.")


def _config(sim, tiers: tuple[str, ...] = ("local", "fast", "frontier")) -> dict:
    backends = {name: {"kind": "openai", "model": f"m-{name}", "base_url": sim.base_url, "max_retries": 0}
                for name in (*tiers, "frontier-b")}
    return {"backends": backends,
            "routing": {"scorer": {"kind": "learned"},
                        "tiers": [{"name": "local", "below": 0.45, "backends": ["local"]},
                                  {"name": "fast", "below": "calibrated", "backends": ["fast"]},
                                  {"name": "frontier", "backends": ["frontier", "frontier-b"]}]}}


@pytest.fixture
def router(sim):
    for name in ("local", "fast", "frontier", "frontier-b"):
        sim.update_profile(f"m-{name}", **FAST)
    with Router(load_config(_config(sim))) as router:
        yield router


def _tool_turn(i: int, reminder: bool) -> list[dict]:
    call = {"id": f"call_{i}", "type": "function", "function": {"name": "read_file", "arguments": f'{{"n": {i}}}'}}
    out = [{"role": "assistant", "content": None, "tool_calls": [call]},
           {"role": "tool", "tool_call_id": f"call_{i}", "content": f"line {i}: " + "x = compute(y) " * 40}]
    if reminder:  # as Claude Code adds to each tool turn
        out.append({"role": "user", "content": "<system-reminder>Keep the todo list up to date.</system-reminder>"})
    return out


@pytest.mark.integration
@pytest.mark.parametrize("reminder", [False, True])
def test_a_hundred_tool_turns_of_a_simple_task_stay_on_its_tier_and_backend(router, reminder):
    session = router.session()
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": SIMPLE_TASK}]
    first = session.complete(messages)
    tiers, backends = {first.decision.tier}, {first.backend}
    for i in range(100):
        messages += _tool_turn(i, reminder)
        result = session.complete(messages)
        tiers.add(result.decision.tier)
        backends.add(result.backend)
    assert tiers == {first.decision.tier} and backends == {first.backend}
    assert first.decision.tier != "frontier"
    assert "kept for the session" in result.decision.reason


@pytest.mark.integration
def test_a_hard_questions_follow_ups_stay_on_its_tier(router):
    session = router.session()
    messages = [{"role": "user", "content": HARD_TASK}]
    first = session.complete(messages)
    assert first.decision.tier == "frontier"
    for follow_up in ("ok, continue", "and for k=3?", "thanks"):
        messages += [{"role": "assistant", "content": "..."}, {"role": "user", "content": follow_up}]
        result = session.complete(messages)
        assert result.decision.tier == "frontier" and result.backend == first.backend
        assert "stays up" in result.decision.reason


@pytest.mark.integration
def test_without_a_session_the_follow_up_moves_down(router):
    """The measurement sessions fix: per-call routing sends "ok, continue" to a weaker tier."""
    messages = [{"role": "user", "content": HARD_TASK}, {"role": "assistant", "content": "..."},
                {"role": "user", "content": "ok, continue"}]
    assert router.explain(messages).tier != "frontier"


@pytest.mark.integration
def test_a_harder_turn_escalates_and_the_session_stays_up(router):
    session = router.session()
    messages = [{"role": "user", "content": SIMPLE_TASK}]
    assert session.complete(messages).decision.tier != "frontier"
    messages += [{"role": "assistant", "content": "done"}, {"role": "user", "content": HARD_TASK}]
    assert session.complete(messages).decision.tier == "frontier"
    messages += [{"role": "assistant", "content": "..."}, {"role": "user", "content": "ok"}]
    assert session.complete(messages).decision.tier == "frontier"


@pytest.mark.integration
def test_failing_tool_calls_and_a_repeated_turn_escalate_one_tier(router):
    session = router.session()
    messages = [{"role": "user", "content": SIMPLE_TASK}]
    start = session.complete(messages).decision.tier
    for i in range(2):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "Error: command not found"}]
        result = session.complete(messages)
    assert result.decision.tier != start and "failed tool results" in result.decision.reason
    again = router.session()
    ask = [{"role": "user", "content": SIMPLE_TASK}]
    tier = again.complete(ask).decision.tier
    assert again.complete(ask).decision.tier != tier  # the same turn sent again after its answer


@pytest.mark.integration
def test_a_session_whose_backend_fails_moves_once_and_stays(router, sim):
    session = router.session()
    messages = [{"role": "user", "content": HARD_TASK}]
    first = session.complete(messages)
    assert first.backend in ("frontier", "frontier-b")
    other = "frontier-b" if first.backend == "frontier" else "frontier"
    sim.update_profile(f"m-{first.backend}", fault="500")
    answered = []
    for i in range(4):
        messages += [{"role": "assistant", "content": "..."}, {"role": "user", "content": f"go on {i}"}]
        result = session.complete(messages)
        answered.append(result.backend)
    assert answered == [other] * 4  # moved once, to the fallback, and stayed there
    sim.update_profile(f"m-{first.backend}", fault=None)
    messages += [{"role": "assistant", "content": "..."}, {"role": "user", "content": "more"}]
    assert session.complete(messages).backend == other  # a healed backend does not pull it back


def test_the_session_table_stays_bounded():
    table = SessionTable(max_entries=1000, ttl_s=3600)
    for i in range(100_000):
        table.put(f"s{i}", SessionState(tier=0))
    assert len(table) == 1000 and table.get("s99999") is not None and table.get("s0") is None


def test_a_session_is_forgotten_after_its_time_to_live():
    now = [0.0]
    table = SessionTable(ttl_s=60, clock=lambda: now[0])
    table.put("s", SessionState(tier=2))
    now[0] = 59
    assert table.get("s").tier == 2
    now[0] = 59 + 61
    assert table.get("s") is None


# -- through route serve -----------------------------------------------------------------------


@pytest.fixture
def served(sim, router):
    with RouteServer(router) as srv:
        yield srv


def _post(srv, body: dict, **headers: str) -> httpx.Response:
    return httpx.post(f"{srv.base_url}/chat/completions", json=body, headers=headers, timeout=30)


@pytest.mark.integration
def test_route_serve_keeps_a_derived_session_and_says_so(served):
    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": HARD_TASK}]
    first = _post(served, {"model": "auto", "messages": messages})
    key = first.headers["x-route-session"]
    assert key.startswith("auto-") and first.headers["x-route-tier"] == "frontier"
    messages += [{"role": "assistant", "content": first.json()["choices"][0]["message"]["content"]},
                 {"role": "user", "content": "ok, continue"}]
    second = _post(served, {"model": "auto", "messages": messages})
    assert second.headers["x-route-session"] == key and second.headers["x-route-tier"] == "frontier"
    assert second.headers["x-route-answered-by"] == first.headers["x-route-answered-by"]


@pytest.mark.integration
def test_route_serve_takes_the_session_from_the_header_or_prompt_cache_key(served, router):
    body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
    assert _post(served, body, **{"x-session-id": "task-42"}).headers["x-route-session"] == "task-42"
    assert _post(served, {**body, "prompt_cache_key": "codex-7"}).headers["x-route-session"] == "codex-7"
    router.request_log.flush()
    assert [row["session"] for row in Store(router.request_log.path).recent(2)] == ["codex-7", "task-42"]


@pytest.mark.integration
@pytest.mark.parametrize("bad", ["x" * 300, "tab\there", "naïve"])
def test_a_session_id_too_long_or_not_printable_is_a_clear_400(served, bad):
    response = _post(served, {"model": "auto", "messages": [{"role": "user", "content": "hi"}],
                              "prompt_cache_key": bad})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_session_id" and "session id" in error["message"]


# -- a fleet: two replicas sharing Redis ------------------------------------------------------


@pytest.mark.integration
async def test_two_replicas_sharing_redis_keep_one_session_on_one_backend(sim, redis_server, monkeypatch):
    """Calls of one session alternate between replicas; each replica would pick the other
    frontier backend on its own (its latency prior says so), yet every call lands on the backend
    the session started on."""
    for name in ("local", "fast", "frontier", "frontier-b"):
        sim.update_profile(f"m-{name}", **FAST)
    monkeypatch.setenv("ROUTE_REDIS_URL", redis_server.url)

    def replica(prefers: str) -> Router:
        config = _config(sim)
        config["state"] = {"backend": "redis", "url": "${ROUTE_REDIS_URL}", "timeout_ms": 30_000,
                           "refresh_ms": 600_000}  # sessions only: each replica keeps its own latency view
        config["log"] = {"enabled": False}
        router = Router(load_config(config))
        for name in ("local", "fast", "frontier", "frontier-b"):  # measured, so nothing is explored
            first_s = 0.01 if name == prefers else 0.9  # each replica's own idea of which is faster
            for _ in range(10):
                router.latency.model(name).observe(first_s + 0.01, first_s=first_s, output_tokens=10,
                                                   now=router.latency._clock())
        return router

    one, two = replica("frontier"), replica("frontier-b")
    messages = [{"role": "user", "content": HARD_TASK}]
    assert (one.explain(messages).chosen, two.explain(messages).chosen) == ("frontier", "frontier-b")
    answered = []
    for i in range(6):
        router = one if i % 2 == 0 else two
        result = await router.acomplete(messages, session="fleet-task-1")
        answered.append(result.backend)
        await router.sessions.shared.aclose()  # this call's state is written before the next one reads it
        messages += [{"role": "assistant", "content": result.text}, {"role": "user", "content": f"go on {i}"}]
    assert answered == ["frontier"] * 6
    await one.aclose()
    await two.aclose()
