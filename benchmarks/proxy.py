"""Throughput, CPU per request and latency under load of `route serve`, beside LiteLLM's proxy.

    LITELLM_LOCAL_MODEL_COST_MAP=True python benchmarks/proxy.py [--duration 5] [--workers 1,2]
        [--log both|on|off] [--api chat|messages] [--no-litellm] [--page closed|open|both]
    python benchmarks/proxy.py --peers portkey,litellm [--repeat 3] [--connections 16]   (benchmarks/proxy_peers.py)
    python benchmarks/proxy.py --base DIR [--repeat 3] [--log on|off|both]   (benchmarks/proxy_before.py)

One SIMULATED OpenAI-compatible server in its own process answers at once (16 tokens, no
delay), so what is measured is the proxy. For each proxy -- `route serve --workers N` with the
request log on and with --no-log, and `litellm --num_workers N` (master key; both check a
bearer token) -- started one at a time, the same run measures, plain and streaming:

- throughput with `wrk` (an external, C load generator) at 1, 16 and 64 connections, and CPU
  per request: CPU seconds of the proxy's processes (/proc, workers included) over requests
  answered. Requests per second per core is its inverse: what one core sustains, however
  many the box has or lends to the load generator.
- latency at fixed rates of 50% and 80% of that proxy's own ceiling (its best wrk figure),
  from an open-loop generator in a process of its own (benchmarks/open_loop.py): p50 and p99
  from when each request was due. Ours also at LiteLLM's 80% rate (the same absolute load).

`--page open` keeps the web view (/ui) open in a headless Chromium, signed in, for the whole of
that proxy's measurements: the page polls once a second and redraws as the requests pour in.
`--page both` measures each `route serve` with the page closed and open, and prints the
ratios of the two (issue 27: the view's cost must stay within noise). Needs Debian's
`chromium` and Python's `playwright` (the dev extra).

Ratios are against LiteLLM and `--workers 1`, measured in the same run. Targets (issue 13):
per core at 64 connections at least 500 plain and 350 streaming requests/s; p99 at 80% load
under LiteLLM's at 80% load. With 4 or more cores the load generators get the last core and
the servers the rest; with fewer they share, which the header says, with the load average.
Needs `wrk` (`apt-get install wrk`) and Linux (/proc); LiteLLM's proxy needs the `bench`
extra (without it the run says why and measures ours alone).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PROFILE = {"bench": {"ttft_s": 0.0, "answer_tokens": 16}}
CONNECTIONS = (1, 16, 64)
LOADS = (0.5, 0.8)
SETTLE_S = 1.0  # between measurements: the last one's cancelled requests finish unwinding
TARGET_PER_CORE = {"plain": 500.0, "stream": 350.0}  # requests/s per core at 64 connections
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
LUA = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_KEY")
wrk.body = os.getenv("BENCH_BODY")
"""


@dataclass
class Proxy:
    name: str
    cmd: list[str]
    health: str
    url: str
    model: str
    litellm: bool = False
    workers: int = 1
    page: bool = False  # the web view open in a browser while measuring
    browser_profile: str | None = None  # that browser's --user-data-dir: finds its processes
    results: dict = field(default_factory=dict)  # (mode, key) -> figures


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cores() -> tuple[set[int] | None, set[int] | None]:
    """(servers' CPUs, load generators' CPUs): apart with 4 or more, else no pinning."""
    cpus = sorted(os.sched_getaffinity(0))
    return (set(cpus[:-1]), {cpus[-1]}) if len(cpus) >= 4 else (None, None)


def _pinned(cpus: set[int] | None) -> Callable[[], None] | None:
    return None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))


