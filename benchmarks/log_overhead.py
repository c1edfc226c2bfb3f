"""What the request log costs `route serve`: throughput and p99 with the log on, against the same
server with `--no-log`, measured by wrk in the same run.

    python benchmarks/log_overhead.py [--rounds 3] [--seconds 10] [--clients 1]

A SIMULATED OpenAI-compatible server (zero delay, its own process) answers; two `route serve`
processes sit in front of it, one logging to a fresh SQLite file at the default flush interval,
one started with `--no-log`. wrk (https://github.com/wg/wrk; Debian: `apt-get install wrk`)
drives each in turn, alternating rounds so both see the same machine noise. Prints requests per
second and p50/p99 per round, then the ratios. Target (issue 13): the log costs under 5% of
throughput at one client and does not shape p99.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
MODEL = "bench-zero"
# wrk posts this body on every request and prints its summary as one JSON line when done.
LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model": "auto", "messages": [{"role": "user", "content": "Say hello to the benchmark."}]}'
done = function(summary, latency, requests)
  io.write(string.format('{"requests": %d, "seconds": %f, "errors": %d, "non2xx": %d, "p50_ms": %f, "p99_ms": %f}\\n',
    summary.requests, summary.duration / 1e6,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, latency:percentile(50) / 1e3, latency:percentile(99) / 1e3))
end
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_sim(workdir: Path) -> tuple[subprocess.Popen, str]:
    profiles = workdir / "profiles.yaml"
    profiles.write_text(f"{MODEL}: {{ttft_s: 0.0, answer_tokens: 4}}\n")
    proc = subprocess.Popen([sys.executable, "-m", "backends.simulator", "--port", "0", "--profiles", str(profiles)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening "):
        proc.kill()
        raise SystemExit("the simulator did not start")
    return proc, line.split()[1].rstrip("/") + "/v1"


def _start_serve(sim_url: str, workdir: Path, *, log: bool) -> tuple[subprocess.Popen, int]:
    name = "log" if log else "nolog"
    config = workdir / f"{name}.yaml"
    config.write_text(f"backends:\n  fast: {{kind: openai, model: {MODEL}, base_url: '{sim_url}', max_retries: 0}}\n"
                      "routing:\n  tiers: [{name: only, backends: [fast]}]\n"
                      f"log: {{path: '{workdir / (name + '.db')}'}}\n")
    port = _free_port()
    env = {**os.environ, "ROUTE_HOME": str(workdir / f"home-{name}"), "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "router.cli", "serve", "--port", str(port), "-c", str(config)]
    proc = subprocess.Popen(args + ([] if log else ["--no-log"]), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200:
                return proc, port
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("route serve did not start")


def _cpu_ns(pid: int) -> tuple[int, int]:
    """CPU time the server's main (event loop) thread and its other threads (the log writer) have
    used, ns: on a busy machine a steadier measure than requests per second."""
    main = other = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            used = int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that just ended
        if task.name == str(pid):
            main += used
        else:
            other += used
    return main, other


def _wrk(pid: int, port: int, script: Path, clients: int, seconds: float) -> dict[str, float]:
    before = _cpu_ns(pid)
    out = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{seconds:g}s", "-s", str(script),
                          f"http://127.0.0.1:{port}/v1/chat/completions"], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["errors"] or result["non2xx"]:
        raise SystemExit(f"wrk saw failures: {result}")
    result["rps"] = result["requests"] / result["seconds"]
    after = _cpu_ns(pid)
    result["loop_us"] = (after[0] - before[0]) / 1e3 / result["requests"]
    result["other_us"] = (after[1] - before[1]) / 1e3 / result["requests"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="wrk's duration per round and server")
    parser.add_argument("--clients", type=int, default=1, help="wrk connections")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("this benchmark drives the server with wrk: install it (Debian: `apt-get install wrk`)")
    results: dict[str, list[dict[str, float]]] = {"log on": [], "--no-log": []}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        script = workdir / "post.lua"
        script.write_text(LUA)
        sim, sim_url = _start_sim(workdir)
        servers = {"log on": _start_serve(sim_url, workdir, log=True), "--no-log": _start_serve(sim_url, workdir, log=False)}
        try:
            for proc, port in servers.values():
                _wrk(proc.pid, port, script, args.clients, 2)  # warm-up: connections, imports, the log's first file
            for _ in range(args.rounds):
                for label, (proc, port) in servers.items():
                    results[label].append(_wrk(proc.pid, port, script, args.clients, args.seconds))
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(30)
            sim.terminate()
            sim.wait(30)
    print(f"SIMULATED zero-delay backend; wrk, {args.clients} connection(s), {args.seconds:g} s x {args.rounds} "
          "rounds per server, alternating")
    print(f"{'server':<10} {'req/s per round':<24} {'p50 ms':>7} {'p99 ms per round':>22} "
          f"{'CPU us/req: loop':>17} {'other threads':>14}")
    for label, runs in results.items():
        rates = ", ".join(f"{r['rps']:.0f}" for r in runs)
        tails = ", ".join(f"{r['p99_ms']:.1f}" for r in runs)
        p50 = sorted(r["p50_ms"] for r in runs)[len(runs) // 2]
        loop = sum(r["loop_us"] * r["requests"] for r in runs) / sum(r["requests"] for r in runs)
        other = sum(r["other_us"] * r["requests"] for r in runs) / sum(r["requests"] for r in runs)
        print(f"{label:<10} {rates:<24} {p50:>7.2f} {tails:>22} {loop:>17.0f} {other:>14.0f}")
    on, off = ([r for r in results[label]] for label in ("log on", "--no-log"))
    rps_ratio = sum(r["requests"] for r in on) / sum(r["seconds"] for r in on) / (
        sum(r["requests"] for r in off) / sum(r["seconds"] for r in off))
    p99_ratio = sorted(r["p99_ms"] for r in on)[len(on) // 2] / sorted(r["p99_ms"] for r in off)[len(off) // 2]
    print(f"throughput log on / --no-log: {rps_ratio:.3f} (the log costs {1 - rps_ratio:.1%}); "
          f"median p99 log on / --no-log: {p99_ratio:.2f}")


if __name__ == "__main__":
    main()
