"""Retries that add up, measured: what a retrying client costs a dead upstream, how long it
takes to show its user the error, and what a refused connection adds before the fallback answers.

    python benchmarks/retries.py [--full] [--cooldown-ms 1000] [--requests 50] [--clients codex,aider,...]
                                 [--backends 1] [--seed 38]

By default a short run (about a minute): outages of 2 and 10 s and a 5 s storm; `--full` adds
the 60 s outage and makes the storm 30 s.

1. A client retrying at once, 30 times (as Codex does), against `route serve` whose only
   backend answers 500: upstream calls per breaker cooldown, and the statuses and Retry-After
   the client got. Target: at most 5 upstream calls per cooldown.
2. A routed request whose first choice refuses the connection (nothing listening), falling
   back to a healthy backend, against the same request routed to the healthy one alone, in the
   same run, interleaved: the added milliseconds (median, p90). Target: under 50 ms.
3. Real clients' retry schedules (benchmarks/client_schedules.py: Codex honouring Retry-After,
   aider through litellm's OpenAI SDK, OpenCode through the AI SDK, Claude Code), each against
   an upstream that answers every request 500: first going direct (the baseline, this run),
   then through `route serve` (default breaker settings; `--backends 3` puts three tiers on
   the one dead upstream). Targets, per client: upstream calls at most the client's own
   requests, and time until it gives up no shorter than going direct, or than LONGEST_OUTAGE_S
   (a client that gives up sooner through route fails tasks it would finish direct: Codex did,
   in 2.8 s against 24 s, while every 503 said "0"). Through route a client obeying Retry-After
   waits at the probe pace (1 s doubling to 16 s): longer than direct where it has more retries
   than its own backoff spends (Codex), shorter where its backoff outgrows 16 s (Claude Code's
   goes to 32 s: about 80 s through route against 170 s direct); the ratio is printed.
4. Outages of 2, 10 and 60 s that end, and a storm: benchmarks/outages.py.

   Time is virtual where waiting would take minutes: a client's backoff does not sleep, it
   advances a clock (real monotonic time plus the waits so far), and the router's breakers
   read the same clock, so their probes fall due as they would had the client really waited.
   A client's time to the error = the real time its requests took + the waits it slept.

Everything runs against the simulated server on loopback. Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx

from backends.simulator import SimServer
from benchmarks.client_schedules import CLIENTS, Reply
from benchmarks.outages import outages, storm
from policies.breaker import BreakerBoard
from router import Router
from router.config_loader import load_config
from router.server import RouteServer

LONGEST_OUTAGE_S = 60.0  # the longest outage a client must outlast through route as it does direct (issue 47)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dead_upstream(cooldown_ms: float) -> bool:
    with SimServer(profiles={"dead": {"ttft_s": 0.0, "fault": "500"}}) as sim:
        config = {"backends": {"only": {"kind": "openai", "model": "dead", "base_url": sim.base_url}},
                  "routing": {"tiers": [{"name": "all", "backends": ["only"]}],
                              "breaker": {"failures": 3, "cooldown_ms": cooldown_ms}}, "log": {"enabled": False}}
        with RouteServer(Router(load_config(config), source="server", clients_retry=True)) as srv:
            body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
            started = time.monotonic()
            answers = [httpx.post(f"{srv.base_url}/chat/completions", json=body, timeout=30) for _ in range(30)]
            window_s = time.monotonic() - started
            calls = sim.stats("dead")["requests"]
    cooldowns = max(1.0, window_s / (cooldown_ms / 1000))
    statuses = sorted({a.status_code for a in answers})
    waits = sorted({a.headers.get("retry-after") for a in answers if a.headers.get("retry-after")})
    met = calls / cooldowns <= 5 and all(a.headers.get("retry-after") is not None for a in answers)
    print(f"dead upstream: 30 client retries in {window_s:.2f} s ({cooldowns:.1f} breaker cooldowns of "
          f"{cooldown_ms:.0f} ms) cost {calls} upstream calls: {calls / cooldowns:.1f} per cooldown "
          f"(target <= 5, Retry-After on every 503); statuses {statuses}, Retry-After {waits or '-'}"
          f"{'' if met else '  MISSED'}")
    return met


async def _timed(router: Router) -> float:
    started = time.perf_counter()
    result = await router.acomplete("hi", max_tokens=8)
    assert result.text
    return time.perf_counter() - started


async def refused_failover(requests: int) -> bool:
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
    met = statistics.median(added) < 50
    print(f"refused connection, then fallback: adds {statistics.median(added):.1f} ms median, {p90:.1f} ms p90 "
          f"over {requests} interleaved requests (target < 50 ms){'' if met else '  MISSED'}")
    return met


class VirtualClock:
    """Real monotonic time plus the waits the replayed client slept instead of sleeping."""

    def __init__(self) -> None:
        self.waited = 0.0

    def now(self) -> float:
        return time.monotonic() + self.waited

    def sleep(self, seconds: float) -> None:
        self.waited += max(0.0, seconds)


_PATHS = {"chat": "/chat/completions", "messages": "/messages", "responses": "/responses"}


def _body(protocol: str) -> dict:
    if protocol == "responses":
        return {"model": "auto", "input": "fix the failing test", "stream": True}
    body = {"model": "dead", "messages": [{"role": "user", "content": "fix the failing test"}], "stream": True}
    return {**body, "max_tokens": 256} if protocol == "messages" else body


def _sender(http: httpx.Client, base_url: str, protocol: str, model: str) -> tuple[Callable[[], Reply], list[int]]:
    """`send` for a replay, and the list its requests are counted in."""
    sent: list[int] = []
    body = {**_body(protocol), "model": model}

    def send() -> Reply:
        sent.append(1)
        with http.stream("POST", base_url + _PATHS[protocol], json=body) as response:
            response.read()
            return Reply(response.status_code, {k.lower(): v for k, v in response.headers.items()})

    return send, sent


def _replay(name: str, send: Callable[[], Reply], seed: int) -> float:
    """Run client `name` to its end; its virtual seconds until it gave up."""
    replay, _, _ = CLIENTS[name]
    clock = VirtualClock()
    started = clock.now()
    replay(send, clock.sleep, random.Random(seed))
    return clock.now() - started


def _route_config(sim: SimServer, backends: int) -> dict:
    names = [f"b{i}" for i in range(backends)]
    specs = {name: {"kind": "openai", "model": "dead", "base_url": sim.base_url} for name in names}
    tiers = [{"name": f"t{i}", "below": round((i + 1) / backends, 3), "backends": [name]} for i, name in enumerate(names)]
    tiers[-1].pop("below")
    return {"backends": specs, "routing": {"tiers": tiers}, "log": {"enabled": False}}


def _through_route(sim: SimServer, name: str, backends: int, seed: int) -> tuple[int, int, float]:
    """(client requests, upstream calls, virtual seconds) for `name` through a fresh `route serve`."""
    _, protocol, _ = CLIENTS[name]
    router = Router(load_config(_route_config(sim, backends)), source="server", clients_retry=True)
    clock = VirtualClock()
    # The breakers on the client's clock: a probe falls due when it would have, had the client slept.
    router.breakers = router.calls.breakers = BreakerBoard(clock.now, router.breakers.settings)
    before = sim.stats("dead")["requests"]
    with RouteServer(router) as srv, httpx.Client(timeout=30) as http:
        send, sent = _sender(http, srv.base_url, protocol, "auto")
        replay, _, _ = CLIENTS[name]
        started = clock.now()
        replay(send, clock.sleep, random.Random(seed))
        elapsed = clock.now() - started
    return len(sent), sim.stats("dead")["requests"] - before, elapsed


def clients_against_dead_upstream(names: list[str], backends: int, seed: int) -> bool:
    met = True
    print(f"real clients against a dead upstream (HTTP 500), direct vs through route serve ({backends} backend(s) "
          "on it); time is virtual (the waits), plus the real time of the requests")
    print(f"  {'client':<14} {'requests':>8}  {'direct: calls':>13} {'time':>8}  {'route: calls':>12} {'time':>8}  "
          f"{'time ratio':>10}  target: calls <= requests, time >= direct or {LONGEST_OUTAGE_S:.0f} s")
    with SimServer(profiles={"dead": {"ttft_s": 0.0, "fault": "500"}}) as sim, httpx.Client(timeout=30) as http:
        for name in names:
            _, protocol, _ = CLIENTS[name]
            direct_protocol = "messages" if protocol == "messages" else "chat"  # the simulator has no /responses
            before = sim.stats("dead")["requests"]
            send, sent = _sender(http, sim.base_url, direct_protocol, "dead")
            direct_s = _replay(name, send, seed)
            direct_calls = sim.stats("dead")["requests"] - before
            requests, calls, route_s = _through_route(sim, name, backends, seed)
            ok = calls <= requests and route_s >= min(direct_s, LONGEST_OUTAGE_S)
            met = met and ok
            print(f"  {name:<14} {requests:>8}  {direct_calls:>13} {direct_s:>7.1f}s  {calls:>12} {route_s:>7.1f}s  "
                  f"{route_s / direct_s:>10.2f}  {'met' if ok else 'MISSED'} (direct made {len(sent)} requests)")
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cooldown-ms", type=float, default=1000.0)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"of {', '.join(CLIENTS)}")
    parser.add_argument("--backends", type=int, default=1, help="backends (tiers) on the one dead upstream")
    parser.add_argument("--seed", type=int, default=38, help="the clients' jitter, the same direct and through route")
    parser.add_argument("--full", action="store_true", help="the 60 s outage too, and a 30 s storm (5 s without)")
    args = parser.parse_args()
    unknown = set(args.clients.split(",")) - set(CLIENTS)
    if unknown or args.backends < 1:
        sys.exit(f"--clients takes {', '.join(CLIENTS)} (got {', '.join(sorted(unknown))}); --backends at least 1")
    met = dead_upstream(args.cooldown_ms)
    met = asyncio.run(refused_failover(args.requests)) and met
    met = clients_against_dead_upstream(args.clients.split(","), args.backends, args.seed) and met
    met = outages(args.clients.split(","), [2.0, 10.0, 60.0] if args.full else [2.0, 10.0], args.seed) and met
    met = storm(30.0 if args.full else 5.0) and met
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
