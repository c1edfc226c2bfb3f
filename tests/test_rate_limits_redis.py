"""Rate limits shared through a real redis-server by two replicas (two Routers, two `route serve`
apps on loopback), against the simulated model server. The limiters' clocks are frozen and
handed to Redis, so no bucket refills while a test runs: `exactly N` is exact."""

from __future__ import annotations

import asyncio
import contextlib
import json

import httpx
import pytest
import redis
import yaml
from typer.testing import CliRunner

from backends.errors import AtRateLimit, RateLimitExceeded
from router.cli.app import app
from router.config_loader import load_config
from router.core import Router
from router.server import RouteServer
from router.state.rate_limits import RedisRateLimiter

pytestmark = pytest.mark.integration

NOW = 1_000.0
ALICE, BOB = "alice-key-0123456789abcdef", "bob-key-0123456789abcdef"


def config(sim, redis_url: str, *, a: dict, **top) -> dict:
    """`a` (cheap, limited) and `b` (ten times the price, unlimited) in one tier; state in Redis.
    A generous Redis timeout: a loaded machine is no outage."""
    def backend(model: str, **extra) -> dict:
        return {"kind": "openai", "model": model, "base_url": sim.base_url, "max_retries": 0, **extra}

    return {"backends": {"a": backend("m-a", **a), "b": backend("m-b", price={"input": 10, "output": 10})},
            "routing": {"scorer": {"kind": "length"}, "tiers": [{"name": "all", "backends": ["a", "b"]}]},
            "state": {"backend": "redis", "url": redis_url, "timeout_ms": 30_000},
            "log": {"enabled": False}, **top}


def replica(cfg: dict) -> Router:
    router = Router(load_config(cfg), log=False, source="server")
    router.rate_limits.clock = lambda: NOW
    return router


async def test_an_rpm_limit_holds_across_two_replicas_and_its_keys_expire_once_refilled(sim, redis_server):
    replicas = [replica(config(sim, redis_server.url, a={"rpm": 3})) for _ in range(2)]
    results = [await replicas[i % 2].acomplete("hi") for i in range(10)]
    assert sim.stats("m-a")["requests"] == 3 and sim.stats("m-b")["requests"] == 7
    assert [r.backend for r in results].count("a") == 3  # and no request failed
    # A replica whose last view of the bucket was stale picked `a`; Redis refused the take, and
    # the request went on to `b` at once.
    assert any(isinstance(f, AtRateLimit) for r in results for f in r.failures)
    for router in replicas:
        # A take refused in Redis (the other replica had used the limit up) is no failure.
        assert router.breakers["a"].state == "closed" and router.breakers["a"]._failures == 0
        assert router.decide([{"role": "user", "content": "hi"}]).chosen == "b"
    limiter = replicas[0].rate_limits
    assert isinstance(limiter, RedisRateLimiter)
    client = redis.Redis.from_url(redis_server.url)
    [key] = limiter.keys("a")
    assert 0 < client.pttl(key) <= 61_000  # gone once the bucket would be full again anyway
    for router in replicas:
        await router.aclose()


async def test_with_redis_stopped_mid_run_no_request_fails_and_each_replica_limits_on_its_own(sim, redis_server):
    first, second = (replica(config(sim, redis_server.url, a={"rpm": 3})) for _ in range(2))
    while sim.stats("m-a")["requests"] < 3:  # use the shared limit up through the first replica
        await first.acomplete("hi")
    before = sim.stats("m-a")["requests"]
    redis_server.stop()
    answers = [(await first.acomplete("hi")).backend for _ in range(3)]
    answers += [(await second.acomplete("hi")).backend for _ in range(5)]
    assert len(answers) == 8  # every one answered
    assert answers[:3] == ["b", "b", "b"]  # the first replica goes on from the level it last saw: empty
    # The second never took from `a`: its own bucket starts full, so `a` gets 3 more (per replica now).
    assert sim.stats("m-a")["requests"] == before + 3
    # (the first replica's decisions passed `a` over without asking Redis; the second found it down)
    assert second.rate_limits.link is not None and second.rate_limits.link.outages == 1
    for router in (first, second):
        await router.aclose()


async def test_after_redis_restarts_the_fleets_buckets_start_at_the_replicas_levels_not_full(sim, redis_server):
    cfg = config(sim, redis_server.url, a={"rpm": 3})
    cfg["state"].update(retry_ms=1, refresh_ms=0)  # ask the new Redis at once; every decision reads the levels
    first, second = replica(cfg), replica(cfg)
    for i in range(3):  # the shared limit used up, through both
        await (first, second)[i % 2].acomplete("hi", model="a")
    assert sim.stats("m-a")["requests"] == 3
    for router in (first, second):
        await router.refresh()  # as a replica serving requests does: its view is the fleet's
    redis_server.stop()
    redis_server.start()  # the same port, empty: every bucket is gone
    refused = 0
    for i in range(6):
        with contextlib.suppress(RateLimitExceeded):
            await (first, second)[i % 2].acomplete("hi", model="a")
            continue
        refused += 1
    assert refused == 6 and sim.stats("m-a")["requests"] == 3  # no replica found a full bucket
    limiter = first.rate_limits
    assert isinstance(limiter, RedisRateLimiter) and limiter.link is not None and limiter.link.up
    [key] = limiter.keys("a")
    assert float(redis.Redis.from_url(redis_server.url).hget(key, "level") or -1) == 0.0  # seeded, in Redis
    for router in (first, second):
        await router.aclose()


