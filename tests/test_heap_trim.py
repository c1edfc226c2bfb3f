"""After a burst of requests, route serve hands freed heap back (router/server/heap_trim.py): once no
request has finished for a while, or now and then under steady load; never while nothing was served."""

from __future__ import annotations

import asyncio
import sys
import time

import httpx
import pytest

from router.server import RouteServer
from router.server.heap_trim import HeapTrim, malloc_trim
from tests.helpers import make_router

TOKEN = "t" * 32


@pytest.mark.unit
def test_a_burst_is_trimmed_once_it_is_over_and_an_idle_server_never():
    calls: list[int] = []
    served = [0]
    heap = HeapTrim(lambda pad: calls.append(pad) or 1, lambda: served[0], quiet_s=0.02, busy_every_s=60)

    async def scenario():
        task = asyncio.create_task(heap.run())
        await asyncio.sleep(0.2)  # nothing served: nothing to give back
        assert calls == []
        served[0] += 50
        deadline = time.monotonic() + 30  # the burst is over: a trim comes (however busy the machine)
        while not calls and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # ten quiet periods more: nothing new to trim
        task.cancel()
        assert calls == [0]

    asyncio.run(scenario())


@pytest.mark.unit
def test_steady_load_is_trimmed_now_and_then():
    calls: list[int] = []
    served = [0]
    heap = HeapTrim(lambda pad: calls.append(pad) or 1, lambda: served[0], quiet_s=0.05, busy_every_s=0.2)

    async def steady():
        # A request finishes every 10 ms, so a second is never quiet; trims still come.
        task = asyncio.create_task(heap.run())
        loop = asyncio.get_running_loop()
        end = loop.time() + 1.0
        while loop.time() < end:
            served[0] += 1
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(steady())
    assert calls and heap.trims == len(calls)


@pytest.mark.unit
def test_without_malloc_trim_nothing_runs():
    heap = HeapTrim(None, lambda: 1, quiet_s=0.01)
    asyncio.run(asyncio.wait_for(heap.run(), 1.0))  # returns at once instead of looping
    assert heap.trims == 0


@pytest.mark.unit
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_glibc_trim_is_found_and_runs():
    trim = malloc_trim()
    assert trim is not None
    assert trim(0) in (0, 1)


@pytest.mark.integration
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_route_serve_trims_after_its_requests(sim):
    router = make_router(sim)
    with RouteServer(router, api_key=TOKEN) as server:
        heap = server.app.state.heap
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False) as client:
            for _ in range(5):
                answer = client.post("/chat/completions", json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]})
                assert answer.status_code == 200
        deadline = time.monotonic() + 30  # a liveness wait: the trim comes a quiet second after the burst
        while heap.trims == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert heap.trims >= 1 and heap.served == 5
