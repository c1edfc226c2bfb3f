"""Request-log records lost when `route serve` is killed with SIGKILL under load, against the
bound the log promises: at most the records acknowledged in the last flush interval plus one
batch write, i.e. rate x interval (plus a batch); none with `flush_interval_ms: 0`.

    python benchmarks/log_durability.py [--runs 3] [--seconds 3] [--clients 16] [--only sqlite|postgres]
                                        [--timeout-ms 1000]

One SIMULATED OpenAI-compatible server (zero delay) answers; `route serve` runs as a real process
with the request log on. Clients send plain requests, each with a unique prompt, and count a
request acknowledged when its whole 200 response has arrived. After `--seconds` of load the
server gets SIGKILL while requests are in flight; the acknowledged prompts missing from the log
are the loss. Each setting runs at the default interval (200 ms) and at 0, against:
- the local SQLite file;
- PostgreSQL up;
- PostgreSQL stopped for the whole load (pg_ctl stop): at 0 the records go to the local spool;
- PostgreSQL frozen for the whole load (SIGSTOP): the writer gives up after `log.timeout_ms`
  (`--timeout-ms`, 1 s here so that it happens within the load; 5 s by default).
After the kill the database is brought back and one more `route` run logs to it, which replays
whatever the killed server spooled (as the next process would); then the loss is counted.
Printed beside the loss: rate x interval (the measured rate times the flush interval), and the
loss in those units per run (the largest): the bound is about one, plus what arrived while the
batch in flight was being written; at 0 the loss must be 0. With the database away at the default
interval, the records wait in memory and a SIGKILL loses all of them (the documented price of
not choosing 0).

Needs PostgreSQL's server binaries for the PostgreSQL rows (apt-get install postgresql).
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
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from backends.simulator import SimServer

ROOT = Path(__file__).resolve().parent.parent
INTERVALS = (200, 0)  # ms: the default, and synchronous
STATES = ("sqlite", "pg up", "pg stopped", "pg frozen")


@dataclass
class Run:
    acked: int
    lost: int
    rate: float  # acknowledged requests per second


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(workdir: Path, sim_url: str, interval_ms: int, postgres: bool, timeout_ms: int) -> Path:
    log = (f"{{backend: postgres, dsn: '${{ROUTE_PG_DSN}}', flush_interval_ms: {interval_ms}, timeout_ms: {timeout_ms}}}"
           if postgres else
           f"{{path: '{workdir / 'log.db'}', flush_interval_ms: {interval_ms}}}")
    config = workdir / "serve.yaml"
    config.write_text(f"backends:\n  fast: {{kind: openai, model: bench-zero, base_url: '{sim_url}', max_retries: 0}}\n"
                      f"routing:\n  tiers: [{{name: only, backends: [fast]}}]\nlog: {log}\n")
    return config


def _start(config: Path, env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--port", str(port), "-c", str(config)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200:
                return proc, port
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

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=clients)) as http:
        tasks = [asyncio.create_task(client(w, http)) for w in range(clients)]
        started = time.perf_counter()
        await asyncio.sleep(seconds)
        os.kill(proc.pid, signal.SIGKILL)  # while requests are in flight
        elapsed = time.perf_counter() - started
        await asyncio.gather(*tasks, return_exceptions=True)
    proc.wait()
    return acked, elapsed


def _logged_sqlite(db: Path) -> set[str]:
    from router.store import Store

    return {row["prompt"] for row in Store(db).recent(10**7)} if db.exists() else set()


def _logged_postgres(dsn: str) -> set[str]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return {row[0] for row in conn.execute("SELECT prompt FROM requests")}


def _one(state: str, interval: int, args: argparse.Namespace, sim_url: str, pg) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        env = {**os.environ, "ROUTE_HOME": str(workdir / "home"), "PYTHONPATH": str(ROOT)}
        postgres = state != "sqlite"
        if postgres:
            env["ROUTE_PG_DSN"] = pg.create_database()
        config = _config(workdir, sim_url, interval, postgres, args.timeout_ms)
        proc, port = _start(config, env)
        if state == "pg stopped":
            pg.stop()
        elif state == "pg frozen":
            pg.freeze()
        try:
            acked, elapsed = asyncio.run(_load(port, args.clients, args.seconds, proc))
        finally:
            if state == "pg stopped":
                pg.start()
            elif state == "pg frozen":
                pg.thaw()
        if postgres:  # the next process to log replays what the killed one spooled
            subprocess.run([sys.executable, "-m", "router.cli", "-c", str(config), "-q", "after the kill"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=120)
            logged = _logged_postgres(env["ROUTE_PG_DSN"])
        else:
            logged = _logged_sqlite(workdir / "log.db")
        return Run(len(acked), len(acked - logged), len(acked) / elapsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="load before the kill")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--only", choices=("sqlite", "postgres"), help="one backend only")
    parser.add_argument("--timeout-ms", type=int, default=1000,
                        help="log.timeout_ms for PostgreSQL: shorter than the load, so a frozen database is noticed")
    args = parser.parse_args()
    states = [s for s in STATES if args.only is None or (s == "sqlite") == (args.only == "sqlite")]
    print(f"SIMULATED backend; {args.clients} clients; SIGKILL after {args.seconds:g} s of load; {args.runs} runs each")
    print(f"{'log':<11} {'interval':>8} {'acked/run':>10} {'lost per run':>16} {'req/s':>7} "
          f"{'rate x interval':>16} {'lost in intervals':>18} {'lost / acked':>13}")
    with ExitStack() as stack:
        sim = SimServer()
        stack.enter_context(sim)
        sim.update_profile("bench-zero", ttft_s=0.0, tokens_per_s=None, answer_tokens=4)
        pg = None
        if any(s != "sqlite" for s in states):
            sys.path.insert(0, str(ROOT))
            from tests.postgres_server import PostgresServer

            pg = stack.enter_context(PostgresServer())
        for state in states:
            for interval in INTERVALS:
                runs = [_one(state, interval, args, sim.base_url, pg) for _ in range(args.runs)]
                _print(state, interval, runs)


def _print(state: str, interval: int, runs: list[Run]) -> None:
    """One line per setting. `lost in intervals`: each run's loss over what it acknowledged in
    one flush interval (rate x interval), the largest of the runs: the bound says about one,
    plus what arrived while the batch in flight was being written."""
    acked = sum(r.acked for r in runs)
    rate = sum(r.rate for r in runs) / len(runs)
    lost = ", ".join(str(r.lost) for r in runs)
    share = f"{1000 * sum(r.lost for r in runs) / max(1, acked):.1f}/1000"
    intervals = max((r.lost / (r.rate * interval / 1000) for r in runs if r.rate), default=0.0) if interval else 0.0
    print(f"{state:<11} {interval:>6}ms {acked / len(runs):>10.0f} {lost:>16} {rate:>7.0f} "
          f"{rate * interval / 1000:>16.0f} {intervals:>18.1f} {share:>13}", flush=True)


if __name__ == "__main__":
    main()
