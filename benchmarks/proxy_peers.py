"""`route serve` beside other gateways, case by case: the peer comparison of benchmarks/proxy.py.

    python benchmarks/proxy.py --peers portkey,litellm [--repeat 3] [--duration 5] [--connections 16]

One SIMULATED OpenAI-compatible server in its own process answers at once (every token of a
stream in one write, so what is measured is the proxy). In front of it, started side by side
and measured in turn, interleaved within each repetition:

- `route serve` as a user starts it (request log on, one access-log line per request on
  stderr), and `route serve --quiet` (no access log);
- Portkey's AI gateway (`@portkey-ai/gateway` from npm, a Node gateway), installed by this
  script into a cache directory on first use (skipped, saying why, without node or npm);
- LiteLLM's proxy (`litellm`, the `bench` extra; skipped, saying why, without it);
- the simulator alone, for the ceiling of the box.

Cases: plain answers of 16 tokens to 1 KB, 30 KB and 200 KB request bodies (an agent's history
is the large one), and streams of 10 and 1,000 tokens. For each: requests per second with wrk
(closed loop, `--connections`), and CPU per request: the proxy's processes' CPU seconds
(/proc, children included) over requests answered. CPU per request does not depend on how
busy the box is; requests per second does, and is only compared within one repetition's run.
Prints median [min-max] over the repetitions and the verdicts, exiting 1 when one is missed:
issue 26's (route's req/s ahead of Portkey's in every case, and route's CPU per 1,000-token
stream at most half of Portkey's) and issue 39's (`route serve` with its access log ahead of
LiteLLM's proxy in every case, resident memory under 100 MiB at the end of the run, and a
1,000-token stream at no less than 35% of the simulator's own rate).

Portkey 1.15.2 on Node 20 fails every streamed answer with `TypeError: immutable` (it appends
headers to the upstream fetch Response's headers, which Node makes immutable, through
@hono/node-server's Response); the script starts it with a six-line preload that hands it each
upstream response with a mutable copy of its headers, and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.proxy import _free_port, _stop, _tree_cpu_s, _wait_ready

ROOT = Path(__file__).resolve().parent.parent
PORTKEY_VERSION = "1.15.2"
SETTLE_S = 1.0
# One model: answers of up to 1,000 tokens, cut by each case's max_tokens.
PROFILE = {"bench": {"ttft_s": 0.0, "answer_tokens": 1000}}
STREAM_CASE = "stream 1000 tok"  # the case of the CPU target
LUA = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
for line in string.gmatch(os.getenv("BENCH_HEADERS") or "", "[^\\n]+") do
  local name, value = string.match(line, "^([^:]+): (.*)$")
  wrk.headers[name] = value
end
local file = io.open(os.getenv("BENCH_BODY_FILE"), "rb")
wrk.body = file:read("*a")
file:close()
"""
SHIM = """// Portkey appends headers to the upstream fetch Response's headers, which Node makes
// immutable ("TypeError: immutable" on every streamed answer): hand it a mutable copy.
const UpstreamResponse = globalThis.Response;
const upstreamFetch = globalThis.fetch;
globalThis.fetch = async (...args) => {
  const r = await upstreamFetch(...args);
  return new UpstreamResponse(r.body, {status: r.status, statusText: r.statusText, headers: new Headers(r.headers)});
};
"""
_WORDS = ("the function returns a list of results after checking each input against the schema and "
          "logging what failed so that the caller can retry with a smaller batch ").split()


@dataclass(frozen=True)
class Case:
    name: str
    body_bytes: int
    stream: bool
    max_tokens: int


CASES = (Case("plain 1 KB", 1_000, False, 16), Case("plain 30 KB", 30_000, False, 16),
         Case("plain 200 KB", 200_000, False, 16), Case("stream 10 tok", 1_000, True, 10),
         Case(STREAM_CASE, 1_000, True, 1000))


@dataclass
class Peer:
    name: str
    cmd: list[str] | None  # None: the simulator itself
    health: str
    url: str
    model: str
    headers: dict[str, str]
    cwd: Path = ROOT
    proc: subprocess.Popen | None = None
    figures: dict = field(default_factory=dict)  # (case, "rps" | "cpu_ms") -> [values]


