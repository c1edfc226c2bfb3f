"""CPU the router spends on one long streamed answer, per stream and per token, in process.

    python benchmarks/stream_cpu.py [--tokens 1000] [--streams 48] [--concurrency 16] [--code DIR]
                                    [--secret]

The simulated server runs in a process of its own, streaming each answer one token per event
(at --rate tokens per second, so events arrive one at a time as a real provider's do). The
`route serve` app is called in this process through ASGI (no uvicorn, no client socket: what is
measured is the request flow, the call path, the backend and the writers), and this process's
CPU time (time.process_time: every thread of it) is divided by the streams answered. CPU time,
not wall time: what a busy machine does to the wall clock does not count.

`--code DIR` measures another checkout of the project the same way, in the same run,
interleaved, and prints the ratio (for a before/after of a change). `--secret` gives the backend
a key (`api_key: ${NAME}`), so every chunk passes the stream's redaction (router/redaction.py),
as it does wherever a hosted backend is configured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Write a long story about a lighthouse keeper."

_CHILD = r"""
import asyncio, json, os, sys, time
sys.path.insert(0, sys.argv[1])
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
from router import Router
from router.config_loader import load_config
from router.server import create_app

base_url, tokens, streams, concurrency = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
secret = sys.argv[6] == "1"
backend = {"kind": "openai", "model": "long", "base_url": base_url, "max_retries": 0}
if secret:
    os.environ["ROUTE_BENCH_KEY"] = "sk-bench-0123456789abcdefghijklmnopqrstuv"
    backend["api_key"] = "${ROUTE_BENCH_KEY}"
config = {"backends": {"sim": backend},
          "routing": {"tiers": [{"name": "all", "backends": ["sim"]}]}, "log": {"enabled": False}}
body = json.dumps({"model": "auto", "stream": True, "max_tokens": tokens,
                   "messages": [{"role": "user", "content": "Write a long story."}]}).encode()


async def one(app):
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "root_path": "",
             "scheme": "http", "query_string": b"", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2),
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]}
    sent, done, size = False, asyncio.Event(), 0

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        nonlocal size
        if message["type"] == "http.response.body":
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    await app(scope, receive, send)
    return size


async def main():
    router = Router(load_config(config), source="server", clients_retry=True)
    app = create_app(router)
    await asyncio.gather(*(one(app) for _ in range(4)))  # warm: connections, first-use imports
    started_cpu, started = time.process_time(), time.perf_counter()
    pending = list(range(streams))

    async def worker():
        while pending:
            pending.pop()
            await one(app)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    cpu, wall = time.process_time() - started_cpu, time.perf_counter() - started
    await router.aclose()
    print(json.dumps({"cpu_s": cpu, "wall_s": wall, "streams": streams}))


asyncio.run(main())
"""


def _simulator(tokens: int, rate: float) -> tuple[subprocess.Popen, str]:
    profiles = Path(tempfile.mkdtemp(prefix="route-stream-cpu-")) / "profiles.yaml"
    profiles.write_text(f"long: {{ttft_s: 0.0, tokens_per_s: {rate}, answer_tokens: {tokens}}}\n")
    proc = subprocess.Popen([sys.executable, "-m", "backends.simulator", "--port", "0", "--profiles", str(profiles)],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, line.split()[1] + "/v1"


def _measure(code: Path, base_url: str, args: argparse.Namespace) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(code), base_url, str(args.tokens), str(args.streams),
                          str(args.concurrency), str(int(args.secret))],
                         capture_output=True, text=True, cwd=code, check=True,
                         env={**os.environ, "PYTHONPATH": str(code)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rate", type=float, default=4000.0, help="tokens per second per stream")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--code", type=Path, help="another checkout to measure beside this one")
    parser.add_argument("--secret", action="store_true", help="a keyed backend: every chunk is redacted")
    args = parser.parse_args()
    sim, base_url = _simulator(args.tokens, args.rate)
    try:
        codes = {"this": ROOT, **({"other": args.code.resolve()} if args.code else {})}
        per: dict[str, list[float]] = {name: [] for name in codes}
        for _ in range(args.rounds):
            for name, code in codes.items():
                result = _measure(code, base_url, args)
                per[name].append(1000 * result["cpu_s"] / result["streams"])
    finally:
        sim.stdin.close() if sim.stdin else None
        sim.wait(timeout=10)
    keyed = ", keyed (every chunk redacted)" if args.secret else ""
    print(f"{args.streams} streams of {args.tokens} tokens{keyed}, {args.concurrency} at a time, one token per event "
          f"at {args.rate:g} tokens/s (SIMULATED upstream in its own process); router CPU per stream, "
          f"{args.rounds} rounds, median [min-max]:")
    for name, values in per.items():
        median = statistics.median(values)
        print(f"  {name:<6} {median:7.2f} ms [{min(values):.2f}-{max(values):.2f}]  = {1000 * median / args.tokens:5.1f} "
              f"us per token  ({codes[name]})")
    if "other" in per:
        print(f"  this / other: x{statistics.median(per['this']) / statistics.median(per['other']):.2f}")


if __name__ == "__main__":
    main()
