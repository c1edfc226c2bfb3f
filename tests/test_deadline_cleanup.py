"""A deadline closes what it started: every upstream request of a timed-out call is cancelled and
its connection closed, so nothing stays in flight at the upstream (where a paid provider would go
on generating). The cause of the old leak: the wire call shared its task with the caller, so a
deadline's cancellation and the executor's arrived together and the second one interrupted
httpcore's shielded close; the wire call now runs in a task that only ever gets one cancellation
(backends/base.py, _WireTask)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from backends.errors import AllBackendsFailed
from router import Router
from router.config_loader import parse_config
from router.server import RouteServer

pytestmark = pytest.mark.integration

CONCURRENT = 32


def _router(sim, routing: str = "") -> Router:
    text = f"""\
backends:
  stuck: {{kind: openai, model: hang-m, base_url: "{sim.base_url}", max_retries: 0}}
routing:
  tiers: [{{name: all, backends: [stuck]}}]
  breaker: {{failures: 100000}}  # every run must reach the upstream: its breaker would skip it after 3 timeouts
{routing}"""
    return Router(parse_config(text, "hang.yaml"), log=False)


async def _settled(sim, model: str) -> dict:
    """The simulator's counts once nothing is in flight (or after 30 s, whichever comes first).
    The limit only ends a failing test (a leak stays in flight for ever), so it is generous, as
    tests/waiting.py's are: a loaded machine notices the closed connections late, not never."""
    deadline = time.monotonic() + 30.0
    while (stats := sim.stats(model))["in_flight"] and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return stats


@pytest.mark.parametrize("streamed", [False, True])
async def test_concurrent_requests_to_a_hanging_upstream_leave_nothing_in_flight(sim, streamed):
    sim.update_profile("hang-m", fault="hang")
    router = _router(sim)

    async def one() -> BaseException | None:
        try:
            if streamed:
                [c async for c in router.astream("hi", deadline_s=1.0)]
            else:
                await router.acomplete("hi", deadline_s=1.0)
        except AllBackendsFailed as exc:
            return exc
        return None

    for run in range(5):
        outcomes = await asyncio.gather(*(one() for _ in range(CONCURRENT)))
        assert all(isinstance(o, AllBackendsFailed) and "deadline" in str(o) for o in outcomes)
        stats = await _settled(sim, "hang-m")
        assert stats["in_flight"] == 0, f"run {run}: {stats}"
        # Every request that reached the upstream was cancelled there (on a busy machine some are
        # cut by the deadline before they connect: those never reach it at all).
        assert stats["cancelled"] == stats["requests"] > 0, f"run {run}: {stats}"
    await router.aclose()


async def test_route_serve_clients_get_504_and_the_upstream_is_released(sim):
    sim.update_profile("hang-m", fault="hang")
    router = _router(sim, "  deadline_ms: 300\n")
    with RouteServer(router) as server:
        async with httpx.AsyncClient(timeout=30) as client:
            body = {"model": "stuck", "messages": [{"role": "user", "content": "hi"}]}
            for stream in (False, True):
                replies = await asyncio.gather(*(
                    client.post(f"{server.base_url}/chat/completions", json={**body, "stream": stream})
                    for _ in range(CONCURRENT)))
                assert {r.status_code for r in replies} == {504}, {r.status_code for r in replies}
                stats = await _settled(sim, "hang-m")
                assert stats["in_flight"] == 0, stats
