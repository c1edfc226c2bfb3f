"""Replicas sharing learned latency and breakers through a real redis-server, calling the simulated
model server over HTTP: what one replica learns, the next decision of another uses; a breaker
opened through one is honoured by all, and only one replica probes when its cooldown ends; with
Redis gone nothing fails, and what was learned meanwhile reaches Redis when it is back."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import httpx
import pytest
from redis import Redis

from policies.latency import LatencyModel
from router import Router
from router.config import StateConfig
from router.config_loader import load_config
from router.doctor import check_all, check_state
from router.server import RouteServer
from router.state.redis_link import RedisLink
from router.state.redis_state import RedisState
from tests.waiting import eventually

pytestmark = pytest.mark.integration

# The priors make alpha look fastest, so a replica that knows nothing sends requests there.
ALPHA = {"kind": "openai", "model": "alpha-model", "max_retries": 0, "latency": {"ttft_ms": 1, "tokens_per_s": 1e6}}
BETA = {"kind": "openai", "model": "beta-model", "max_retries": 0, "latency": {"ttft_ms": 10, "tokens_per_s": 1e5}}


def _config(sim, *, cooldown_ms: float = 600_000) -> dict:
    return {
        "backends": {"alpha": {**ALPHA, "base_url": sim.base_url}, "beta": {**BETA, "base_url": sim.base_url}},
        "routing": {"tiers": [{"name": "all", "backends": ["alpha", "beta"]}], "prefer": "fast",
                    "breaker": {"failures": 1, "cooldown_ms": cooldown_ms},
                    "latency": {"flush_interval_ms": 0, "prior_weight_samples": 0, "explore_rate": 0}},
        "log": {"enabled": False},
        # A generous timeout: a stopped server refuses at once, and a loaded machine is no outage.
        "state": {"backend": "redis", "url": "${ROUTE_REDIS_URL}", "refresh_ms": 0, "timeout_ms": 30_000},
    }


@pytest.fixture
def replicas(sim, redis_server, monkeypatch):
    """Make replicas (Routers) of one config sharing the test's Redis, closed afterwards."""
    monkeypatch.setenv("ROUTE_REDIS_URL", redis_server.url)
    made: list[Router] = []

    def make(**options) -> Router:
        router = Router.from_config(_config(sim, **options), persist=True)
        made.append(router)
        return router

    yield make
    for router in made:
        router.close()


async def test_latency_learned_through_one_replica_is_used_by_the_next_decision_of_another(replicas, sim):
    a, b = replicas(), replicas()
    assert isinstance(a.shared, RedisState) and isinstance(b.shared, RedisState)
    # alpha got slow; only A finds out. Slower than beta's one sample can be on a busy box (its
    # connection set-up included): at 0.5 s the test failed once, run alone at load 10.
    sim.update_profile("alpha-model", ttft_s=1.5)
    assert (await a.acomplete("hi", model="beta")).completion.backend == "beta"
    for _ in range(3):
        assert (await a.acomplete("hi", model="alpha")).completion.backend == "alpha"
    await a.shared.flush()
    hi = [{"role": "user", "content": "hi"}]
    assert b.latency.model("alpha").samples == 0 and a.decide(hi).chosen == "beta"

    await b.refresh()  # what every decision of B starts with
    mine, theirs = b.decide(hi), a.decide(hi)
    assert mine.chosen == "beta" and mine.plan.candidates == theirs.plan.candidates
    assert [c.prediction.samples for c in mine.plan.candidates] == [1, 3]
    assert (await b.acomplete("hi")).completion.backend == "beta"
    assert sim.stats("alpha-model")["requests"] == 3  # all of them A's


async def _open_alpha_through(a: Router, sim) -> None:
    """A routed request that tries alpha (untried, so explored), which fails: A's breaker opens."""
    assert (await a.acomplete("hi", model="beta")).completion.backend == "beta"
    sim.set_faults("alpha-model", ["500"])
    result = await a.acomplete("hi")
    assert result.decision.chosen == "alpha" and result.completion.backend == "beta"
    assert a.breakers["alpha"].state == "open"
    await a.shared.flush()


async def test_a_breaker_opened_through_one_replica_makes_another_skip_the_backend(replicas, sim):
    a, b = replicas(), replicas()
    await _open_alpha_through(a, sim)

    result = await b.acomplete("hi")
    assert result.decision.chosen == "beta" and b.breakers["alpha"].state == "open"
    assert result.decision.plan.why and sim.stats("alpha-model")["requests"] == 1  # A's failed call, none of B's


