"""Instructions `route serve` executes per request, counted by valgrind: a figure a busy box does
not move, for before/after comparisons that wall and CPU time on a shared machine cannot settle.

    python benchmarks/request_cost.py [--base DIR] [--quiet] [--stream] [--tokens 16] [--requests 500]

One SIMULATED OpenAI-compatible server (its own process, `--tokens` tokens at once) answers; in front
of it `route serve` runs under `valgrind --tool=callgrind` as a user starts it (request log and
access log on; `--quiet`: no access log; `--stream`: each answer streamed). A client sends a warm-up of 20 requests, then 100 in
one run and 100 + `--requests` in another, `--concurrency` (16) at a time; the difference of the two runs'
instruction counts over `--requests` is the cost of one request, start-up and shutdown taken
out. User-space instructions only (the kernel's socket work is not counted), so it measures the
router's own code. `--base DIR` (a checkout of an earlier commit: `git worktree add DIR
COMMIT`) counts that one too, in parallel, and prints the ratio. Needs valgrind (`apt-get
install valgrind`); each count takes about a minute. With `--base`, the run exits 1 when the
ratio misses its target: at most x1.0 for a plain request, x0.9 for a stream. (a1288bb's `route
serve` wrote no access log at all: the default run counts this one's access line against
nothing; `--quiet` compares like with like.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from benchmarks.proxy import _body, _free_port, _stop, _wait_ready
from benchmarks.proxy_before import earlier_checkout, simulated_upstream

ROOT = Path(__file__).resolve().parent.parent
FIRST = 100  # requests in the shorter run
# Instructions per request against --base, at most (issue 39: measured against a1288bb).
TARGET = {"plain": 1.0, "stream": 0.9}
WARM = 20


async def _send(url: str, count: int, key: str, concurrency: int, stream: bool, tokens: int) -> int:
    """`count` requests, `concurrency` at a time; the number that failed."""
    body = _body("chat", "auto", stream, tokens)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    failed, left = 0, count
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=concurrency)) as client:
        async def worker() -> None:
            nonlocal failed, left
            while left > 0:
                left -= 1
                response = await client.post(url, content=body, headers=headers)
                # A stream is read whole (post() does): it fails if it ends without [DONE].
                failed += response.status_code != 200 or (stream and not response.text.rstrip().endswith("[DONE]"))
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return failed


def _count(code: Path, config: Path, requests: int, args, env: dict, tmp: Path) -> int:
    """Instructions of one `route serve` under callgrind that answered WARM + `requests`."""
    port = _free_port()
    log = tmp / f"serve-{port}.log"
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m", "router.cli",
           "serve", "--port", str(port), "--config", str(config), "--api-key-env", "BENCH_KEY",
           *(["--quiet"] if args.quiet else [])]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=code, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**env, "PYTHONPATH": str(code), "ROUTE_HOME": str(tmp / f"home-{port}")})
    try:
        _wait_ready(f"http://127.0.0.1:{port}/healthz", proc, 600, log)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        failed = (asyncio.run(_send(url, WARM, env["BENCH_KEY"], args.concurrency, args.stream, args.tokens))
                  + asyncio.run(_send(url, requests, env["BENCH_KEY"], args.concurrency, args.stream, args.tokens)))
        if failed:
            raise RuntimeError(f"{failed} requests failed: see {log}")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    found = re.search(r"I\s+refs:\s+([\d,]+)", log.read_text())
    if found is None:
        raise RuntimeError(f"valgrind printed no instruction count: see {log}")
    return int(found.group(1).replace(",", ""))


def _per_request(code: Path, config: Path, args, env: dict, tmp: Path) -> float:
    short = _count(code, config, FIRST, args, env, tmp)
    long = _count(code, config, FIRST + args.requests, args, env, tmp)
    return (long - short) / args.requests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="an earlier checkout to count beside this one")
    parser.add_argument("--quiet", action="store_true", help="route serve --quiet: no access log")
    parser.add_argument("--stream", action="store_true", help="streamed answers instead of plain ones")
    parser.add_argument("--tokens", type=int, default=16, help="tokens an answer has (1000: a long stream's per-token cost)")
    parser.add_argument("--requests", type=int, default=500, help="the requests the longer run adds")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight at once")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("skipped: this benchmark counts instructions with valgrind, which is not installed "
              "(Debian/Ubuntu: `apt-get install valgrind`)")
        return 0
    codes = {"this": ROOT}
    if args.base is not None:
        base = earlier_checkout(args.base)
        if base is None:
            return 2
        codes["base"] = base
    tmp = Path(tempfile.mkdtemp(prefix="route-request-cost-"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "BENCH_KEY": "sk-" + secrets.token_hex(24)}
    sim, config = simulated_upstream(tmp, env, args.tokens)
    try:
        with ThreadPoolExecutor(len(codes)) as pool:
            futures = {name: pool.submit(_per_request, code, config, args, env, tmp) for name, code in codes.items()}
            cost = {name: future.result() for name, future in futures.items()}
    finally:
        _stop(sim)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"SIMULATED backend, own process: {args.tokens} tokens at once; {'streamed' if args.stream else 'plain'} chat completions, {args.concurrency} at a time; "
          "request log on, "
          f"access log {'off' if args.quiet else 'on'}; {args.requests} requests counted")
    for name, code in codes.items():
        print(f"  {name:<5} {cost[name] / 1e6:6.3f} M instructions per request  ({code})")
    if "base" not in cost:
        return 0
    ratio = cost["this"] / cost["base"]
    target = TARGET["stream" if args.stream else "plain"]
    met = ratio <= target
    print(f"  this / base: x{ratio:.3f}  (issue 39's target, set for --base at a1288bb, the start of round "
          f"three: at most x{target:.1f}: {'met' if met else 'NOT met'})")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
