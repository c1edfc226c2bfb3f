"""Outages that end, and storms against an open breaker: the parts of benchmarks/retries.py that
issue 47 asked for (run them through it: `python benchmarks/retries.py [--full]`).

1. Real clients' retry schedules (benchmarks/client_schedules.py) against a loopback upstream
   that dies (answers 500) for 2, 10 or 60 s and comes back: first going direct (the baseline,
   this run), then through `route serve`. Time is virtual, as in retries.py: a client's wait
   advances a clock instead of sleeping, the upstream comes back when that clock passes the
   outage, and route's breakers read the same clock. Per client and outage: whether its task
   finished direct and through route, and the requests a second route received while the
   client obeyed its Retry-After (against the client's own rate direct). Targets: every task
   that finishes direct finishes through route; through route, at most 1.5 requests a second
   per client while the upstream is down (a client obeying a "0" sent thousands).
2. A storm: clients retrying without pause against `route serve` whose only upstream is dead,
   for 30 s (5 s unless --full), two client keys: the request log's rows and file size, against
   the same storm logged a row per request (the log before issue 47, measured in the same run
   with the breaker's refusals not told apart). Target: at most one row per key per second,
   plus the requests that reached the upstream.
"""

from __future__ import annotations

import contextlib
import random
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from backends.simulator import SimServer
from benchmarks.client_schedules import CLIENTS, Reply
from policies.breaker import BreakerBoard
from router import Router
from router.config_loader import load_config
from router.server import RouteServer
from router.store import request_log
from router.store.sqlite import Store

__all__ = ["outages", "storm"]

_PATHS = {"chat": "/chat/completions", "messages": "/messages", "responses": "/responses"}
_MODEL = "flaky"
_RATE_TARGET = 1.5  # requests a second one client may send through route while the upstream is down


class _Outage:
    """A virtual clock and an upstream that is down until the clock passes `outage_s`."""

    def __init__(self, sim: SimServer, outage_s: float):
        self.sim = sim
        self.waited = 0.0
        self.started = self.now()
        self.back_at = self.started + outage_s
        self.down: bool | None = None
        self.sent_down = 0  # requests sent while the upstream was down

    def now(self) -> float:
        return time.monotonic() + self.waited

    def sleep(self, seconds: float) -> None:
        self.waited += max(0.0, seconds)

    def before_send(self) -> None:
        down = self.now() < self.back_at
        if down != self.down:
            self.sim.update_profile(_MODEL, fault="500" if down else None)
            self.down = down
        self.sent_down += down


def _body(protocol: str, model: str) -> dict:
    if protocol == "responses":
        return {"model": model, "input": "fix the failing test", "stream": True}
    body = {"model": model, "messages": [{"role": "user", "content": "fix the failing test"}], "stream": True}
    return {**body, "max_tokens": 256} if protocol == "messages" else body


def _run(http: httpx.Client, base_url: str, protocol: str, model: str, name: str, outage: _Outage,
         seed: int) -> bool:
    """Replay client `name` to its end; whether its task finished (a 2xx)."""
    body = _body(protocol, model)
    finished = [False]

    def send() -> Reply:
        outage.before_send()
        with http.stream("POST", base_url + _PATHS[protocol], json=body) as response:
            response.read()
            finished[0] = response.status_code < 400
            return Reply(response.status_code, {k.lower(): v for k, v in response.headers.items()})

    replay, _, _ = CLIENTS[name]
    replay(send, outage.sleep, random.Random(seed))
    return finished[0]


def _direct(sim: SimServer, http: httpx.Client, name: str, outage_s: float, seed: int) -> tuple[bool, float]:
    _, protocol, _ = CLIENTS[name]
    outage = _Outage(sim, outage_s)
    done = _run(http, sim.base_url, "messages" if protocol == "messages" else "chat", _MODEL, name, outage, seed)
    return done, outage.sent_down / outage_s


def _through_route(sim: SimServer, http: httpx.Client, name: str, outage_s: float, seed: int) -> tuple[bool, float]:
    _, protocol, _ = CLIENTS[name]
    config = {"backends": {"up": {"kind": "openai", "model": _MODEL, "base_url": sim.base_url}},
              "routing": {"tiers": [{"name": "all", "backends": ["up"]}]}, "log": {"enabled": False}}
    router = Router(load_config(config), source="server", clients_retry=True)
    outage = _Outage(sim, outage_s)
    # The breakers on the client's clock: a probe falls due when it would have, had the client slept.
    router.breakers = router.calls.breakers = BreakerBoard(outage.now, router.breakers.settings)
    with RouteServer(router) as srv:
        done = _run(http, srv.base_url, protocol, "auto", name, outage, seed)
    return done, outage.sent_down / outage_s


