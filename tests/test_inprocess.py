"""`router.openai_client()` / `async_openai_client()`: the real openai SDK answered by the
server app in process, streams arriving piece by piece as they are produced, and a client that
stops reading stops the upstream call."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.helpers import make_router

pytestmark = pytest.mark.integration

ASK = [{"role": "user", "content": "hi"}]


async def test_the_async_client_streams_pieces_as_they_are_produced(sim):
    sim.update_profile("m-small", ttft_s=0.05, tokens_per_s=40, answer_tokens=12)
    router = make_router(sim)
    client = router.async_openai_client()
    arrivals = []
    stream = await client.chat.completions.create(model="small", messages=ASK, stream=True)
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append((time.perf_counter(), chunk.choices[0].delta.content))
    await router.aclose()
    assert len(arrivals) >= 6
    # Spread over the answer's ~0.3 s, not one burst at the end (httpx's ASGITransport buffers).
    assert arrivals[-1][0] - arrivals[0][0] > 0.1
    assert "".join(t for _, t in arrivals).startswith("[simulated m-small]")


async def test_the_async_client_answers_plain_calls_with_the_routers_headers(sim):
    router = make_router(sim)
    client = router.async_openai_client()
    raw = await client.chat.completions.with_raw_response.create(model="auto", messages=ASK)
    completion = raw.parse()
    await router.aclose()
    assert completion.choices[0].message.content.startswith("[simulated m-small]")
    assert raw.headers["x-route-backend"] == "small" and raw.headers["x-route-tier"] == "low"


async def test_closing_the_stream_early_cancels_the_upstream_call(sim):
    sim.update_profile("m-small", ttft_s=0.01, tokens_per_s=20, answer_tokens=200)
    router = make_router(sim)
    client = router.async_openai_client()
    stream = await client.chat.completions.create(model="small", messages=ASK, stream=True)
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    await stream.close()
    for _ in range(200):  # the simulator counts the cancellation once its request task ends
        if sim.stats("m-small")["cancelled"] == 1:
            break
        await asyncio.sleep(0.01)
    await router.aclose()
    assert sim.stats("m-small")["cancelled"] == 1 and sim.stats("m-small")["completed"] == 0


def test_the_sync_client_streams_too(sim):
    sim.update_profile("m-small", ttft_s=0.02, tokens_per_s=50, answer_tokens=8)
    router = make_router(sim)
    client = router.openai_client()
    pieces = [c.choices[0].delta.content for c in client.chat.completions.create(model="small", messages=ASK, stream=True)
              if c.choices and c.choices[0].delta.content]
    plain = client.chat.completions.create(model="small", messages=ASK)
    client.close()
    assert len(pieces) >= 4 and plain.choices[0].message.content == "".join(pieces)