def _history(size: int) -> list[dict[str, str]]:
    """A conversation of about `size` bytes of JSON: an agent's turns, each about 1 KB."""
    messages = [{"role": "system", "content": "You are a careful coding agent."}]
    total, turn = 60, 0
    while total < size:
        words = [_WORDS[(turn * 7 + i) % len(_WORDS)] for i in range(min(160, max(8, (size - total) // 6)))]
        content = " ".join(words)
        messages.append({"role": "user" if turn % 2 == 0 else "assistant", "content": content})
        total += len(content) + 40
        turn += 1
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": "Go on."})
    return messages


def _body_file(tmp: Path, case: Case, model: str) -> Path:
    path = tmp / f"body-{case.name.replace(' ', '_')}-{model}.json"
    if not path.exists():
        path.write_text(json.dumps({"model": model, "max_tokens": case.max_tokens, "stream": case.stream,
                                    "messages": _history(case.body_bytes)}))
    return path


def _wrk(url: str, conns: int, seconds: float, env: dict, lua: Path) -> tuple[int, int]:
    import re

    out = subprocess.run(["wrk", "-t1", f"-c{conns}", f"-d{seconds:g}s", "--timeout", "30s", "-s", str(lua), url],
                         env=env, capture_output=True, text=True, check=True).stdout
    done = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return done - bad, bad + (sum(int(n) for n in errors.groups()) if errors else 0)


def _rss_mib(pid: int) -> float:
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1024


def portkey_dir(install: bool) -> tuple[Path | None, str]:
    """Portkey's gateway, installed under the user's cache on first use: (its directory, note)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return None, "node and npm are not installed (Debian: apt-get install nodejs npm)"
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "route-bench" / f"portkey-{PORTKEY_VERSION}"
    entry = home / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    if not entry.exists():
        if not install:
            return None, f"not installed under {home}"
        home.mkdir(parents=True, exist_ok=True)
        print(f"installing @portkey-ai/gateway@{PORTKEY_VERSION} with npm into {home} ...", flush=True)
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(home),
                               f"@portkey-ai/gateway@{PORTKEY_VERSION}"], capture_output=True, text=True, timeout=600)
        if done.returncode or not entry.exists():
            return None, f"npm install failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    (home / "shim.mjs").write_text(SHIM)
    return home, ""


def _peers(args, tmp: Path, sim: str, key: str, litellm: Callable[[], list[str] | str]) -> list[Peer]:
    (tmp / "route.yaml").write_text(f"backends:\n  sim:\n    kind: openai\n    model: bench\n    base_url: {sim}/v1\n"
                                    "routing:\n  tiers:\n    - name: only\n      backends: [sim]\n")
    auth = {"Authorization": f"Bearer {key}"}
    peers = []
    for quiet in (False, True):
        port = _free_port()
        peers.append(Peer("route --quiet" if quiet else "route", [
            sys.executable, "-m", "router.cli", "serve", "--port", str(port), "--config", str(tmp / "route.yaml"),
            "--api-key-env", "BENCH_KEY", *(["--quiet"] if quiet else [])],
            f"http://127.0.0.1:{port}/healthz", f"http://127.0.0.1:{port}/v1/chat/completions", "auto", auth))
    if "portkey" in args.peers:
        home, why = portkey_dir(install=True)
        if home is None:
            print(f"Portkey's gateway not measured: {why}")
        else:
            port = _free_port()
            entry = home / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
            peers.append(Peer("portkey", ["node", "--import", str(home / "shim.mjs"), str(entry), f"--port={port}",
                                          "--headless"], f"http://127.0.0.1:{port}/",
                              f"http://127.0.0.1:{port}/v1/chat/completions", "bench",
                              {"x-portkey-provider": "openai", "x-portkey-custom-host": f"{sim}/v1",
                               "Authorization": "Bearer sk-none"}, cwd=home))
    if "litellm" in args.peers:
        litellm_cmd = litellm()
        if isinstance(litellm_cmd, str):
            print(f"LiteLLM's proxy not measured: {litellm_cmd}")
        else:
            (tmp / "litellm.yaml").write_text("model_list:\n  - model_name: bench\n    litellm_params:\n"
                                              f"      model: openai/bench\n      api_base: {sim}/v1\n      api_key: sk-none\n")
            port = _free_port()
            peers.append(Peer("litellm", [*litellm_cmd, "--config", str(tmp / "litellm.yaml"), "--port", str(port)],
                              f"http://127.0.0.1:{port}/health/liveliness", f"http://127.0.0.1:{port}/v1/chat/completions",
                              "bench", auth))
    peers.append(Peer("simulator alone", None, f"{sim}/healthz", f"{sim}/v1/chat/completions", "bench", {}))
    return peers


def _measure(peer: Peer, case: Case, args, env: dict, tmp: Path, pid: int, warm: bool) -> None:
    run_env = {**env, "BENCH_BODY_FILE": str(_body_file(tmp, case, peer.model)),
               "BENCH_HEADERS": "\n".join(f"{k}: {v}" for k, v in peer.headers.items())}
    lua = tmp / "post.lua"
    if warm:
        _wrk(peer.url, args.connections, 1, run_env, lua)
    time.sleep(SETTLE_S)
    before = _tree_cpu_s(pid)
    started = time.perf_counter()
    ok, failed = _wrk(peer.url, args.connections, args.duration, run_env, lua)
    elapsed = time.perf_counter() - started
    cpu = _tree_cpu_s(pid) - before
    peer.figures.setdefault((case.name, "rps"), []).append(ok / elapsed)
    peer.figures.setdefault((case.name, "cpu_ms"), []).append(1000 * cpu / ok if ok else float("nan"))
    peer.figures.setdefault((case.name, "failed"), []).append(failed)


def _spread(values: list[float], fmt: str) -> str:
    finite = [v for v in values if v == v]
    if not finite:
        return "-"
    return f"{statistics.median(finite):{fmt}} [{min(finite):{fmt}}-{max(finite):{fmt}}]"


def _report(peers: list[Peer], args, header: str) -> bool:
    """Prints the table and the verdicts; whether every target measured was met."""
    print(header)
    width = 24
    print(f"\n{'case':<26}" + "".join(f"{p.name:>{width}}" for p in peers))
    for case in CASES:
        for what, label, fmt in (("rps", "req/s", ".0f"), ("cpu_ms", "CPU ms/req", ".2f")):
            row = f"{case.name + ': ' + label:<26}"
            for p in peers:
                values = p.figures.get((case.name, what), [])
                shown = _spread(values, fmt) if what == "rps" or p.cmd is not None else _spread(values, fmt) + "*"
                row += f"{shown:>{width}}"
            print(row)
        failed = {p.name: sum(p.figures.get((case.name, "failed"), [])) for p in peers}
        if any(failed.values()):
            print(f"{'':<26}failed requests: " + ", ".join(f"{n} {c}" for n, c in failed.items() if c))
    print(f"{'memory (RSS, MiB)':<26}" + "".join(f"{p.figures.get('rss', float('nan')):>{width}.0f}" for p in peers))
    print("* the simulator's own CPU per request")
    return _verdicts(peers)


def _verdicts(peers: list[Peer]) -> bool:
    """Prints the targets' verdicts (issue 26, then issue 39); whether every one measured was met."""
    by_name = {p.name: p for p in peers}
    portkey = by_name.get("portkey")
    met = True

    def verdict(ok: bool) -> str:
        nonlocal met
        met = met and ok
        return "met" if ok else "NOT met"

    print("\nverdicts (issue 26), medians of the repetitions:")
    if portkey is None:
        print("  Portkey was not measured: no verdict")
    else:
        _ahead_of_portkey(by_name, portkey, verdict)
    route = by_name["route"]  # as a user starts it: the access log on
    print("verdicts (issue 39), `route serve` with its access log:")
    litellm = by_name.get("litellm")
    if litellm is None:
        print("  LiteLLM was not measured: no verdict")
    else:
        for case in CASES:
            mine = statistics.median(route.figures[case.name, "rps"])
            theirs = statistics.median(litellm.figures[case.name, "rps"])
            print(f"  {case.name:<16} req/s {mine:7.0f} vs LiteLLM {theirs:7.0f} ({verdict(mine > theirs)}: ahead)")
    rss = route.figures["rss"]
    print(f"  memory {rss:.0f} MiB after the run ({verdict(rss < 100)}: under 100)")
    mine = statistics.median(route.figures[STREAM_CASE, "rps"])
    ceiling = statistics.median(by_name["simulator alone"].figures[STREAM_CASE, "rps"])
    print(f"  {STREAM_CASE}: {mine:.0f} req/s, {mine / ceiling:.0%} of the simulator's own {ceiling:.0f} "
          f"({verdict(mine >= 0.35 * ceiling)}: at least 35%)")
    return met


def _ahead_of_portkey(by_name: dict[str, Peer], portkey: Peer, verdict: Callable[[bool], str]) -> None:
    for name in ("route", "route --quiet"):
        ours = by_name[name]
        for case in CASES:
            mine = statistics.median(ours.figures[case.name, "rps"])
            theirs = statistics.median(portkey.figures[case.name, "rps"])
            print(f"  {name:<14} {case.name:<16} req/s {mine:7.0f} vs Portkey {theirs:7.0f}: x{mine / theirs:.2f} "
                  f"({verdict(mine > theirs)}: ahead)")
        mine = statistics.median(ours.figures[STREAM_CASE, "cpu_ms"])
        theirs = statistics.median(portkey.figures[STREAM_CASE, "cpu_ms"])
        print(f"  {name:<14} {STREAM_CASE:<16} CPU {mine:.2f} vs Portkey {theirs:.2f} ms/req: x{mine / theirs:.2f} "
              f"({verdict(mine <= 0.5 * theirs)}: at most x0.50)")


def run(args, env: dict, tmp: Path, key: str, litellm: Callable[[], list[str] | str]) -> int:
    """The peer comparison: every peer started, then each repetition measures each case on each."""
    (tmp / "post.lua").write_text(LUA)
    sim_port = _free_port()
    sim_url = f"http://127.0.0.1:{sim_port}"
    sim = subprocess.Popen([sys.executable, "-c", f"from backends.simulator import serve; serve(port={sim_port}, "
                            f"profiles={PROFILE!r})"], env=env, stdout=(tmp / "sim.log").open("w"),
                           stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    peers: list[Peer] = []
    try:
        _wait_ready(f"{sim_url}/healthz", sim, 30, tmp / "sim.log")
        peers = _peers(args, tmp, sim_url, key, litellm)
        for peer in peers:
            if peer.cmd is None:
                continue
            log = tmp / f"{peer.name.replace(' ', '_')}.log"
            peer.proc = subprocess.Popen(peer.cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                         cwd=peer.cwd, start_new_session=True)
            _wait_ready(peer.health, peer.proc, 180, log)
        load = os.getloadavg()[0]
        started = time.perf_counter()
        for rep in range(args.repeat):
            for case in CASES:
                for peer in peers:
                    print(f"repetition {rep + 1}/{args.repeat}: {case.name} through {peer.name} ...", flush=True)
                    _measure(peer, case, args, env, tmp, (peer.proc or sim).pid, warm=rep == 0)
        for peer in peers:
            peer.figures["rss"] = _rss_mib((peer.proc or sim).pid)
        cores = len(os.sched_getaffinity(0))
        header = (f"\nSIMULATED upstream in its own process, answering at once; {args.connections} connections (wrk, "
                  f"closed loop), {args.duration:g} s a figure, {args.repeat} repetitions, median [min-max]; "
                  f"{cores} cores shared by the proxies, the simulator and wrk; load average {load:.1f} at start, "
                  f"{os.getloadavg()[0]:.1f} at end ({time.perf_counter() - started:.0f} s)."
                  + ("\nPortkey was started with a preload that gives it mutable upstream response headers "
                     "(see this module's docstring)." if any(p.name == "portkey" for p in peers) else ""))
        met = _report(peers, args, header)
    finally:
        for peer in peers:
            if peer.proc is not None:
                _stop(peer.proc)
        _stop(sim)
    return 0 if met else 1