def _tree_cpu_s(pid: int) -> float:
    """utime + stime of `pid` and every live descendant, seconds."""
    total, todo, tick = 0.0, [pid], os.sysconf("SC_CLK_TCK")
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(") ", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited meanwhile
    return total


def _browser_cpu_s(profile: str | None) -> float:
    """utime + stime of the Chromium processes started with this profile (0 without a page)."""
    if profile is None:
        return 0.0
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and profile.encode() in (proc / "cmdline").read_bytes():
                fields = (proc / "stat").read_text().rsplit(") ", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            continue  # exited meanwhile, or not ours to read
    return total


def _wait_ready(url: str, proc: subprocess.Popen, timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up within {timeout_s:.0f} s")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # litellm's workers too
            proc.wait()


def _wrk(url: str, conns: int, seconds: float, env: dict, lua: Path, cpus: set[int] | None) -> tuple[int, int]:
    """(requests answered 2xx, failed ones) of one wrk run."""
    out = subprocess.run(["wrk", "-t1", f"-c{conns}", f"-d{seconds:g}s", "--timeout", "30s", "-s", str(lua), url],
                         env=env, capture_output=True, text=True, check=True, preexec_fn=_pinned(cpus)).stdout
    done = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    failed = bad + (sum(int(n) for n in socket_errors.groups()) if socket_errors else 0)
    return done - bad, failed


def _open_loop(url: str, rate: float, seconds: float, body: str, env: dict, cpus: set[int] | None) -> dict:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "open_loop.py"), url, "--rate", f"{rate:.1f}", "--duration",
           f"{seconds:g}", "--body", body, "--auth-env", "BENCH_KEY", *(f"--cpu={c}" for c in cpus or ())]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _body(api: str, model: str, stream: bool, tokens: int = 16) -> str:
    return json.dumps({"model": model, "max_tokens": tokens, "stream": stream,
                       "messages": [{"role": "user", "content": "Say something short."}]})


@contextlib.contextmanager
def _page_open(proxy: Proxy, key: str) -> Iterator[None]:
    """The web view open in a headless Chromium, signed in, showing requests, while the block runs."""
    if not proxy.page:
        yield
        return
    from playwright.sync_api import sync_playwright

    root = proxy.health.removesuffix("/healthz")
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="route-bench-chromium-") as profile:
        context = p.chromium.launch_persistent_context(profile, executable_path=shutil.which("chromium"), headless=True,
                                                       args=CHROMIUM_FLAGS, viewport={"width": 1440, "height": 900})
        try:
            proxy.browser_profile = profile
            page = context.new_page()
            page.goto(f"{root}/ui")
            page.fill("#key", key)
            page.click("#login-form button")
            page.locator("#live[data-state=live]").wait_for()
            yield
            proxy.browser_profile = None
            shown = page.locator("#request-rows tr[data-seq]").count()
            print(f"  (the page was live throughout: {shown} requests shown at the end)", flush=True)
        finally:
            context.close()


def _page_problem() -> str | None:
    """Why the page cannot be opened here, or None."""
    if shutil.which("chromium") is None:
        return "Debian's chromium is not installed (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


def _measure(proxy: Proxy, pid: int, args, env: dict, lua: Path, litellm_rate: dict) -> None:
    servers, loaders = _cores()
    for mode in ("plain", "stream"):
        body = _body(args.api, proxy.model, mode == "stream")
        run_env = {**env, "BENCH_BODY": body}
        _wrk(proxy.url, 16, 1, run_env, lua, loaders)  # warm-up: connections, caches, learned latency
        best = 0.0
        for conns in CONNECTIONS:
            time.sleep(SETTLE_S)
            before, browser = _tree_cpu_s(pid), _browser_cpu_s(proxy.browser_profile)
            started = time.perf_counter()
            ok, failed = _wrk(proxy.url, conns, args.duration, run_env, lua, loaders)
            elapsed = time.perf_counter() - started
            cpu = _tree_cpu_s(pid) - before
            browser = _browser_cpu_s(proxy.browser_profile) - browser
            rate = ok / elapsed
            best = max(best, rate)
            proxy.results[mode, conns] = {"rps": rate, "cpu_ms": 1000 * cpu / max(ok, 1),
                                          "per_core": ok / cpu if cpu else float("nan"), "failed": failed,
                                          "browser_cpu_s": browser, "elapsed_s": elapsed}
        rates = [(f"{int(load * 100)}%", load * best) for load in LOADS]
        if not proxy.litellm and (mode, proxy.workers) in litellm_rate:
            rates.append(("litellm 80%", litellm_rate[mode, proxy.workers]))
        for label, rate in rates:
            time.sleep(SETTLE_S)
            proxy.results[mode, label] = {**_open_loop(proxy.url, rate, args.duration, body, env, loaders),
                                          "target_rate": rate}
        if proxy.litellm:
            litellm_rate[mode, proxy.workers] = 0.8 * best


