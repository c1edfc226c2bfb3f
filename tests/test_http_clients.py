"""backends/http_clients.py: requests spread over small pools, least busy first."""

from __future__ import annotations

import asyncio

import pytest

from backends.base import BackendSettings
from backends.http_clients import ClientSet
from backends.registry import build_backend
from backends.types import Request


async def test_each_lease_goes_to_the_least_busy_client_and_a_lone_caller_keeps_to_the_first():
    clients = ClientSet(shards=3)
    async with clients.lease() as a, clients.lease() as b, clients.lease() as c, clients.lease() as d:
        assert len({id(a), id(b), id(c)}) == 3
        assert d is a  # all equally busy again: the first
    for _ in range(3):
        async with clients.lease() as e:
            assert e is a
    await clients.aclose()


async def test_clients_are_made_only_when_concurrency_needs_them():
    clients = ClientSet(shards=8)
    async with clients.lease():
        pass
    assert sum(c is not None for c in clients.clients) == 1
    await clients.aclose()


def test_shards_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        ClientSet(shards=0)


async def test_concurrent_requests_spread_their_connections_over_the_clients(sim):
    backend = build_backend("openai", BackendSettings(name="local", model="sim-model", base_url=sim.base_url))
    prompt = Request(messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    answers = await asyncio.gather(*(backend.complete(prompt) for _ in range(4)))
    assert all(a.text for a in answers)
    (clients,) = backend._clients.by_loop.values()
    pools = [len(c._transport._pool.connections) for c in clients.clients if c is not None]
    assert len(pools) > 1 and sum(pools) <= 4  # spread, and no more connections than requests at once
    await backend.aclose()
