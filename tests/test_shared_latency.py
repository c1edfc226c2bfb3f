"""Learned latency merged inside a real redis-server: the Lua merge agrees with the Python one
(policies/latency.py), and merges from several processes at once lose nothing."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from redis import Redis

from policies.latency import LatencyModel
from router.state.latency_merge import RedisLatency
from router.state.redis_link import RedisLink

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def _samples(rng: random.Random, decoding: str = "autoregressive") -> LatencyModel:
    """A fresh model with a few of every kind of observation."""
    model = LatencyModel(decoding, half_life=5.0)  # a short half-life, so decay and pruning happen
    for _ in range(rng.randint(1, 8)):
        kind = rng.random()
        now = rng.uniform(0, 1e9)
        if kind < 0.5:
            first = rng.uniform(0.001, 2.0)
            model.observe(first + rng.uniform(0, 5), first_s=first, output_tokens=rng.randint(1, 900),
                          canvases=rng.randint(1, 4), truncated=rng.random() < 0.2, now=now)
        elif kind < 0.7:
            model.observe(rng.uniform(0.01, 9), output_tokens=rng.randint(2, 400), now=now)
        elif kind < 0.85:
            model.observe_failure(now=now)
        else:
            model.observe_censored(rng.uniform(0.1, 3), now=now)
    return model


def _close(a: dict, b: dict) -> None:
    """Equal up to the 14 significant digits Redis's cjson writes."""
    assert a.keys() == b.keys()
    for key, value in a.items():
        if isinstance(value, dict):
            _close(value, b[key])
        elif isinstance(value, float | int) and not isinstance(value, bool):
            assert math.isclose(value, b[key], rel_tol=1e-12, abs_tol=1e-300), key
        else:
            assert value == b[key], key


async def test_the_lua_merge_is_the_python_merge(redis_server):
    rng = random.Random(7)
    sink = RedisLatency(RedisLink(redis_server.url, prefix="t:", timeout_s=30))
    for decoding in ("autoregressive", "diffusion", "autoregressive"):  # a change of decoding starts over
        expected = LatencyModel(decoding, half_life=5.0)
        for _ in range(40):
            fresh = _samples(rng, decoding)
            merged = await sink.merge({"m": fresh})
            assert merged is not None
            expected = expected.merged(fresh)
            _close(merged["m"], json.loads(json.dumps(expected.to_dict())))
            loaded = LatencyModel(decoding, half_life=5.0)
            assert loaded.load_dict(merged["m"])
            expected = loaded  # go on from what Redis holds, as replicas do
    await sink.link.aclose()


_WRITER = textwrap.dedent("""
    import asyncio, sys
    from policies.latency import LatencyModel
    from router.state.latency_merge import RedisLatency
    from router.state.redis_link import RedisLink

    async def main(url, n):
        link = RedisLink(url, prefix="stress:", timeout_s=120)
        sink = RedisLatency(link)
        await link.call(lambda r: r.ping(), None)  # connected before the start signal
        print("ready", flush=True)
        sys.stdin.readline()

        def one(i):
            model = LatencyModel()
            model.observe(0.2 + i % 7 / 100, first_s=0.05 + i % 5 / 100, output_tokens=20, now=i)
            return model

        merged = await asyncio.gather(*(sink.merge({"backend": one(i)}) for i in range(n)))
        print(sum(m is None for m in merged), link.outages, flush=True)
        await link.aclose()

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""")


def test_four_processes_merging_500_times_at_once_lose_no_sample(redis_server):
    processes, merges = 4, 500
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, redis_server.url, str(merges)], cwd=ROOT,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for _ in range(processes)]
    try:
        for writer in writers:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        for writer in writers:  # all start together
            assert writer.stdin is not None
            writer.stdin.write("go\n")
            writer.stdin.flush()
        results = [writer.communicate(timeout=300)[0].split() for writer in writers]
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
    assert all(w.returncode == 0 for w in writers)
    assert results == [["0", "0"]] * processes  # every merge reached Redis; no outage

    with Redis.from_url(redis_server.url) as redis:
        state = json.loads(redis.get("stress:latency:backend"))
    model = LatencyModel()
    assert model.load_dict(state)
    total = processes * merges
    keep = model.first.keep
    for hist in (model.first, model.unit, model.answer, model.failures):
        assert hist.count == total
        # Each sample's weight decays by `keep` per later sample, in whatever order they came.
        assert math.isclose(hist.weight, (1 - keep**total) / (1 - keep), rel_tol=1e-9)
    assert model.failures.total == 0.0 and model.last_ts == merges - 1