def _proxies(args, tmp: Path, sim_base: str, env: dict) -> list[Proxy]:
    path = "/chat/completions" if args.api == "chat" else "/messages"
    kind, provider, api_base = (("openai", "openai", sim_base) if args.api == "chat"
                                else ("anthropic", "anthropic", sim_base.removesuffix("/v1")))
    (tmp / "route.yaml").write_text(
        f"backends:\n  sim:\n    kind: {kind}\n    model: bench\n    base_url: {sim_base}\n"
        "routing:\n  tiers:\n    - name: only\n      backends: [sim]\n")
    (tmp / "litellm.yaml").write_text(
        f"model_list:\n  - model_name: bench\n    litellm_params:\n      model: {provider}/bench\n"
        f"      api_base: {api_base}\n      api_key: sk-none\n")
    proxies = []
    litellm = _litellm_command(args, env)
    for workers in args.workers:
        if isinstance(litellm, list):
            port = _free_port()
            proxies.append(Proxy(f"litellm -w{workers}", [*litellm, "--config", str(tmp / "litellm.yaml"), "--port",
                                 str(port), "--num_workers", str(workers)], f"http://127.0.0.1:{port}/health/liveliness",
                                 f"http://127.0.0.1:{port}/v1{path}", "bench", litellm=True, workers=workers))
        for log in (("on", "off") if args.log == "both" else (args.log,)):
            for page in (("closed", "open") if args.page == "both" else (args.page,)):
                port = _free_port()
                proxies.append(Proxy(f"route -w{workers} log {log}" + ("" if args.page == "closed" else f" page {page}"), [
                    sys.executable, "-m", "router.cli", "serve", "--port", str(port), "--config", str(tmp / "route.yaml"),
                    "--api-key-env", "BENCH_KEY", *(["--workers", str(workers)] if workers > 1 else []),
                    *(["--no-log"] if log == "off" else [])],
                    f"http://127.0.0.1:{port}/healthz", f"http://127.0.0.1:{port}/v1{path}", "auto", workers=workers,
                    page=page == "open"))
    if isinstance(litellm, str):
        print(f"LiteLLM's proxy not measured: {litellm}")
    return proxies