def _counter(metrics: str, name: str, labels: str) -> float:
    """A counter's value in Prometheus text (0 when the series is absent)."""
    prefix = f"{name}{{{labels}}} "
    return sum(float(line.removeprefix(prefix)) for line in metrics.splitlines() if line.startswith(prefix))


def test_two_route_serve_replicas_share_backend_and_key_limits_and_answer_429_with_retry_after(sim, redis_server):
    cfg = config(sim, redis_server.url, a={"rpm": 3},
                 server={"keys": {"alice": {"key": "${ALICE_KEY}", "rpm": 2}, "bob": {"key": "${BOB_KEY}"}}})
    keys = {"alice": ALICE, "bob": BOB}
    with (RouteServer(replica(cfg), api_keys=keys) as one, RouteServer(replica(cfg), api_keys=keys) as two,
          httpx.Client(timeout=30) as client):
        def ask(server, key: str, path: str = "/v1/chat/completions", model: str = "a") -> httpx.Response:
            body: dict = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}
            if path == "/v1/responses":
                body = {"model": model, "input": "hi"}
            return client.post(server.url + path, json=body, headers={"authorization": f"Bearer {key}"})

        forced = [ask((one, two)[i % 2], BOB) for i in range(5)]
        messages, responses = ask(one, BOB, "/v1/messages"), ask(two, BOB, "/v1/responses")
        routed = ask(two, BOB, model="auto")
        assert sim.stats("m-a")["requests"] == 3  # exactly the limit, over both replicas
        alice = [ask(one, ALICE, model="b"), ask(two, ALICE, model="b"), ask(one, ALICE, model="b")]
        to_b = sim.stats("m-b")["requests"]
        scraped = [client.get(server.url + "/metrics", headers={"authorization": f"Bearer {BOB}"}).text for server in (one, two)]
    refusals = {labels: sum(_counter(text, "route_rate_limited_total", labels) for text in scraped)
                for labels in ('kind="backend",name="a"', 'kind="key",name="alice"', 'kind="key",name="bob"')}
    # two forced, the /v1/messages and the /v1/responses one; the routed one passed `a` over unasked
    assert refusals == {'kind="backend",name="a"': 4, 'kind="key",name="alice"': 1, 'kind="key",name="bob"': 0}
    assert [r.status_code for r in forced] == [200, 200, 200, 429, 429]
    for refused in (*forced[3:], messages, responses):
        assert refused.status_code == 429 and refused.headers["retry-after"] == "20"
    assert forced[3].json()["error"]["code"] == "rate_limit_exceeded"
    assert messages.json()["error"]["type"] == "rate_limit_error"
    assert responses.json()["error"]["type"] == "rate_limit_error"
    assert routed.status_code == 200 and routed.headers["x-route-answered-by"] == "b"
    # alice's rpm 2 is shared too: her third request, on the first replica again, is refused unrouted
    assert [r.status_code for r in alice] == [200, 200, 429]
    assert "API key 'alice'" in alice[2].json()["error"]["message"] and alice[2].headers["retry-after"] == "30"
    assert to_b == 3  # routed + alice's two


def test_the_cli_reads_the_shared_buckets_explains_and_exits_with_one_paragraph(sim, redis_server, tmp_path):
    cfg = config(sim, redis_server.url, a={"tpm": 100})
    path = tmp_path / "route.yaml"
    path.write_text(yaml.safe_dump(cfg))
    loaded = load_config(str(path))
    # Another replica's answer left `a` deep in debt: (10000 - 100) tokens at 100 a minute.
    limiter = Router(loaded, log=False).rate_limits

    async def spend() -> None:
        await limiter.settle("a", 0, 10_000)
        assert limiter.link is not None
        await limiter.link.aclose()

    asyncio.run(spend())
    runner = CliRunner()
    explained = runner.invoke(app, ["ask", "--explain", "--json", "--no-log", "-c", str(path), "hi"])
    assert explained.exit_code == 0, explained.output
    decision = json.loads(explained.stdout)
    assert decision["chosen"] == "b"
    assert "a is at its rate limit (tpm 100), free in" in decision["reason"]
    refused = runner.invoke(app, ["ask", "-m", "a", "--no-log", "-c", str(path), "hi"])
    assert refused.exit_code == 3
    assert "RateLimitExceeded" in refused.stderr and "at its rate limit (tpm 100)" in refused.stderr
    assert "try again in 59" in refused.stderr and "Traceback" not in refused.output
    assert sim.stats("m-a")["requests"] == 0
    with pytest.raises(RateLimitExceeded) as caught:
        Router(loaded, log=False).complete("hi", model="a")
    assert caught.value.retry_after_s is not None and caught.value.retry_after_s > 5_000
