"""The attempt loop through real sockets: hedging, deadlines under faults, fallback, breakers,
and latency state shared by two processes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backends.errors import AllBackendsFailed, BackendError, BreakerOpen
from backends.types import TextChunk
from router.core import Router
from router.store import LatencyStore
from tests.helpers import Watched
from tests.waiting import LATE_S, eventually

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def config(sim, backends: dict[str, dict], tiers: list[list[str]] | None = None, **routing) -> dict:
    """Backends on the simulator: name -> {model, plus any backend keys}; one tier each by default."""
    specs = {}
    for name, spec in backends.items():
        specs[name] = {"kind": "openai", "base_url": sim.base_url, "max_retries": 0, "timeout_s": 30,
                       "latency": {"ttft_ms": 50, "tokens_per_s": 1000}, **spec}
    tiers = tiers or [list(backends)]
    tier_list = [{"name": f"t{i}", "below": round((i + 1) / len(tiers), 3), "backends": names}
                 for i, names in enumerate(tiers)]
    tier_list[-1].pop("below")
    return {"backends": specs, "routing": {"tiers": tier_list, **routing}}


def seed(router: Router, *names: str, first_s: float = 0.05) -> None:
    """Give backends a measured history, so routing is by price rather than exploration."""
    now = router.latency._clock()
    for name in names:
        for _ in range(10):
            router.latency.model(name).observe(first_s + 0.01, first_s=first_s, output_tokens=10, now=now)


def lanes_left() -> list[asyncio.Task]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("route-lane-")]


@pytest.fixture
def hedge_pair(sim):
    sim.update_profile("slow-m", ttft_s=3.0, answer_tokens=10)
    sim.update_profile("fast-m", ttft_s=0.05, answer_tokens=10)
    cfg = config(sim, {"slow": {"model": "slow-m"},
                       "fast": {"model": "fast-m", "price": {"input": 1, "output": 1}}}, hedge=True)
    router = Router.from_config(cfg)
    seed(router, "slow", "fast")  # slow is free, so it is tried first; its p95 to first token is ~0.05 s
    return router


async def test_hedge_takes_the_first_answer_and_cancels_the_loser(sim, hedge_pair):
    router = hedge_pair
    watch = Watched()
    result = await router.acomplete("hello there", max_tokens=10, watch=watch)
    attempts = watch.attempts
    assert result.decision.candidates[:2] == ("slow", "fast")
    assert result.backend == "fast"
    # The slow backend was not waited for: its attempt was cancelled, not answered or failed.
    loser = [a for a in attempts if a.backend == "slow"]
    assert len(loser) == 1 and loser[0].cancelled and loser[0].error is not None
    assert result.failures == ()  # losing a race is not a failure
    await asyncio.sleep(0)
    assert lanes_left() == []
    # The server saw the loser's connection close: nothing left in flight.
    assert await asyncio.to_thread(eventually, lambda: sim.stats("slow-m")["cancelled"] == 1)
    assert sim.stats("slow-m")["in_flight"] == 0
    assert router.breakers["slow"].state == "closed"  # cancelled, not failed
    await router.aclose()


async def test_streaming_hedge_commits_to_the_first_backend_with_text(sim, hedge_pair):
    router = hedge_pair
    stream = router.astream("hello there", max_tokens=10)
    text = "".join([c.text async for c in stream if isinstance(c, TextChunk)])
    assert text.startswith("[simulated fast-m]")
    assert stream.result is not None and stream.result.backend == "fast"
    assert lanes_left() == []
    assert await asyncio.to_thread(eventually, lambda: sim.stats("slow-m")["in_flight"] == 0)
    await router.aclose()


async def test_breaking_off_a_stream_closes_every_lane(sim, hedge_pair):
    router = hedge_pair
    stream = router.astream("hello there", max_tokens=10).__aiter__()
    first = await anext(stream)
    assert first is not None
    await stream.aclose()
    assert lanes_left() == []
    assert await asyncio.to_thread(eventually, lambda: sim.stats("slow-m")["in_flight"] == 0
                                   and sim.stats("fast-m")["in_flight"] == 0)
    await router.aclose()


@pytest.mark.parametrize("streamed", [False, True])
async def test_deadline_holds_when_a_backend_hangs(sim, streamed):
    sim.update_profile("hang-m", fault="hang")
    router = Router.from_config(config(sim, {"stuck": {"model": "hang-m"}}))
    started = time.perf_counter()
    with pytest.raises(AllBackendsFailed) as caught:
        if streamed:
            [c async for c in router.astream("hi", deadline_s=0.4)]
        else:
            await router.acomplete("hi", deadline_s=0.4)
    elapsed = time.perf_counter() - started
    assert 0.35 < elapsed < 0.4 + LATE_S  # the hang lasts forever
    assert "deadline" in str(caught.value)
    assert lanes_left() == []
    assert await asyncio.to_thread(eventually, lambda: sim.stats("hang-m")["in_flight"] == 0)
    await router.aclose()


@pytest.mark.parametrize("streamed", [False, True])
async def test_deadline_holds_under_slow_drip(sim, streamed):
    # One token every 0.2 s: the whole answer would take ~10 s.
    sim.update_profile("drip-m", fault="drip", drip_interval_s=0.2, answer_tokens=50)
    router = Router.from_config(config(sim, {"drip": {"model": "drip-m"}}))
    started = time.perf_counter()
    received = []
    with pytest.raises(BackendError):  # streamed: a timeout after text; plain: AllBackendsFailed
        if streamed:
            async for chunk in router.astream("hi", deadline_s=0.7):
                received.append(chunk)
        else:
            await _complete_or_raise(router)
    elapsed = time.perf_counter() - started
    assert elapsed < 0.7 + LATE_S  # the whole drip takes 10 s
    if streamed:
        assert any(isinstance(c, TextChunk) for c in received)  # it was dripping, not silent
    assert await asyncio.to_thread(eventually, lambda: sim.stats("drip-m")["in_flight"] == 0)
    await router.aclose()


async def _complete_or_raise(router: Router):
    try:
        return await router.acomplete("hi", deadline_s=0.7)
    except AllBackendsFailed as exc:
        assert all("deadline" in str(e) for e in exc.exceptions)
        raise exc.exceptions[0] from exc


async def test_a_hedge_rescues_a_hanging_backend_within_the_deadline(sim):
    sim.update_profile("hang-m", fault="hang")
    sim.update_profile("ok-m", ttft_s=0.02, answer_tokens=5)
    cfg = config(sim, {"stuck": {"model": "hang-m"}, "ok": {"model": "ok-m", "price": {"input": 1, "output": 1}}},
                 hedge=True)
    router = Router.from_config(cfg)
    seed(router, "stuck", "ok")
    # The hedge starts at the stuck backend's seeded p95, whatever the deadline: a roomy one lets a
    # loaded machine answer in it (the hang lasts forever, so only the hedge can rescue the call).
    result = await router.acomplete("hi", deadline_s=30.0)
    assert result.backend == "ok"
    assert await asyncio.to_thread(eventually, lambda: sim.stats("hang-m")["in_flight"] == 0)
    await router.aclose()


async def test_a_plain_call_is_hedged_when_decoding_slows_down_after_a_prompt_first_token(sim):
    sim.update_profile("crawl-m", ttft_s=0.02, tokens_per_s=10.0, answer_tokens=50)  # ~5 s in all
    sim.update_profile("ok-m", ttft_s=0.02, answer_tokens=50)
    cfg = config(sim, {"crawl": {"model": "crawl-m"}, "ok": {"model": "ok-m", "price": {"input": 1, "output": 1}}},
                 hedge=True)
    router = Router.from_config(cfg)
    seed(router, "crawl", "ok")  # both measured at ~0.06 s for a whole answer
    result = await router.acomplete("hi", deadline_s=4.0)
    assert result.decision.chosen == "crawl"
    assert result.backend == "ok"
    assert await asyncio.to_thread(eventually, lambda: sim.stats("crawl-m")["in_flight"] == 0)
    await router.aclose()


async def test_the_next_candidate_starts_early_enough_to_meet_the_deadline(sim):
    # The first backend's p95 to first token (~5 s) is past the deadline's last safe moment for
    # the backup (3 s - its p95 of ~1.5 s): the backup starts then, not at the first one's p95.
    # It answers in 0.1 s, so a busy machine has well over a second to spare.
    sim.update_profile("late-m", ttft_s=30.0, answer_tokens=5)
    sim.update_profile("ok-m", ttft_s=0.1, answer_tokens=5)
    cfg = config(sim, {"late": {"model": "late-m"}, "ok": {"model": "ok-m", "price": {"input": 1, "output": 1}}},
                 hedge=True)
    router = Router.from_config(cfg)
    seed(router, "late", first_s=5.0)
    seed(router, "ok", first_s=1.5)
    result = await router.acomplete("hi", deadline_s=3.0)
    assert result.backend == "ok"
    await router.aclose()


async def test_falls_back_on_failure_and_the_breaker_then_skips_the_broken_backend(sim):
    sim.update_profile("broken-m", fault="500")
    sim.update_profile("ok-m", answer_tokens=5)
    cfg = config(sim, {"broken": {"model": "broken-m"}, "ok": {"model": "ok-m", "price": {"input": 1, "output": 1}}},
                 breaker={"failures": 2, "cooldown_ms": 60_000})
    router = Router.from_config(cfg)
    seed(router, "broken", "ok")
    for _ in range(2):
        result = await router.acomplete("hi")
        assert result.backend == "ok"
        assert [e.backend for e in result.failures] == ["broken"]
    assert router.breakers["broken"].state == "open"
    decision = router.decide([{"role": "user", "content": "hi"}])
    assert decision.candidates == ("ok", "broken")  # open breakers go last
    result = await router.acomplete("hi")
    assert result.backend == "ok" and result.failures == ()
    assert sim.stats("broken-m")["requests"] == 2  # not called while open
    router.breakers["broken"].hold_open(0)  # the cooldown is over (without a clock to wait on)
    assert router.breakers["broken"].state == "half-open"
    sim.update_profile("broken-m", fault=None)
    result = await router.acomplete("hi")
    assert result.backend == "broken"
    assert router.breakers["broken"].state == "closed"
    await router.aclose()


async def test_an_open_breaker_with_nothing_else_left_fails_at_once_until_its_probe_is_due(sim):
    """Not called while its probe is not due, even as the last candidate (issue 29: a client
    retrying against a dead upstream made three upstream calls per retry); the failure says when
    a request may probe it (issue 38: at most the cooldown, not always all of it)."""
    sim.update_profile("ok-m", answer_tokens=5)
    router = Router.from_config(config(sim, {"only": {"model": "ok-m"}}, breaker={
        "failures": 1, "cooldown_ms": 60_000, "probe_ms": 50_000}))
    router.breakers["only"].record_failure()
    assert router.breakers["only"].state == "open"
    with pytest.raises(AllBackendsFailed) as failed:
        await router.acomplete("hi")
    [error] = failed.value.exceptions
    assert isinstance(error, BreakerOpen) and 49 < error.retry_after <= 50
    assert 49 < failed.value.retry_after_s <= 50
    assert sim.stats("ok-m")["requests"] == 0
    await router.aclose()


async def test_with_nothing_else_left_a_request_is_the_probe_once_it_is_due(sim):
    """Issue 38: a client retrying against a dead upstream costs at most one upstream call per
    request -- the probe, never retried -- and each failed probe doubles the wait before the next."""
    sim.update_profile("dead-m", fault="500")
    router = Router.from_config(config(sim, {"only": {"model": "dead-m", "max_retries": 2}}, breaker={
        "failures": 1, "cooldown_ms": 60_000, "probe_ms": 0.001}))
    router.breakers["only"].record_failure()
    with pytest.raises(AllBackendsFailed) as failed:
        await router.acomplete("hi")
    assert [type(e).__name__ for e in failed.value.exceptions] == ["BackendUnavailable"]
    assert sim.stats("dead-m")["requests"] == 1  # the probe, not retried though max_retries is 2
    assert router.breakers["only"].state == "open" and router.breakers["only"].probe_in() is not None
    sim.update_profile("dead-m", fault=None)  # recovered: the next request's probe (due 2 µs later) finds it
    result = await router.acomplete("hi")
    assert result.backend == "only" and router.breakers["only"].state == "closed"
    await router.aclose()


async def test_every_attempt_teaches_the_latency_model(sim):
    sim.update_profile("ok-m", ttft_s=0.05, tokens_per_s=200.0, answer_tokens=20)
    router = Router.from_config(config(sim, {"ok": {"model": "ok-m", "latency": {"ttft_ms": 2000,
                                                                                  "tokens_per_s": 5}}}))
    before = router.decide([{"role": "user", "content": "hi"}], max_tokens=20).details["candidates"][0]
    for _ in range(15):
        [c async for c in router.astream("hi", max_tokens=20)]
    after = router.decide([{"role": "user", "content": "hi"}], max_tokens=20).details["candidates"][0]
    assert before["p50_s"] > 5.0  # the prior: 2 s + 19 tokens at 5 tok/s
    assert after["p50_s"] == pytest.approx(0.05 + 19 / 200, abs=0.06)
    assert after["samples"] >= 15
    await router.aclose()


_WORKER = """
import asyncio, json, sys
from router.core import Router
from router.store import LatencyStore
from tests.helpers import Watched