async def test_after_the_cooldown_one_replica_probes_and_its_verdict_closes_every_breaker(replicas, sim,
                                                                                         redis_server):
    # Long enough that B reads the verdict before it runs out, however busy the machine.
    a, b = replicas(cooldown_ms=1500), replicas(cooldown_ms=1500)
    await _open_alpha_through(a, sim)
    await b.refresh()
    assert b.breakers["alpha"].state == "open"

    redis = Redis.from_url(redis_server.url)
    # the shared cooldown ends when its key (under what alpha is) expires
    while redis.pttl(f"route:breaker:{a.latency.identity('alpha')}:open") > 0:
        await asyncio.sleep(0.02)
    await a.refresh()  # A asks first: it wins the probe
    await b.refresh()
    assert (a.breakers["alpha"].state, b.breakers["alpha"].state) == ("half-open", "open")
    assert (await b.acomplete("hi")).decision.chosen == "beta"  # B leaves the probe to A

    assert (await a.acomplete("hi", model="alpha")).completion.backend == "alpha"  # the probe succeeds
    await a.shared.flush()
    await b.refresh()
    assert (a.breakers["alpha"].state, b.breakers["alpha"].state) == ("closed", "closed")
    assert sim.stats("alpha-model")["requests"] == 2  # the failure and the one probe
    assert redis.keys("route:breaker:*") == []
    redis.close()


def _ask(server: RouteServer, *, model: str = "auto", stream: bool = False) -> int:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    with httpx.Client(trust_env=False, timeout=30) as client:
        response = client.post(f"{server.base_url}/chat/completions", json=body)
        response.read()
        return response.status_code


def _metric(server: RouteServer, line: str) -> float:
    text = httpx.get(f"{server.url}/metrics", trust_env=False).text
    found = [row for row in text.splitlines() if row.startswith(line + " ")]
    assert found, f"{line} not in /metrics"
    return float(found[0].split()[-1])


def test_redis_stopped_mid_run_fails_no_request_and_sharing_resumes_when_it_returns(sim, redis_server,
                                                                                   monkeypatch, caplog):
    monkeypatch.setenv("ROUTE_REDIS_URL", redis_server.url)
    clock = [0.0]  # the link's clock: when to try Redis again
    a = Router(load_config(_config(sim)), source="server", clients_retry=True, log=False,
               persist=RedisState(RedisLink(redis_server.url, timeout_s=30, retry_s=5, clock=lambda: clock[0]),
                                  refresh_s=0))
    up = 'route_state_shared_up{backend="redis"}'
    outages = 'route_state_shared_outages_total{backend="redis"}'
    redis = Redis.from_url(redis_server.url)
    with RouteServer(a) as server, caplog.at_level(logging.WARNING, logger="router.state.redis_link"):
        assert _ask(server, model="beta") == 200
        # A's flush landed, under what beta is (a namesake in another config has a key of its own)
        assert eventually(lambda: redis.get(f"route:latency:{a.latency.identity('beta')}") is not None)
        assert _metric(server, up) == 1.0 and _metric(server, outages) == 0.0

        redis_server.stop()
        sim.set_faults("alpha-model", ["500"])  # alpha, untried, is explored: its breaker opens unheard
        statuses = [_ask(server, stream=i % 2 == 1) for i in range(10)]
        assert statuses == [200] * 10
        assert _metric(server, up) == 0.0 and _metric(server, outages) == 1.0
        assert a.breakers["alpha"].state == "open"
        assert len([r for r in caplog.records if "unavailable" in r.message]) == 1
        assert redis_server.url not in caplog.text

        redis_server.start()  # same port, empty: nothing was saved
        clock[0] += 5
        assert _ask(server) == 200
        assert _metric(server, up) == 1.0 and _metric(server, outages) == 1.0
        # The breaker verdict reached while Redis was down is written once it answers again.
        assert eventually(lambda: redis.pttl(f"route:breaker:{a.latency.identity('alpha')}:open") > 0)
    # Shutdown flushed: what was learned since Redis went away is there (10 answers from beta
    # while it was down, 1 since), and alpha's failure. The answer from before went with the old
    # Redis (it saved nothing), and A, having merged into the new one, holds the same view.
    b = Router(load_config(_config(sim)), log=False,
               persist=RedisState(RedisLink(redis_server.url, timeout_s=30), refresh_s=0))
    assert b.latency.model("beta").samples == a.latency.model("beta").samples == 11
    assert b.latency.model("alpha").failures.count == a.latency.model("alpha").failures.count == 1
    assert b.breakers["alpha"].state == "open"
    redis.close()


async def test_redis_down_at_start_routes_on_local_state_then_joins_when_it_comes(sim, redis_server, caplog,
                                                                                  monkeypatch):
    monkeypatch.setenv("ROUTE_REDIS_URL", redis_server.url)  # the config names it (rate limits link to it too)
    redis_server.stop()
    clock = [0.0]
    with caplog.at_level(logging.WARNING, logger="router.state.redis_link"):
        a = Router(load_config(_config(sim)), log=False,
                   persist=RedisState(RedisLink(redis_server.url, timeout_s=30, retry_s=5, clock=lambda: clock[0]),
                                      refresh_s=0))
        for _ in range(3):
            assert (await a.acomplete("hi", model="alpha")).completion.backend == "alpha"
    assert not a.shared.status().shared and a.shared.status().outages == 1
    assert len([r for r in caplog.records if "unavailable" in r.message]) == 1

    redis_server.start()
    clock[0] += 5
    await a.acomplete("hi", model="alpha")
    await a.shared.flush()
    assert a.shared.status().shared
    redis = Redis.from_url(redis_server.url)
    assert redis.get(f"route:latency:{a.latency.identity('alpha')}") is not None
    b = Router(load_config(_config(sim)), log=False,
               persist=RedisState(RedisLink(redis_server.url, timeout_s=30), refresh_s=0))
    await b.refresh()
    assert b.latency.model("alpha").samples == 4  # A's three from the outage and one since
    redis.close()
    await a.aclose()
    await b.aclose()


