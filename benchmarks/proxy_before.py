"""`route serve` against an earlier checkout of itself: the before/after of benchmarks/proxy.py.

    git worktree add /tmp/before <commit>
    python benchmarks/proxy.py --base /tmp/before [--repeat 3] [--duration 4] [--log on|off|both]

The same SIMULATED upstream as benchmarks/proxy.py (its own process, 16 tokens at once) and the
same config serve both checkouts, each started as a user starts it (`route serve`, the access
log and the request log on unless `--log off`), run from its own tree with the same Python.
Each repetition measures this checkout and the earlier one in turn, alternating which goes
first, so that a box whose speed drifts during the run drifts under both. For plain and
streamed requests at 16 and 64 connections (wrk, closed loop): requests per second and CPU per
request (the server's /proc CPU over requests answered).

Prints, per case, this checkout's figure over the earlier one's from the same repetition, as
median [min-max] over the repetitions, beside the noise: how far the earlier checkout's own
figures spread across the repetitions (max/min). A ratio is "within noise" when its median is
within that spread of 1.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.proxy import LUA, PROFILE, _body, _cores, _free_port, _pinned, _stop, _tree_cpu_s, _wait_ready, _wrk

ROOT = Path(__file__).resolve().parent.parent
CONNECTIONS = (16, 64)
SETTLE_S = 1.0


def _serve(code: Path, config: Path, log_on: bool, env: dict, tmp: Path, name: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "router.cli", "serve", "--port", str(port), "--config", str(config),
           "--api-key-env", "BENCH_KEY", *([] if log_on else ["--no-log"])]
    log = tmp / f"{name}.log"
    proc = subprocess.Popen(cmd, env={**env, "PYTHONPATH": str(code), "ROUTE_HOME": str(tmp / f"home-{name}")},
                            stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=code,
                            preexec_fn=_pinned(_cores()[0]), start_new_session=True)
    _wait_ready(f"http://127.0.0.1:{port}/healthz", proc, 180, log)
    return proc, f"http://127.0.0.1:{port}/v1/chat/completions"


def _measure(proc: subprocess.Popen, url: str, args, env: dict, lua: Path) -> dict:
    figures = {}
    loaders = _cores()[1]
    for mode in ("plain", "stream"):
        run_env = {**env, "BENCH_BODY": _body("chat", "auto", mode == "stream")}
        _wrk(url, 16, 1, run_env, lua, loaders)  # warm-up: connections, caches, learned latency
        for conns in CONNECTIONS:
            time.sleep(SETTLE_S)
            before = _tree_cpu_s(proc.pid)
            started = time.perf_counter()
            ok, failed = _wrk(url, conns, args.duration, run_env, lua, loaders)
            elapsed = time.perf_counter() - started
            cpu = _tree_cpu_s(proc.pid) - before
            figures[mode, conns] = {"rps": ok / elapsed, "cpu_ms": 1000 * cpu / max(ok, 1), "failed": failed}
    return figures


def _spread(values: list[float]) -> str:
    return f"x{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def earlier_checkout(given: str | Path) -> Path | None:
    """`--base`, resolved, or None (said why) when it is not a checkout of this project."""
    base = Path(given).resolve()
    if (base / "router" / "cli").is_dir():
        return base
    print(f"--base {given}: not a checkout of this project (no router/cli there); make one with "
          "`git worktree add DIR COMMIT`")
    return None


def simulated_upstream(tmp: Path, env: dict, tokens: int = 16) -> tuple[subprocess.Popen, Path]:
    """The SIMULATED server (its own process, `tokens` tokens at once), ready, and a config of
    one backend on it, written in `tmp`. Stop the process when done."""
    port = _free_port()
    profiles = {"bench": {**PROFILE["bench"], "answer_tokens": tokens}}
    sim = subprocess.Popen([sys.executable, "-c", f"from backends.simulator import serve; serve(port={port}, "
                            f"profiles={profiles!r})"], env=env, stdout=(tmp / "sim.log").open("w"),
                           stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    try:
        _wait_ready(f"http://127.0.0.1:{port}/healthz", sim, 30, tmp / "sim.log")
    except BaseException:
        _stop(sim)
        raise
    config = tmp / "route.yaml"
    config.write_text(f"backends:\n  sim:\n    kind: openai\n    model: bench\n    base_url: "
                      f"http://127.0.0.1:{port}/v1\nrouting:\n  tiers:\n    - name: only\n      backends: [sim]\n")
    return sim, config


def run(args, env: dict, tmp: Path) -> int:
    base = earlier_checkout(args.base)
    if base is None:
        return 2
    (tmp / "post.lua").write_text(LUA)
    sim, config = simulated_upstream(tmp, env)
    codes = {"after": ROOT, "before": base}
    logs = {"both": (True, False), "on": (True,), "off": (False,)}[args.log]
    results: dict = {}  # (code, log_on) -> one figures dict per repetition
    try:
        load = os.getloadavg()[0]
        for rep in range(args.repeat):
            order = list(codes) if rep % 2 == 0 else list(reversed(codes))
            for log_on in logs:
                for name in order:
                    print(f"repetition {rep + 1}: {name} ({codes[name]}), request log {'on' if log_on else 'off'} ...",
                          flush=True)
                    proc, url = _serve(codes[name], config, log_on, env, tmp, f"{name}-{rep}-{log_on}")
                    try:
                        results.setdefault((name, log_on), []).append(_measure(proc, url, args, env,
                                                                               tmp / "post.lua"))
                    finally:
                        _stop(proc)
    finally:
        _stop(sim)
    print(f"\nSIMULATED backend, own process: 16 tokens at once; {args.duration:g} s per figure; {args.repeat} "
          f"repetitions, interleaved; {len(os.sched_getaffinity(0))} cores; load average {load:.1f} at start, "
          f"{os.getloadavg()[0]:.1f} at end")
    print(f"after: {ROOT}\nbefore: {base}\n")
    print(f"{'request log':<12}{'case':<18}{'req/s after/before':>28}{'CPU ms/req after/before':>30}"
          f"{'noise (before max/min)':>26}")
    for log_on in logs:
        after, before = results["after", log_on], results["before", log_on]
        for mode in ("plain", "stream"):
            for conns in CONNECTIONS:
                key = mode, conns
                rps = [a[key]["rps"] / b[key]["rps"] for a, b in zip(after, before)]
                cpu = [a[key]["cpu_ms"] / b[key]["cpu_ms"] for a, b in zip(after, before)]
                own = [b[key]["rps"] for b in before]
                noise = max(own) / min(own)
                verdict = "within noise" if statistics.median(rps) >= 1 / noise else "NOT within noise"
                print(f"{'on' if log_on else 'off':<12}{f'{mode}, {conns} conns':<18}{_spread(rps):>28}"
                      f"{_spread(cpu):>30}{f'x{noise:.3f}':>14}  {verdict}")
    failed = sum(f[key]["failed"] for runs in results.values() for f in runs for key in f)
    if failed:
        print(f"\n{failed} requests failed over the whole run: see the servers' logs")
    return 0