cfg, n = json.loads(sys.argv[1]), int(sys.argv[2])
router = Router(__import__("router.config_loader", fromlist=["x"]).load_config(cfg), source="cli")
router.latency.attach_store(LatencyStore())
samples_at_start = router.latency.model("a").samples
print("ready", flush=True)
sys.stdin.readline()  # the test starts every worker at once: they overlap by construction, not by timing

async def main():
    for _ in range(n):
        await router.acomplete("hello", max_tokens=5)
    await router.aclose()

asyncio.run(main())
print(json.dumps({"samples_at_start": samples_at_start}))
"""


def _worker(cfg: dict, n: int) -> subprocess.Popen:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", _WORKER, json.dumps(cfg), str(n)], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _start(*procs: subprocess.Popen) -> None:
    """Wait until every worker has read the store, then let them all go together."""
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready", proc.communicate(timeout=60)
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()


def _finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_processes_share_learned_latency_without_clobbering(sim, route_home):
    sim.update_profile("p-m", ttft_s=0.01, answer_tokens=5)
    cfg = config(sim, {"a": {"model": "p-m"}})
    cfg["routing"]["latency"] = {"flush_interval_ms": 0}  # flush after every request: maximal interleaving
    first, second = _worker(cfg, 12), _worker(cfg, 12)
    _start(first, second)  # both have read the empty store; now both write at once
    assert [_finish(first)["samples_at_start"], _finish(second)["samples_at_start"]] == [0, 0]
    state = LatencyStore().load_latency()[Router.from_config(cfg).latency.identity("a")]
    assert state["failures"]["count"] == 24  # one entry per attempt, from both processes
    # A later run starts from what both learned.
    later = _worker(cfg, 0)
    _start(later)
    assert _finish(later)["samples_at_start"] >= 24
    assert sim.stats("p-m")["requests"] == 24


def test_consecutive_cli_runs_learn_from_each_other(sim, route_home, tmp_path):
    sim.update_profile("cli-m", ttft_s=0.01, answer_tokens=5)
    cfg = config(sim, {"a": {"model": "cli-m", "latency": {"ttft_ms": 3000, "tokens_per_s": 2}}})
    path = tmp_path / "cfg.json"  # JSON is YAML
    path.write_text(json.dumps(cfg))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT)}

    def route(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "router.cli", *args, "-c", str(path)], capture_output=True,
                              stdin=subprocess.DEVNULL,
                              text=True, env=env, cwd=ROOT, timeout=60)

    def explained() -> dict:
        shown = route("--explain", "--json", "--prefer", "best", "hello")
        assert shown.returncode == 0, shown.stderr
        return json.loads(shown.stdout)["details"]["candidates"][0]

    before = explained()
    assert before["samples"] == 0 and before["p50_s"] > 3.0  # config prior only
    for _ in range(2):
        answered = route("--no-stream", "-q", "hello")
        assert answered.returncode == 0, answered.stderr
        assert answered.stdout.startswith("[simulated cli-m]")
    after = explained()
    assert after["samples"] >= 2
    assert after["p50_s"] < before["p50_s"]
