"""Retries that add up, measured: what a retrying client costs a dead upstream, and what a
refused connection adds before the fallback answers.

    python benchmarks/retries.py [--cooldown-ms 1000] [--requests 50]

1. A client retrying at once, 30 times (as Codex does), against `route serve` whose only
   backend answers 500: upstream calls per breaker cooldown, and the statuses and Retry-After
   the client got. Target: at most 5 upstream calls per cooldown.
2. A routed request whose first choice refuses the connection (nothing listening), falling
   back to a healthy backend, against the same request routed to the healthy one alone, in the
   same run, interleaved: the added milliseconds (median, p90). Target: under 50 ms.

Everything runs against the simulated server on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx

from backends.simulator import SimServer
from router import Router
from router.config_loader import load_config
from router.server import RouteServer


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dead_upstream(cooldown_ms: float) -> None:
    with SimServer(profiles={"dead": {"ttft_s": 0.0, "fault": "500"}}) as sim:
        config = {"backends": {"only": {"kind": "openai", "model": "dead", "base_url": sim.base_url}},
                  "routing": {"tiers": [{"name": "all", "backends": ["only"]}],
                              "breaker": {"failures": 3, "cooldown_ms": cooldown_ms}}, "log": {"enabled": False}}
        with RouteServer(Router(load_config(config), source="server")) as srv:
            body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
            started = time.monotonic()
            answers = [httpx.post(f"{srv.base_url}/chat/completions", json=body, timeout=30) for _ in range(30)]
            window_s = time.monotonic() - started
            calls = sim.stats("dead")["requests"]
    cooldowns = max(1.0, window_s / (cooldown_ms / 1000))
    statuses = sorted({a.status_code for a in answers})
    waits = sorted({a.headers.get("retry-after") for a in answers if a.headers.get("retry-after")})
    print(f"dead upstream: 30 client retries in {window_s:.2f} s ({cooldowns:.1f} breaker cooldowns of "
          f"{cooldown_ms:.0f} ms) cost {calls} upstream calls: {calls / cooldowns:.1f} per cooldown "
          f"(target <= 5); statuses {statuses}, Retry-After {waits or '-'}")


async def _timed(router: Router) -> float:
    started = time.perf_counter()
    result = await router.acomplete("hi", max_tokens=8)
    assert result.text
    return time.perf_counter() - started


async def refused_failover(requests: int) -> None:
    with SimServer(profiles={"ok": {"ttft_s": 0.0, "tokens_per_s": None, "answer_tokens": 8}}) as sim:
        ok = {"kind": "openai", "model": "ok", "base_url": sim.base_url}
        gone = {"kind": "openai", "model": "ok", "base_url": f"http://127.0.0.1:{_closed_port()}/v1"}
        direct = Router(load_config({"backends": {"ok": ok}, "routing": {"tiers": [{"name": "all", "backends": ["ok"]}]},
                                     "log": {"enabled": False}}))
        # A breaker that never opens: every request pays the refused connection, as the first one does.
        failover = Router(load_config({
            "backends": {"gone": gone, "ok": ok},
            "routing": {"tiers": [{"name": "first", "below": 0.99, "backends": ["gone"]},
                                  {"name": "then", "backends": ["ok"]}],
                        "breaker": {"failures": 1_000_000, "cooldown_ms": 1}}, "log": {"enabled": False}}))
        for _ in range(10):  # warm both: connections, first-use imports
            await _timed(direct)
            await _timed(failover)
        added = []
        for _ in range(requests):
            base = await _timed(direct)
            added.append((await _timed(failover) - base) * 1000)
        await direct.aclose()
        await failover.aclose()
    added.sort()
    p90 = added[int(0.9 * (len(added) - 1))]
    print(f"refused connection, then fallback: adds {statistics.median(added):.1f} ms median, {p90:.1f} ms p90 "
          f"over {requests} interleaved requests (target < 50 ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cooldown-ms", type=float, default=1000.0)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    dead_upstream(args.cooldown_ms)
    asyncio.run(refused_failover(args.requests))


if __name__ == "__main__":
    main()