async def test_doctor_says_whether_redis_answers_and_never_prints_its_password(redis_server, monkeypatch):
    check = await check_state(StateConfig(backend="redis", url=redis_server.url), 5)
    assert check.ok and check.detail.startswith(f"redis at 127.0.0.1:{redis_server.port} reachable")

    monkeypatch.setenv("ROUTE_REDIS_URL", f"redis://:s3cret-pw@127.0.0.1:{redis_server.port}/0")
    check = await check_state(StateConfig(backend="redis", url="${ROUTE_REDIS_URL}"), 5)
    assert check.ok and "s3cret-pw" not in check.detail
    with Redis.from_url(redis_server.url) as redis:
        redis.config_set("requirepass", "another-pw")
    check = await check_state(StateConfig(backend="redis", url="${ROUTE_REDIS_URL}"), 5)
    assert not check.ok and "AuthenticationError" in check.detail and "s3cret-pw" not in check.detail

    redis_server.stop()
    check = await check_state(StateConfig(backend="redis", url="${ROUTE_REDIS_URL}"), 5)
    assert not check.ok and "unreachable" in check.detail and "s3cret-pw" not in check.detail

    monkeypatch.delenv("ROUTE_REDIS_URL")
    check = await check_state(StateConfig(backend="redis", url="${ROUTE_REDIS_URL}"), 5)
    assert not check.ok and "ROUTE_REDIS_URL" in check.detail and "export" in check.detail


def test_route_doctor_has_a_shared_state_line(sim, redis_server, monkeypatch):
    monkeypatch.setenv("ROUTE_REDIS_URL", redis_server.url)
    checks = check_all(load_config(_config(sim)).config, timeout_s=5)
    assert [c.name for c in checks] == ["alpha", "beta", "shared state"]
    assert checks[-1].ok and f"127.0.0.1:{redis_server.port} reachable" in checks[-1].detail


async def test_a_replica_that_goes_quiet_after_a_burst_still_publishes_what_it_learned(sim, redis_server, monkeypatch):
    """The burst ends well within the flush interval (2 s), so no request after it can carry the
    flush: a timer does, while the replica waits for its next request."""
    monkeypatch.setenv("ROUTE_REDIS_URL", redis_server.url)
    config = _config(sim)
    config["routing"]["latency"]["flush_interval_ms"] = 2_000
    quiet = Router.from_config(config, persist=True)
    for _ in range(3):
        assert (await quiet.acomplete("hi", model="alpha")).completion.backend == "alpha"
    redis = Redis.from_url(redis_server.url)

    def published() -> int:
        raw = redis.get(f"route:latency:{quiet.latency.identity('alpha')}")
        model = LatencyModel()
        return model.samples if raw is not None and model.load_dict(json.loads(raw)) else 0

    deadline = time.monotonic() + 30  # the limit only ends a failing test
    while published() < 3:
        assert time.monotonic() < deadline, f"{published()} of 3 samples reached Redis"
        await asyncio.sleep(0.02)  # the replica's loop runs meanwhile: nothing else happens on it
    await quiet.aclose()


@pytest.mark.parametrize("path", ["astream", "session", "langchain", "openai-agents", "pydantic-ai"])
async def test_a_stream_decides_on_what_the_fleet_knows_as_a_call_does(replicas, sim, path):
    """Every decision path refreshes before it decides: a stream (and a session's, and each
    framework adapter's) skips a backend another replica found broken, as acomplete does. Before,
    only acomplete refreshed: a stream chose the broken backend, and its first call found out."""
    a, b = replicas(), replicas()
    await _open_alpha_through(a, sim)
    hi = [{"role": "user", "content": "hi"}]
    if path in ("astream", "session"):
        stream = b.astream(hi) if path == "astream" else b.session("s").astream(hi)
        chunks = [chunk async for chunk in stream]
        assert chunks and stream.decision.chosen == "beta"
    elif path == "langchain":
        from router.integrations.langchain import ChatRouter

        assert [c async for c in ChatRouter(router=b).astream("hi")]
    elif path == "openai-agents":
        from agents import ModelSettings
        from agents.models.interface import ModelTracing

        from router.integrations.openai_agents import RouterModel

        events = RouterModel(b).stream_response(None, "hi", ModelSettings(), [], None, [], ModelTracing.DISABLED)
        assert [e async for e in events]
    else:
        from pydantic_ai import Agent

        from router.integrations.pydantic_ai import RouterModel as PydanticRouterModel

        async with Agent(PydanticRouterModel(b)).run_stream("hi") as run:
            assert await run.get_output()
    assert b.breakers["alpha"].state == "open"
    assert sim.stats("alpha-model")["requests"] == 1  # A's failed call, none of B's
