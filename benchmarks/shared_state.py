"""What sharing state through Redis adds per request, against the simulated server.

    python benchmarks/shared_state.py [--requests 600]

Needs redis-server (apt-get install redis-server); one is started on a free loopback port. The
same zero-delay simulated model is called through three Routers, interleaved so all see the same
machine noise: (1) state in memory (the baseline), (2) Redis with the defaults (a refresh at most
every 500 ms, learned latency flushed every 5 s) and (3) Redis at its most eager (`refresh_ms: 0`,
`flush_interval_ms: 0`: a pipelined read before every decision, a Lua merge after every request).
Prints p50/p99 of each and what each Redis setting adds to the baseline. Target: the default
adds < 0.5 ms at p50.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from backends.simulator import SimServer
from router import Router

MODEL = "bench-zero-delay"
PROMPT = "Give me a one-line summary of the French Revolution."


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _start_redis(workdir: str) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("needs redis-server: apt-get install redis-server")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                "no", "--dir", workdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    process.kill()
    sys.exit("redis-server did not start")


def _router(base_url: str, state: dict | None, flush_ms: float = 5000) -> Router:
    config = {
        "backends": {"local": {"kind": "openai", "model": MODEL, "base_url": base_url}},
        "routing": {"tiers": [{"name": "all", "backends": ["local"]}], "latency": {"flush_interval_ms": flush_ms}},
        "log": {"enabled": False},
        **({"state": state} if state else {}),
    }
    return Router.from_config(config, persist=state is not None)


async def run(requests: int, redis_url: str) -> None:
    os.environ["ROUTE_BENCH_REDIS_URL"] = redis_url
    url = "${ROUTE_BENCH_REDIS_URL}"
    with SimServer(profiles={MODEL: {"ttft_s": 0.0, "answer_tokens": 20}}) as sim:
        routers = {
            "memory (baseline)": _router(sim.base_url, None),
            "redis, defaults": _router(sim.base_url, {"backend": "redis", "url": url, "prefix": "d:"}),
            "redis, refresh 0": _router(sim.base_url, {"backend": "redis", "url": url, "prefix": "e:",
                                                       "refresh_ms": 0}, flush_ms=0),
        }
        times: dict[str, list[float]] = {name: [] for name in routers}
        for index in range(requests + 50):  # the first 50 warm every path
            for name, router in routers.items():
                started = time.perf_counter()
                await router.acomplete(PROMPT)
                if index >= 50:
                    times[name].append((time.perf_counter() - started) * 1000)
        for router in routers.values():
            await router.aclose()
    base = statistics.median(times["memory (baseline)"])
    print(f"requests: {requests} per path, sequential, interleaved; simulated zero-delay model; local redis-server")
    print(f"{'state':<20} {'p50 ms':>8} {'p99 ms':>8} {'p50 added ms':>13} {'p50 ratio':>10}")
    for name, values in times.items():
        p50 = statistics.median(values)
        print(f"{name:<20} {p50:>8.3f} {_quantile(values, 0.99):>8.3f} {p50 - base:>13.3f} {p50 / base:>10.2f}")
    added = statistics.median(times["redis, defaults"]) - base
    print(f"target: the defaults add < 0.5 ms at p50: {'met' if added < 0.5 else 'MISSED'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["ROUTE_HOME"] = home
        redis, url = _start_redis(home)
        try:
            asyncio.run(run(args.requests, url))
        finally:
            redis.terminate()
            redis.wait()


if __name__ == "__main__":
    main()