def outages(names: list[str], lengths: list[float], seed: int) -> bool:
    met = True
    print("real clients against an upstream that dies and comes back (HTTP 500 meanwhile), direct vs through "
          "route serve; time is virtual (the waits), plus the real time of the requests")
    print(f"  {'client':<14} {'outage':>6}  {'direct':>8} {'req/s':>6}  {'route':>8} {'req/s':>6}  target: finished "
          f"direct => finished through route; <= {_RATE_TARGET} req/s through route")
    with SimServer(profiles={_MODEL: {"ttft_s": 0.0}}) as sim, httpx.Client(timeout=30) as http:
        for length in lengths:
            for name in names:
                direct, direct_rate = _direct(sim, http, name, length, seed)
                routed, route_rate = _through_route(sim, http, name, length, seed)
                ok = (routed or not direct) and route_rate <= _RATE_TARGET
                met = met and ok
                print(f"  {name:<14} {length:>5.0f}s  {_done(direct):>8} {direct_rate:>6.2f}  {_done(routed):>8} "
                      f"{route_rate:>6.2f}  {'met' if ok else 'MISSED'}")
    return met


def _done(finished: bool) -> str:
    return "finished" if finished else "gave up"


def _storm_client(url: str, key: str, until: float, sent: list[int]) -> None:
    body = {"model": "auto", "messages": [{"role": "user", "content": "retry at once"}]}
    with httpx.Client(timeout=30, headers={"x-api-key": key}) as http:
        while time.monotonic() < until:
            http.post(url, json=body)
            sent.append(1)


_KEYS = {"alice": "alice-storm-key-" + "a" * 24, "bob": "bob-storm-key-" + "b" * 24}


def storm(seconds: float, clients_per_key: int = 2) -> bool:
    with _row_per_request():
        base_sent, _, base_rows, base_mb = _storm(seconds, clients_per_key)
    sent, calls, rows, size_mb = _storm(seconds, clients_per_key)
    allowed = len(_KEYS) * (int(seconds) + 2) + calls
    met = rows <= allowed
    print(f"a storm: {clients_per_key * len(_KEYS)} clients ({len(_KEYS)} keys) retrying at once for {seconds:.0f} s "
          f"against a dead upstream: {sent} requests ({calls} reached it), {rows} log rows, {size_mb:.1f} MB; "
          f"logged a row per request (baseline, this run): {base_sent} requests, {base_rows} rows, {base_mb:.1f} MB; "
          f"{base_rows / max(rows, 1):.0f}x fewer rows (target <= {allowed}: a row per key per second, plus the "
          f"calls){'' if met else '  MISSED'}")
    return met


@contextlib.contextmanager
def _row_per_request() -> Iterator[None]:
    """The log before issue 47: a breaker's refusal is no different from any failure."""
    saved = request_log.refused_by_breaker
    request_log.refused_by_breaker = lambda error: False
    try:
        yield
    finally:
        request_log.refused_by_breaker = saved


def _storm(seconds: float, clients_per_key: int) -> tuple[int, int, int, float]:
    """(requests sent, upstream calls, log rows, log MB with its WAL)."""
    keys = _KEYS
    with tempfile.TemporaryDirectory() as tmp, SimServer(profiles={"dead": {"ttft_s": 0.0, "fault": "500"}}) as sim:
        db = Path(tmp) / "log.db"
        config = {"backends": {"dead": {"kind": "openai", "model": "dead", "base_url": sim.base_url}},
                  "routing": {"tiers": [{"name": "all", "backends": ["dead"]}]},
                  "log": {"path": str(db)}}
        router = Router(load_config(config), source="server", clients_retry=True)
        with RouteServer(router, api_keys=keys) as srv:
            sent: list[int] = []
            until = time.monotonic() + seconds
            threads = [threading.Thread(target=_storm_client, args=(f"{srv.base_url}/chat/completions", key, until, sent))
                       for key in keys.values() for _ in range(clients_per_key)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        router.request_log.flush(timeout_s=120)
        calls = sim.stats("dead")["requests"]
        rows = Store(db).count()
        size_mb = sum(p.stat().st_size for p in Path(tmp).glob("log.db*")) / 1e6
    return len(sent), calls, rows, size_mb

