"""Added latency of `route serve` over calling the model server directly, beside LiteLLM's proxy.

    LITELLM_LOCAL_MODEL_COST_MAP=True python benchmarks/proxy.py [--requests-scale 1.0] [--api messages]

One SIMULATED OpenAI-compatible server (separate process) answers every request with the same
short stream. Three ways to reach it, measured in the same run, at 1, 16 and 64 concurrent
streaming clients: directly; through `route serve` (model `auto`, request log on, bearer auth
on); through `litellm --config` (one worker, master key). Latency is request to last byte of
the stream. "Added" is the proxy's percentile minus the direct percentile at that concurrency.
Target: our added p50 under a quarter of LiteLLM's at every concurrency, with no errors.
LiteLLM's proxy needs its proxy dependencies (see the `bench` extra); without them the run
prints our figures only and says so. `--api messages` measures the Anthropic Messages endpoint
(`/v1/messages`) of all three instead: the simulator answers it directly too, and both proxies
reach it through their Anthropic backends.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PROFILE = {"bench": {"ttft_s": 0.01, "tokens_per_s": 1000.0, "answer_tokens": 16}}
LEVELS = ((1, 100), (16, 480), (64, 960))  # (concurrent clients, requests)
BODY = {"model": "", "messages": [{"role": "user", "content": "Say something short."}], "stream": True,
        "max_tokens": 16}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, proc: subprocess.Popen, timeout_s: float, headers: dict | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with {proc.returncode}")
        try:
            if httpx.get(url, headers=headers, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up within {timeout_s:.0f} s")


def _start(cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=ROOT)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


async def _one(client: httpx.AsyncClient, url: str, body: dict, headers: dict) -> float:
    started = time.perf_counter()
    async with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code != 200:
            await response.aread()
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:200]}")
        saw_done = False
        async for line in response.aiter_lines():
            # A chat stream ends with [DONE], a Messages stream with its message_stop event.
            if line.startswith(("data: [DONE]", "event: message_stop")):
                saw_done = True
        if not saw_done:
            raise RuntimeError("stream ended without [DONE] or message_stop")
    return time.perf_counter() - started


async def _level(url: str, model: str, key: str | None, clients: int, requests: int) -> tuple[list[float], int]:
    body = {**BODY, "model": model}
    headers = {"authorization": f"Bearer {key}"} if key else {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    times: list[float] = []
    errors = 0
    queue = list(range(requests))
    async with httpx.AsyncClient(limits=limits, timeout=30.0, trust_env=False) as client:
        # Open every connection first: connection setup is not what this measures.
        await asyncio.gather(*(_one(client, url, body, headers) for _ in range(clients)))

        async def worker() -> None:
            nonlocal errors
            while queue:
                queue.pop()
                try:
                    times.append(await _one(client, url, body, headers))
                except Exception:  # counted and reported: a benchmark with errors is not a result
                    errors += 1

        await asyncio.gather(*(worker() for _ in range(clients)))
    return times, errors


def _litellm_ready() -> bool:
    try:
        subprocess.run([sys.executable, "-c", "import litellm.proxy.proxy_server"], check=True, cwd=ROOT,
                       capture_output=True, timeout=120, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        return True
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests-scale", type=float, default=1.0, help="multiply the request counts")
    parser.add_argument("--no-litellm", action="store_true", help="measure only direct and route serve")
    parser.add_argument("--api", choices=("chat", "messages"), default="chat",
                        help="chat completions (default) or the Anthropic Messages API")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="route-bench-"))
    key = "sk-" + secrets.token_hex(24)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "ROUTE_HOME": str(tmp / "home"),
           "BENCH_KEY": key, "LITELLM_MASTER_KEY": key, "PYTHONUNBUFFERED": "1"}
    sim_port, route_port, litellm_port = _free_port(), _free_port(), _free_port()
    sim_base = f"http://127.0.0.1:{sim_port}/v1"
    # With --api messages both proxies speak Messages upstream too: our anthropic kind, litellm's
    # anthropic provider, against the simulator's /v1/messages.
    kind, provider, api_base = (("openai", "openai", sim_base) if args.api == "chat"
                                else ("anthropic", "anthropic", sim_base.removesuffix("/v1")))
    (tmp / "route.yaml").write_text(
        f"backends:\n  sim:\n    kind: {kind}\n    model: bench\n    base_url: {sim_base}\n"
        "routing:\n  tiers:\n    - name: only\n      backends: [sim]\n")
    (tmp / "litellm.yaml").write_text(
        f"model_list:\n  - model_name: bench\n    litellm_params:\n      model: {provider}/bench\n"
        f"      api_base: {api_base}\n      api_key: sk-none\n")
    procs: list[subprocess.Popen] = []
    try:
        procs.append(_start([sys.executable, "-c", f"from backends.simulator import serve; serve(port={sim_port}, "
                             f"profiles={PROFILE!r})"], env, tmp / "sim.log"))
        _wait_ready(f"http://127.0.0.1:{sim_port}/healthz", procs[-1], 30)
        procs.append(_start([sys.executable, "-m", "router.cli", "serve", "--port", str(route_port), "--config",
                             str(tmp / "route.yaml"), "--api-key-env", "BENCH_KEY"], env, tmp / "route.log"))
        _wait_ready(f"http://127.0.0.1:{route_port}/healthz", procs[-1], 60)
        path = "/chat/completions" if args.api == "chat" else "/messages"
        targets = [("direct", f"{sim_base}{path}", "bench", None),
                   ("route serve", f"http://127.0.0.1:{route_port}/v1{path}", "auto", key)]
        use_litellm = not args.no_litellm and shutil.which("litellm", path=str(Path(sys.executable).parent)) \
            and _litellm_ready()
        if use_litellm:
            procs.append(_start([str(Path(sys.executable).parent / "litellm"), "--config", str(tmp / "litellm.yaml"),
                                 "--port", str(litellm_port), "--num_workers", "1"], env, tmp / "litellm.log"))
            _wait_ready(f"http://127.0.0.1:{litellm_port}/health/liveliness", procs[-1], 120)
            targets.append(("litellm proxy", f"http://127.0.0.1:{litellm_port}/v1{path}", "bench", key))
        else:
            print("LiteLLM's proxy is not runnable here (install the `bench` extra): measuring route serve only")
        print(f"API: {args.api} ({path})")
        return _run(targets, args.requests_scale)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def _report_row(clients: int, name: str, times: list[float], errors: int, base50: float,
                base99: float) -> tuple[float, float, int]:
    """Print one row; returns (added p50, added p99, errors) in seconds."""
    p50, p99 = _percentile(times, 50), _percentile(times, 99)
    extra = "" if name == "direct" else f" {(p50 - base50) * 1000:>10.2f} {(p99 - base99) * 1000:>10.2f}"
    print(f"{clients:>7} {name:<14} {len(times):>5} {errors:>4} {p50 * 1000:>8.2f} {p99 * 1000:>8.2f}{extra}")
    return p50 - base50, p99 - base99, errors


def _verdict(added: dict[str, tuple[float, float, int]]) -> bool:
    """Our added p50 under a quarter of LiteLLM's, and no errors on either."""
    ours, theirs = added["route serve"][0], added["litellm proxy"][0]
    ratio = ours / theirs if theirs > 0 else float("inf")
    ok = ratio < 0.25 and added["route serve"][2] == 0 and added["litellm proxy"][2] == 0
    print(f"{'':>7} added p50: route serve / litellm proxy = {ratio:.3f}  (target < 0.25: {'met' if ok else 'NOT met'})")
    return ok


def _run(targets, scale: float) -> int:
    print(f"SIMULATED backend: ttft {PROFILE['bench']['ttft_s'] * 1000:.0f} ms, "
          f"{PROFILE['bench']['answer_tokens']} tokens at {PROFILE['bench']['tokens_per_s']:.0f} tok/s, streamed")
    print(f"{'clients':>7} {'target':<14} {'n':>5} {'err':>4} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'added p50':>10} {'added p99':>10}")
    verdicts = []
    for clients, requests in LEVELS:
        n = max(clients, int(requests * scale))
        results = {name: asyncio.run(_level(url, model, key, clients, n)) for name, url, model, key in targets}
        base50 = _percentile(results["direct"][0], 50)
        base99 = _percentile(results["direct"][0], 99)
        added = {name: _report_row(clients, name, times, errors, base50, base99)
                 for name, (times, errors) in results.items()}
        if "litellm proxy" in added:
            verdicts.append(_verdict(added))
    if verdicts:
        print("target met at every concurrency" if all(verdicts) else "target NOT met at every concurrency")
    return 0


if __name__ == "__main__":
    sys.exit(main())
