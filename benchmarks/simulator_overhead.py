"""The simulated server's own work per request, beside the web framework it runs on.

    python benchmarks/simulator_overhead.py [--requests 3000] [--rounds 5]

A zero-delay chat completion is sent to the simulator's ASGI app in process (no socket, no
client: what is timed is the server's work alone), and the same way to a bare Starlette app that
answers one fixed chat completion (the baseline: the framework's own floor). Rounds alternate, so
both meet the same machine; the median round of each is printed, with the ratio. Target: under
1 ms per request (the simulator must not be what a benchmark through it measures). This claim
was a test once, and failed at load 8; on a busy machine read the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backends.simulator import create_app, load_profiles

TARGET_S = 0.001
_BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Explain block diffusion briefly"}]})
_ANSWER = {"id": "c1", "object": "chat.completion", "model": "m",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": "fixed"}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 5, "completion_tokens": 1}}


def _bare() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        await request.json()
        return JSONResponse(_ANSWER)

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def _caller(app: Any) -> Callable[[], Awaitable[int]]:
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": [], "query_string": b"",
             "root_path": "", "scheme": "http", "http_version": "1.1", "server": ("127.0.0.1", 1),
             "client": ("127.0.0.1", 2), "app": app}
    payload = _BODY.encode()

    async def call() -> int:
        status = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": payload, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])

        await app(dict(scope), receive, send)
        return status[0]

    return call


async def _round(call: Callable[[], Awaitable[int]], requests: int) -> float:
    started = time.perf_counter()
    for _ in range(requests):
        if await call() != 200:
            raise SystemExit("a request was not answered with 200")
    return (time.perf_counter() - started) / requests


async def run(requests: int, rounds: int) -> tuple[float, float]:
    simulated, bare = _caller(create_app(load_profiles({"m": {"ttft_s": 0.0, "answer_tokens": 40}}))), _caller(_bare())
    await simulated(), await bare()  # first calls build routes and caches
    times: dict[str, list[float]] = {"sim": [], "bare": []}
    for _ in range(rounds):
        times["sim"].append(await _round(simulated, requests))
        times["bare"].append(await _round(bare, requests))
    return statistics.median(times["sim"]), statistics.median(times["bare"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sim, bare = asyncio.run(run(args.requests, args.rounds))
    print(f"bare Starlette app (baseline): {bare * 1e6:8.1f} us per request")
    print(f"simulator, zero delay:         {sim * 1e6:8.1f} us per request  (x{sim / bare:.2f} the baseline)")
    ok = sim < TARGET_S
    print(f"target: under {TARGET_S * 1e3:.0f} ms per request: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
