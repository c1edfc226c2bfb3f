"""What the Router adds on top of a direct HTTP call, against the simulated server.

    python benchmarks/overhead.py [--requests 600]

The same zero-delay simulated model is called (1) with a bare aiohttp ClientSession POST (the client the openai kind uses) and
(2) through `Router.acomplete` with the openai backend, interleaved so both see the same machine
noise. Prints p50/p99 of each and the difference. Target: p50 added < 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import aiohttp

from backends.simulator import SimServer
from router import Router

MODEL = "bench-zero-delay"
PROMPT = "Give me a one-line summary of the French Revolution."


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(requests: int) -> None:
    with SimServer(profiles={MODEL: {"ttft_s": 0.0, "answer_tokens": 20}}) as sim:
        config = {
            "backends": {"local": {"kind": "openai", "model": MODEL, "base_url": sim.base_url}},
            "routing": {"tiers": [{"name": "all", "backends": ["local"]}]},
        }
        router = Router.from_config(config)
        body = {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}]}
        direct_ms, routed_ms = [], []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as client:
            url = sim.base_url + "/chat/completions"
            for index in range(requests + 50):  # the first 50 warm both paths
                started = time.perf_counter()
                async with client.post(url, json=body) as response:
                    (await response.json())["choices"][0]["message"]["content"]
                direct = time.perf_counter() - started
                started = time.perf_counter()
                await router.acomplete(PROMPT)
                routed = time.perf_counter() - started
                if index >= 50:
                    direct_ms.append(direct * 1000)
                    routed_ms.append(routed * 1000)
        await router.aclose()
    added = [r - d for r, d in zip(routed_ms, direct_ms)]
    print(f"requests: {requests} per path, sequential, interleaved; simulated zero-delay model")
    print(f"{'path':<22} {'p50 ms':>8} {'p99 ms':>8}")
    print(f"{'direct aiohttp':<22} {statistics.median(direct_ms):>8.3f} {_quantile(direct_ms, 0.99):>8.3f}")
    print(f"{'Router.acomplete':<22} {statistics.median(routed_ms):>8.3f} {_quantile(routed_ms, 0.99):>8.3f}")
    p50_added = statistics.median(routed_ms) - statistics.median(direct_ms)
    p99_added = _quantile(routed_ms, 0.99) - _quantile(direct_ms, 0.99)
    print(f"added by the router: p50 {p50_added:.3f} ms, p99 {p99_added:.3f} ms "
          f"(median of paired differences {statistics.median(added):.3f} ms)")
    print(f"target p50 added < 1 ms: {'met' if p50_added < 1.0 else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["ROUTE_HOME"] = home  # keep the benchmark's request log out of the user's
        asyncio.run(run(args.requests))


if __name__ == "__main__":
    main()