def _litellm_command(args, env: dict) -> list[str] | str:
    """The command, or why there is none."""
    if args.no_litellm:
        return "--no-litellm"
    exe = Path(sys.executable).parent / "litellm"
    if not exe.exists():
        return f"no `litellm` command beside {sys.executable}; install the bench extra: pip install -e '.[bench]'"
    probe = subprocess.run([sys.executable, "-c", "import litellm.proxy.proxy_server"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
    if probe.returncode:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"`import litellm.proxy.proxy_server` fails ({last}); install the bench extra: pip install -e '.[bench]'"
    return [str(exe)]


def _report(proxies: list[Proxy], header: str) -> int:
    print(header)
    for mode in ("plain", "stream"):
        print(f"\n{mode}: wrk, closed loop{'':<14}{'conns':>5} {'req/s':>8} {'cpu ms/req':>10} {'req/s/core':>10} "
              f"{'failed':>6}")
        for p in proxies:
            for c in CONNECTIONS:
                r = p.results[mode, c]
                print(f"  {p.name:<34} {c:>5} {r['rps']:>8.0f} {r['cpu_ms']:>10.2f} {r['per_core']:>10.0f} "
                      f"{r['failed']:>6}")
        print(f"{mode}: fixed rate, open loop{'':<5}{'load':>12} {'rate/s':>7} {'p50 ms':>7} {'p99 ms':>8} "
              f"{'errors':>6}")
        for p in proxies:
            for label in [k for (m, k) in p.results if m == mode and isinstance(k, str)]:
                r = p.results[mode, label]
                print(f"  {p.name:<27} {label:>12} {r['rate']:>7.0f} {r['p50_ms']:>7.1f} {r['p99_ms']:>8.1f} "
                      f"{r['errors']:>6}")
    return _verdicts(proxies)


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")  # a proxy that answered nothing in the window


def _verdicts(proxies: list[Proxy]) -> int:
    print("\nratios (same run) and targets:")
    by_name = {p.name: p for p in proxies}
    met = True
    for p in (p for p in proxies if not p.litellm):
        base = by_name.get(f"litellm -w{p.workers}")
        one = by_name.get(p.name.replace(f"-w{p.workers}", "-w1"))
        for mode in ("plain", "stream"):
            ours = p.results[mode, 64]
            ok = ours["per_core"] >= TARGET_PER_CORE[mode]
            line = (f"  {p.name:<20} {mode:<6} per core at 64 conns {ours['per_core']:>5.0f} "
                    f"(target {TARGET_PER_CORE[mode]:.0f}: {'met' if ok else 'NOT met'})")
            if one is not None and one is not p:
                line += f", throughput x{_ratio(ours['rps'], one.results[mode, 64]['rps']):.2f} of -w1"
            if base is not None:
                theirs = base.results[mode, 64]
                p99, their99 = p.results[mode, "80%"]["p99_ms"], base.results[mode, "80%"]["p99_ms"]
                ok = ok and p99 < their99
                line += (f", x{_ratio(ours['per_core'], theirs['per_core']):.1f} litellm's per core; p99 at 80% "
                         f"{p99:.1f} vs {their99:.1f} ms ({'met' if p99 < their99 else 'NOT met'})")
                same = p.results.get((mode, "litellm 80%"))
                if same is not None:  # the same absolute load as LiteLLM's 80%: shown, not the target
                    line += f"; at litellm's 80% rate {same['p99_ms']:.1f} ms"
            met = met and ok
            print(line)
    print("targets met" if met else "targets NOT all met")
    _page_cost(proxies)
    return 0


def _page_cost(proxies: list[Proxy]) -> None:
    """The web view's cost: each proxy with the page open against the same one closed."""
    by_name = {p.name: p for p in proxies}
    pairs = [(p, by_name.get(p.name.replace("page open", "page closed"))) for p in proxies if p.page]
    if not pairs:
        return
    print("\nthe web view open against closed (same run; within noise is the target). Server CPU per request is")
    print("what the view costs `route serve`; req/s also pays for the browser where it shares the server's cores:")
    for opened, closed in pairs:
        if closed is None:
            continue
        for mode in ("plain", "stream"):
            o, c = opened.results[mode, 64], closed.results[mode, 64]
            p99o, p99c = opened.results[mode, "80%"]["p99_ms"], closed.results[mode, "80%"]["p99_ms"]
            print(f"  {closed.name.removesuffix(' page closed'):<20} {mode:<6} at 64 conns: server CPU ms/req "
                  f"{o['cpu_ms']:.2f} open vs {c['cpu_ms']:.2f} closed (x{_ratio(o['cpu_ms'], c['cpu_ms']):.3f}); "
                  f"req/s x{_ratio(o['rps'], c['rps']):.3f}; the browser itself used "
                  f"{100 * o['browser_cpu_s'] / o['elapsed_s']:.0f}% of a core; p99 at 80% {p99o:.1f} vs {p99c:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measurement")
    parser.add_argument("--workers", default="1,2", help="worker counts to compare, e.g. 1,2")
    parser.add_argument("--log", choices=("both", "on", "off"), default="both", help="route serve's request log")
    parser.add_argument("--no-litellm", action="store_true", help="measure route serve only")
    parser.add_argument("--api", choices=("chat", "messages"), default="chat",
                        help="chat completions (default) or the Anthropic Messages API, upstream and down")
    parser.add_argument("--page", choices=("closed", "open", "both"), default="closed",
                        help="route serve's web view (/ui) open in a headless Chromium while measuring")
    parser.add_argument("--peers", default="",
                        help="compare with other gateways, case by case: portkey,litellm (benchmarks/proxy_peers.py; "
                             "Portkey is installed with npm into the user's cache on first use)")
    parser.add_argument("--base", default="",
                        help="compare with an earlier checkout of this project (`git worktree add DIR COMMIT`), "
                             "interleaved: benchmarks/proxy_before.py")
    parser.add_argument("--repeat", type=int, default=3, help="with --peers or --base: repetitions, interleaved")
    parser.add_argument("--connections", type=int, default=16, help="with --peers: wrk's connections")
    args = parser.parse_args()
    args.workers = [int(w) for w in args.workers.split(",")]
    args.peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    if shutil.which("wrk") is None:
        print("skipped: this benchmark drives the servers with wrk, which is not installed "
              "(Debian/Ubuntu: `apt-get install wrk`; macOS: `brew install wrk`)")
        return 0
    if not Path("/proc/self/stat").exists():
        print("skipped: CPU per request is read from /proc (Linux only)")
        return 0
    if args.page != "closed" and (problem := _page_problem()) is not None:
        print(f"skipped: --page {args.page} opens the web view in a browser, but {problem}")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="route-bench-"))
    key = "sk-" + secrets.token_hex(24)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "ROUTE_HOME": str(tmp / "home"),
           "BENCH_KEY": key, "LITELLM_MASTER_KEY": key, "PYTHONUNBUFFERED": "1"}
    if args.base:
        from benchmarks import proxy_before

        try:
            return proxy_before.run(args, env, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.peers:
        from benchmarks import proxy_peers

        try:
            return proxy_peers.run(args, env, tmp, key, lambda: _litellm_command(args, env))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "post.lua").write_text(LUA)
    servers, loaders = _cores()
    sim_port = _free_port()
    sim = subprocess.Popen([sys.executable, "-c", f"from backends.simulator import serve; serve(port={sim_port}, "
                            f"profiles={PROFILE!r})"], env=env, stdout=(tmp / "sim.log").open("w"),
                           stderr=subprocess.STDOUT, cwd=ROOT, preexec_fn=_pinned(servers), start_new_session=True)
    try:
        _wait_ready(f"http://127.0.0.1:{sim_port}/healthz", sim, 30, tmp / "sim.log")
        proxies = _proxies(args, tmp, f"http://127.0.0.1:{sim_port}/v1", env)
        load = os.getloadavg()[0]
        litellm_rate: dict = {}
        for proxy in proxies:
            log = tmp / f"{proxy.name.replace(' ', '_')}.log"
            proc = subprocess.Popen(proxy.cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=ROOT,
                                    preexec_fn=_pinned(servers), start_new_session=True)
            try:
                _wait_ready(proxy.health, proc, 180, log)
                print(f"measuring {proxy.name} ...", flush=True)
                with _page_open(proxy, key):
                    _measure(proxy, proc.pid, args, env, tmp / "post.lua", litellm_rate)
            finally:
                _stop(proc)
        cores = len(os.sched_getaffinity(0))
        header = (f"\nSIMULATED backend, own process: 16 tokens at once; API {args.api}; {args.duration:g} s per "
                  f"figure; {cores} cores, " + (f"load generators on CPU {sorted(loaders)}, servers on the rest"
                                               if loaders else "too few to keep load generators apart from the "
                                               "servers: they share") +
                  f"; load average {load:.1f} at start, {os.getloadavg()[0]:.1f} at end")
        return _report(proxies, header)
    finally:
        _stop(sim)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
