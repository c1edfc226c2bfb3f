"""Request-log records lost when `route serve` is killed with SIGKILL under load, per 1,000
acknowledged requests, at the default flush interval and at synchronous writes.

    python benchmarks/log_durability.py [--runs 3] [--seconds 3] [--clients 16]

One SIMULATED OpenAI-compatible server (zero delay) answers; `route serve` runs as a real process
with the request log on. Clients send plain requests, each with a unique prompt, and count a
request acknowledged when its whole 200 response has arrived. After `--seconds` of load the
server gets SIGKILL while requests are in flight; the acknowledged prompts missing from the log
are the loss. The same run measures both settings, so the throughput ratio is the price of
synchronous writes on this machine.

The bound (README, "Request log"): at most the records acknowledged in the last flush interval
plus one batch write are lost; with `log.flush_interval_ms: 0` none.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from backends.simulator import SimServer

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = (("default (200 ms)", 200), ("synchronous (0)", 0))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(sim_url: str, workdir: Path, interval_ms: int) -> tuple[subprocess.Popen, int, Path]:
    db = workdir / f"log-{interval_ms}-{time.monotonic_ns()}.db"
    config = workdir / "serve.yaml"
    config.write_text(f"backends:\n  fast: {{kind: openai, model: bench-zero, base_url: '{sim_url}', max_retries: 0}}\n"
                      "routing:\n  tiers: [{name: only, backends: [fast]}]\n"
                      f"log: {{path: '{db}', flush_interval_ms: {interval_ms}}}\n")
    port = _free_port()
    env = {**os.environ, "ROUTE_HOME": str(workdir / "home"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port", str(port), "-c", str(config)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200:
                return proc, port, db
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("route serve did not start")


async def _load(port: int, clients: int, seconds: float, proc: subprocess.Popen) -> tuple[set[str], float]:
    """Acknowledged prompts, and the seconds of load before the kill."""
    acked: set[str] = set()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"

    async def client(worker: int, http: httpx.AsyncClient) -> None:
        for i in range(10**9):
            prompt = f"w{worker}-r{i}"
            try:
                response = await http.post(url, json={"model": "auto", "messages": [{"role": "user", "content": prompt}]})
            except httpx.HTTPError:
                return  # the server is gone
            if response.status_code == 200:
                acked.add(prompt)

    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=clients)) as http:
        tasks = [asyncio.create_task(client(w, http)) for w in range(clients)]
        started = time.perf_counter()
        await asyncio.sleep(seconds)
        os.kill(proc.pid, signal.SIGKILL)  # while requests are in flight
        elapsed = time.perf_counter() - started
        await asyncio.gather(*tasks, return_exceptions=True)
    proc.wait()
    return acked, elapsed


def _logged(db: Path) -> set[str]:
    from router.store import Store

    if not db.exists():
        return set()
    return {row["prompt"] for row in Store(db).recent(10**7)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="load before the kill")
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    print(f"SIMULATED backend; {args.clients} clients; SIGKILL after {args.seconds:g} s of load; {args.runs} runs each")
    results = {}
    with SimServer() as sim, tempfile.TemporaryDirectory() as tmp:
        sim.update_profile("bench-zero", ttft_s=0.0, tokens_per_s=None, answer_tokens=4)
        for label, interval in SETTINGS:
            per_run = []
            for _ in range(args.runs):
                proc, port, db = _start(sim.base_url, Path(tmp), interval)
                acked, elapsed = asyncio.run(_load(port, args.clients, args.seconds, proc))
                lost = len(acked - _logged(db))
                per_run.append((len(acked), lost, len(acked) / elapsed))
            results[label] = per_run
    print(f"{'setting':<20} {'acked/run':>10} {'lost/run':>14} {'lost per 1,000 acked':>22} {'req/s':>8}")
    for label, runs in results.items():
        acked = sum(a for a, _, _ in runs)
        lost = [lo for _, lo, _ in runs]
        rate = sum(r for _, _, r in runs) / len(runs)
        per_k = 1000 * sum(lost) / max(1, acked)
        worst = max(1000 * lo / max(1, a) for a, lo, _ in runs)
        print(f"{label:<20} {acked / len(runs):>10.0f} {', '.join(map(str, lost)):>14} "
              f"{per_k:>12.1f} (max {worst:.1f}) {rate:>8.0f}")
    base, sync = (sum(r for _, _, r in results[label]) / args.runs for label, _ in SETTINGS)
    print(f"throughput synchronous / default: {sync / base:.2f}")


if __name__ == "__main__":
    main()
